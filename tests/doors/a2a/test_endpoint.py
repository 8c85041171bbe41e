"""The A2A routes' refusals before any call is read (docs/protocol.md, "A2A agent"), through
Django's test client; tests/e2e/test_a2a.py runs the calls for real."""

from __future__ import annotations

import pytest
from django.test import override_settings

pytestmark = pytest.mark.django_db


def test_without_a_token_the_endpoint_is_401_and_the_public_card_is_served(client):
    r = client.post("/a2a/default/", data={"jsonrpc": "2.0"}, content_type="application/json")
    assert r.status_code == 401 and r["WWW-Authenticate"] == "Bearer" and r.json()["error"] == "not_authenticated"
    card = client.get("/.well-known/agent-card.json").json()
    assert card["supportedInterfaces"][0]["url"] == "http://testserver/a2a/default/"
    assert [skill["id"] for skill in card["skills"]] == ["default"]


def test_a_bad_token_is_401_before_anything_is_read(client):
    r = client.post(
        "/a2a/default/", data=b"{", content_type="application/json", headers={"Authorization": "Bearer as_nope"}
    )
    assert r.status_code == 401 and r["WWW-Authenticate"].startswith("Bearer")


@override_settings(AGENT_A2A=False)
def test_turned_off_every_route_is_404(client):
    assert client.get("/.well-known/agent-card.json").status_code == 404
    assert client.get("/a2a/default/.well-known/agent-card.json").status_code == 404
    r = client.post("/a2a/default/", data={}, content_type="application/json")
    assert r.status_code == 404 and r.json()["error"] == "not_found"
