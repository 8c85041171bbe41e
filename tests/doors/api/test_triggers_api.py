"""`/api/triggers/` (docs/protocol.md, "Triggers"): each field's rules, the answer's shape, the
secret shown once and never stored as it is, owner-only access, the per-user limit."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from django.test import Client

from chat.conversations.services import conversation_create
from chat.models import Trigger
from tests.doors.openapi.test_openapi import _check

pytestmark = pytest.mark.django_db

BASE = "/api/triggers/"


def post(client, body):
    return client.post(BASE, json.dumps(body), content_type="application/json")


def patch(client, trigger_id, body):
    return client.patch(f"{BASE}{trigger_id}/", json.dumps(body), content_type="application/json")


def refused_field(response) -> str:
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["error"] == "bad_request" and body["message"]
    return body["field"]


def test_create_answers_the_trigger_and_its_secret_once(api):
    response = post(api, {"prompt": "A build failed: {{payload}}"})
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {
        "id", "name", "agent", "prompt", "conversation", "enabled", "url", "createdAt", "updatedAt",
        "lastRunAt", "lastRunId", "lastStatus", "secret",
    }  # fmt: skip
    assert re.fullmatch(r"hk_[A-Za-z0-9_-]{43}", body["secret"])
    assert body["url"] == f"/hooks/{body['id']}/"
    assert (body["name"], body["agent"], body["conversation"], body["enabled"]) == (
        "A build failed: {{payload}}",
        "default",
        "new",
        True,
    )
    _check(response, "post", "api/triggers/")
    _check(api.get(BASE), "get", "api/triggers/")
    _check(api.get(f"{BASE}{body['id']}/"), "get", "api/triggers/<uuid:trigger_id>/")
    secret = body.pop("secret")
    assert api.get(f"{BASE}{body['id']}/").json() == body
    assert api.get(BASE).json() == {"triggers": [body]}
    stored = Trigger.objects.get(pk=body["id"])
    assert secret not in (stored.secret_digest, stored.secret_sealed)  # never as it is


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "prompt"),
        ({"prompt": "   "}, "prompt"),
        ({"prompt": 5}, "prompt"),
        ({"prompt": "no placeholder"}, "prompt"),
        ({"prompt": "{{payload}}", "name": "  "}, "name"),
        ({"prompt": "{{payload}}", "name": "x" * 101}, "name"),
        ({"prompt": "{{payload}}", "agent": "no-such-agent"}, "agent"),
        ({"prompt": "{{payload}}", "conversation": "old"}, "conversation"),
        ({"prompt": "{{payload}}", "conversation": str(uuid.uuid4())}, "conversation"),
        ({"prompt": "{{payload}}", "enabled": "yes"}, "enabled"),
    ],
)
def test_a_refused_field_is_named_and_nothing_is_stored(api, body, field):
    assert refused_field(post(api, body)) == field
    assert not Trigger.objects.exists()


def test_another_users_conversation_is_refused(api, make_user):
    theirs = conversation_create(owner=make_user("bob"), title="bob's")
    assert refused_field(post(api, {"prompt": "{{payload}}", "conversation": str(theirs.pk)})) == "conversation"


def test_patch_changes_fields_and_checks_them(api, alice):
    mine = conversation_create(owner=alice, title="mine")
    made = post(api, {"prompt": "Look: {{payload}}", "name": "Hook"}).json()
    changed = patch(api, made["id"], {"name": "Renamed", "enabled": False, "conversation": str(mine.pk)})
    assert changed.status_code == 200
    assert (changed.json()["name"], changed.json()["enabled"], changed.json()["conversation"]) == (
        "Renamed",
        False,
        str(mine.pk),
    )
    assert "secret" not in changed.json()
    assert refused_field(patch(api, made["id"], {"prompt": "no placeholder"})) == "prompt"
    assert refused_field(patch(api, made["id"], {})) is None
    assert Trigger.objects.get(pk=made["id"]).prompt == "Look: {{payload}}"


def test_another_users_trigger_answers_as_a_missing_one(api, make_user):
    bob = Client()
    bob.force_login(make_user("bob"))
    made = post(api, {"prompt": "{{payload}}"}).json()
    for response in (
        bob.get(f"{BASE}{made['id']}/"),
        patch(bob, made["id"], {"name": "mine"}),
        bob.delete(f"{BASE}{made['id']}/"),
        bob.get(f"{BASE}{made['id']}/runs/"),
        bob.get(f"{BASE}not-a-uuid/"),
    ):
        assert response.status_code == 404
    assert bob.get(BASE).json() == {"triggers": []}
    assert api.delete(f"{BASE}{made['id']}/").status_code == 204
    assert api.get(f"{BASE}{made['id']}/").status_code == 404
    gone = Client().post(made["url"], "{}", content_type="application/json", headers={
        "Authorization": f"Bearer {made['secret']}"
    })  # fmt: skip
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "NOT_FOUND"  # its URL, at once


def test_runs_lists_nothing_yet_and_checks_limit(api):
    made = post(api, {"prompt": "{{payload}}"}).json()
    assert api.get(f"{BASE}{made['id']}/runs/").json() == {"runs": []}
    assert refused_field(api.get(f"{BASE}{made['id']}/runs/?limit=0")) == "limit"


def test_the_per_user_limit(api, settings):
    settings.AGENT_MAX_TRIGGERS = 1
    assert post(api, {"prompt": "{{payload}}"}).status_code == 201
    refused = post(api, {"prompt": "{{payload}}"})
    assert refused.status_code == 409 and refused.json()["error"] == "too_many_triggers"


def test_signed_out_is_401(client):
    assert client.get(BASE).status_code == 401


def test_staff_see_and_disable_triggers_in_the_admin_without_secrets(api, admin_client):
    made = post(api, {"prompt": "{{payload}}", "name": "Alerts"}).json()
    stored = Trigger.objects.get(pk=made["id"])
    listing = admin_client.get("/admin/chat/trigger/")
    assert listing.status_code == 200 and b"Alerts" in listing.content
    page = admin_client.get(f"/admin/chat/trigger/{made['id']}/change/")
    assert page.status_code == 200
    for hidden in (made["secret"], stored.secret_digest, stored.secret_sealed):
        assert hidden.encode() not in listing.content + page.content
    done = admin_client.post(
        "/admin/chat/trigger/", {"action": "disable", "_selected_action": [made["id"]]}, follow=True
    )
    assert done.status_code == 200
    assert Trigger.objects.get(pk=made["id"]).enabled is False
