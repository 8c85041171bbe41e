"""/api/budgets/ and a token's budget (docs/protocol.md, "Budgets", "Managing budgets"): staff
sessions manage budgets (400 for what is not usable, 409 for a second of one scope, target and
period, 404 for an unknown id); a token, even a staff user's, and a non-staff user get 403 and
change nothing; a token's owner sets its budget by session only; a change applies to the next
start. Every answer as the OpenAPI document describes it."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from chat.accounts.tokens import token_create
from chat.conversations.services import conversation_create
from chat.exceptions import QuotaExceeded
from chat.models import AgentProfile, Budget, ModelCall, Run
from chat.runs.starts import run_start
from tests.doors.openapi.test_openapi import _check

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def send(client: Client, method: str, url: str, payload=None, **headers):
    return getattr(client, method)(url, json.dumps(payload), content_type="application/json", **headers)


@pytest.fixture
def staff(make_user):
    user = make_user("root")
    user.is_staff = True
    user.save()
    return client_for(user)


def test_staff_make_list_change_and_delete_budgets(staff, make_user, settings):
    settings.AGENT_MESSAGES_PER_MINUTE = 0
    alice = make_user("alice")
    Group.objects.create(name="team")
    AgentProfile.objects.create(name="Helper", slug="helper", model="m")
    made = _check(
        send(staff, "post", "/api/budgets/", {"scope": "user", "user": "alice", "period": "day", "tokens": 5}),
        "post",
        "api/budgets/",
    )
    assert (made["scope"], made["user"], made["group"], made["agent"], made["tokens"], made["cost"]) == (
        "user",
        "alice",
        None,
        None,
        5,
        None,
    )
    for payload in (
        {"scope": "group", "group": "team", "period": "week", "cost": 2.5},
        {"scope": "agent", "agent": "default", "period": "month", "tokens": 0},
        {"scope": "agent", "agent": "helper", "period": "day", "tokens": 9, "cost": 1},
    ):
        assert send(staff, "post", "/api/budgets/", payload).status_code == 201, payload
    again = send(staff, "post", "/api/budgets/", {"scope": "user", "user": "alice", "period": "day", "cost": 1})
    assert again.status_code == 409 and again.json()["error"] == "budget_exists"
    for bad in (
        {"scope": "planet", "period": "day", "tokens": 1},
        {"scope": "user", "user": "nobody", "period": "day", "tokens": 1},
        {"scope": "user", "user": "alice", "period": "year", "tokens": 1},
        {"scope": "user", "user": "alice", "period": "week", "tokens": -1},
        {"scope": "user", "user": "alice", "period": "week", "tokens": 1.5},
        {"scope": "user", "user": "alice", "period": "week", "cost": "1"},
        {"scope": "user", "user": "alice", "period": "week"},
        {"scope": "token", "token": 999, "period": "week", "tokens": 1},
    ):
        response = send(staff, "post", "/api/budgets/", bad)
        assert response.status_code == 400 and response.json()["error"] == "bad_request", bad
    listed = _check(staff.get("/api/budgets/"), "get", "api/budgets/")["budgets"]
    assert [b["scope"] for b in listed] == ["user", "group", "agent", "agent"]
    assert [b["agent"] for b in staff.get("/api/budgets/?agent=default").json()["budgets"]] == ["default"]
    assert len(staff.get("/api/budgets/?scope=agent").json()["budgets"]) == 2
    # The change applies to the next start: 5 tokens used up, then raised.
    conversation = conversation_create(owner=alice)
    run, _ = run_start(conversation=conversation, user=alice, content="x", model="m", worker="w")
    Run.objects.filter(pk=run.pk).update(status="succeeded")
    ModelCall.objects.create(run=run, iteration=1, attempt=1, started_at=run.started_at, total_tokens=5)
    with pytest.raises(QuotaExceeded):
        run_start(conversation=conversation, user=alice, content="x", model="m", worker="w")
    one = "api/budgets/<int:budget_id>/"
    changed = _check(send(staff, "patch", f"/api/budgets/{made['id']}/", {"tokens": 50, "cost": 3}), "patch", one)
    assert (changed["tokens"], changed["cost"]) == (50, 3)
    run_start(conversation=conversation, user=alice, content="x", model="m", worker="w")
    assert send(staff, "patch", f"/api/budgets/{made['id']}/", {"tokens": None}).json()["tokens"] is None
    assert send(staff, "patch", f"/api/budgets/{made['id']}/", {"cost": None}).status_code == 400  # neither left
    assert staff.delete(f"/api/budgets/{made['id']}/").status_code == 204
    assert staff.delete(f"/api/budgets/{made['id']}/").status_code == 404
    assert send(staff, "patch", "/api/budgets/9999/", {"tokens": 1}).status_code == 404


def test_tokens_and_users_who_are_not_staff_get_403_and_change_nothing(staff, make_user):
    alice = make_user("alice")
    root = Client()
    _, value = token_create(user=get_user_model().objects.get(username="root"), name="t", expires_in_days=None)
    payload = {"scope": "user", "user": "alice", "period": "day", "tokens": 5}
    assert send(root, "post", "/api/budgets/", payload, HTTP_AUTHORIZATION=f"Bearer {value}").status_code == 403
    assert root.get("/api/budgets/", HTTP_AUTHORIZATION=f"Bearer {value}").status_code == 403
    assert send(client_for(alice), "post", "/api/budgets/", payload).status_code == 403
    assert client_for(alice).get("/api/budgets/").status_code == 403
    assert not Budget.objects.exists()


def test_a_tokens_owner_sets_its_budget_by_session_only(make_user):
    alice, bob = make_user("alice"), make_user("bob")
    mine = client_for(alice)
    made = send(mine, "post", "/api/tokens/", {"name": "ci", "budget": {"period": "week", "tokens": 100}})
    assert made.status_code == 201, made.content
    assert made.json()["budget"]["period"] == "week" and made.json()["budget"]["tokens"] == 100
    token_id, value = made.json()["id"], made.json()["token"]
    assert send(mine, "post", "/api/tokens/", {"name": "x", "budget": {"period": "year"}}).status_code == 400
    assert [t["name"] for t in mine.get("/api/tokens/").json()["tokens"]] == ["ci"]  # the refused one was not made
    one = "api/tokens/<int:token_id>/"
    changed = _check(
        send(mine, "patch", f"/api/tokens/{token_id}/", {"budget": {"period": "day", "cost": 1.5}}), "patch", one
    )
    assert changed["budget"]["period"] == "day" and changed["budget"]["cost"] == 1.5
    assert Budget.objects.filter(scope="token").count() == 1
    bearer = send(Client(), "patch", f"/api/tokens/{token_id}/", {"budget": None}, HTTP_AUTHORIZATION=f"Bearer {value}")
    assert bearer.status_code == 403
    assert send(client_for(bob), "patch", f"/api/tokens/{token_id}/", {"budget": None}).status_code == 404
    cleared = send(mine, "patch", f"/api/tokens/{token_id}/", {"budget": None})
    assert cleared.status_code == 200 and cleared.json()["budget"] is None and not Budget.objects.exists()
