"""GET /api/usage/'s window and budgets (docs/protocol.md, "Usage" and "Budgets"): N calendar
days of TIME_ZONE, oldest first, per agent with cost (null when nothing was priced), equal to the
sums of the runs' complete.usage; every budget that applies with used, reserved, remaining and
reset; `?days` checked; `?user=` for staff only."""

from __future__ import annotations

import json
from datetime import UTC, timedelta

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from chat.accounts.budgets import period_bounds
from chat.conversations.services import conversation_create
from chat.models import AgentProfile, Budget, ModelCall, Run
from chat.runs.starts import run_start
from tests.asgi_socket import Socket
from tests.doors.openapi.test_openapi import _check
from tests.fakellm import text_reply, tool_call_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def get_json(user, url: str) -> tuple[int, dict]:
    client = Client()
    client.force_login(user)
    response = client.get(url)
    return response.status_code, json.loads(response.content)


def with_usage(reply: dict, prompt: int, completion: int) -> dict:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    return {**reply, "chunks": [*reply["chunks"], {"usage": usage}]}


async def run_message(conversation) -> dict:
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "go"})
    frames = await socket.run_to_end()
    await socket.close()
    return frames[-1]


async def test_the_days_equal_the_sums_of_the_runs_complete_usage(conversation, registry, llm_settings, settings):
    settings.AGENT_MODEL_PRICES = {"fake-model": {"input": 2.0, "output": 4.0}}
    llm_settings.script(
        with_usage(tool_call_reply(("calculator", {"expression": "1+1"})), 20, 5),
        with_usage(text_reply("2"), 30, 4),
        with_usage(text_reply("again"), 7, 3),
    )
    completes = [await run_message(conversation), await run_message(conversation)]
    status, body = await sync_to_async(get_json)(conversation.owner, "/api/usage/?days=3")
    assert status == 200, body
    assert body["timeZone"] == "UTC" and len(body["days"]) == 3
    today = body["days"][-1]
    assert today["date"] == timezone.now().date().isoformat()
    for key in ("promptTokens", "completionTokens", "totalTokens"):
        assert today[key] == sum(c["usage"][key] for c in completes) == body["total"][key]
    assert today["cost"] == pytest.approx((57 * 2.0 + 12 * 4.0) / 1_000_000)
    assert [a["agent"] for a in today["agents"]] == ["default"]
    assert body["agents"][0]["name"] == "Default" and body["agents"][0]["totalTokens"] == 69
    assert body["days"][0] == {
        "date": (timezone.now() - timedelta(days=2)).date().isoformat(),
        "promptTokens": 0,
        "completionTokens": 0,
        "totalTokens": 0,
        "cost": None,
        "agents": [],
    }
    assert body["today"]["totalTokens"] == 69  # the fields it had stay


def spend(user, tokens: int, *, agent=None, days_ago: int = 0) -> None:
    conversation = conversation_create(owner=user)
    run, _ = run_start(conversation=conversation, user=user, content="x", model="m", worker="w")
    Run.objects.filter(pk=run.pk).update(status="succeeded", agent=agent)
    when = timezone.now() - timedelta(days=days_ago)
    ModelCall.objects.create(
        run=run, iteration=1, attempt=1, started_at=when, prompt_tokens=tokens, total_tokens=tokens
    )


def test_budgets_agents_and_unpriced_days(make_user, settings):
    settings.AGENT_DAILY_TOKEN_QUOTA, settings.AGENT_RUN_TOKEN_RESERVE = 1000, "10"
    alice = make_user("alice")
    helper = AgentProfile.objects.create(name="Helper", slug="helper", model="m", everyone=True)
    spend(alice, 100)
    spend(alice, 5, agent=helper, days_ago=1)
    run_start(conversation=conversation_create(owner=alice), user=alice, content="x", model="m", worker="w")
    Budget.objects.create(scope="agent", agent=helper, period="week", tokens=500, cost=2.5)
    status, body = get_json(alice, "/api/usage/?days=2")
    assert status == 200
    assert [d["totalTokens"] for d in body["days"]] == [5, 100] and body["days"][0]["cost"] is None
    assert body["days"][0]["agents"][0]["agent"] == "helper"
    assert [(a["agent"], a["name"], a["totalTokens"]) for a in body["agents"]] == [
        ("default", "Default", 100),
        ("helper", "Helper", 5),
    ]
    by_scope = {(b["scope"], b["unit"]): b for b in body["budgets"]}
    assert set(by_scope) == {("default", "tokens"), ("agent", "tokens"), ("agent", "cost")}
    _, end = period_bounds("day", timezone.now())
    assert by_scope[("default", "tokens")] == {
        "id": None,
        "scope": "default",
        "name": None,
        "period": "day",
        "unit": "tokens",
        "limit": 1000,
        "used": 100,
        "reserved": 10,
        "remaining": 890,
        "resetsAt": end.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        "exhausted": False,
    }
    assert by_scope[("agent", "tokens")]["name"] == "helper" and by_scope[("agent", "tokens")]["reserved"] == 0


def test_days_is_checked_and_user_is_for_staff(make_user):
    alice, root = make_user("alice"), make_user("root")
    root.is_staff = True
    root.save()
    spend(alice, 7)
    for bad in ("0", "367", "x", "-1", "1.5"):
        assert get_json(alice, f"/api/usage/?days={bad}")[0] == 400
    assert get_json(alice, "/api/usage/?days=366")[0] == 200
    assert get_json(alice, "/api/usage/?user=root") == (404, get_json(alice, "/api/usage/?user=nobody")[1])
    assert get_json(alice, "/api/usage/?user=root")[1]["error"] == "not_found"
    status, body = get_json(root, "/api/usage/?user=alice&days=1")
    assert status == 200 and body["total"]["totalTokens"] == 7


def test_the_answers_match_the_openapi_document(make_user, settings):
    """The usage answer with budgets, and a start refused by one over HTTP (429 QUOTA_EXCEEDED
    with Retry-After, retryAfter, resetsAt and budget), as chat.doors.openapi describes them."""
    settings.AGENT_MESSAGES_PER_MINUTE = 0
    alice = make_user("alice")
    Budget.objects.create(scope="user", user=alice, period="month", tokens=10, cost=1.5)
    spend(alice, 10)
    client = Client()
    client.force_login(alice)
    body = _check(client.get("/api/usage/?days=2"), "get", "api/usage/")
    assert {(b["scope"], b["unit"], b["exhausted"]) for b in body["budgets"]} == {
        ("user", "tokens", True),
        ("user", "cost", False),
    }
    conversation = conversation_create(owner=alice)
    route = "api/conversations/<uuid:conversation_id>/messages/"
    response = client.post(
        f"/api/conversations/{conversation.pk}/messages/", {"content": "hi"}, content_type="application/json"
    )
    assert response.status_code == 429 and int(response["Retry-After"]) >= 1
    error = _check(response, "post", route)["error"]
    assert error["code"] == "QUOTA_EXCEEDED" and error["budget"]["scope"] == "user"
    assert error["retryAfter"] == int(response["Retry-After"]) and error["resetsAt"] == error["budget"]["resetsAt"]


def test_the_usage_page_draws_the_days_agents_and_budgets(make_user, settings):
    settings.AGENT_DAILY_TOKEN_QUOTA = 1000
    alice = make_user("alice")
    spend(alice, 123)
    client = Client()
    assert client.get("/account/usage/").status_code == 302  # login required
    client.force_login(alice)
    page = client.get("/account/usage/").content.decode()
    assert "<svg" in page and "<script" not in page.split("</main>")[0]  # drawn on the page itself
    assert "123 tokens in all" in page and "Default" in page
    assert "default" in page and "1000" in page  # the budget, its limit
    assert 'href="/account/usage/"' in client.get("/account/").content.decode()  # linked from the account page


def test_the_staff_usage_page_lists_every_users_use_and_every_budget(make_user):
    alice, bob, root = make_user("alice"), make_user("bob"), make_user("root")
    root.is_staff = True
    root.save()
    spend(alice, 40)
    spend(bob, 7, days_ago=3)
    team = Group.objects.create(name="team")
    Budget.objects.create(scope="user", user=alice, period="day", tokens=100)
    Budget.objects.create(scope="group", group=team, period="week", cost=2)
    client = Client()
    client.force_login(alice)
    assert client.get("/inspect/usage/").status_code == 404  # not staff: no such page
    client.force_login(root)
    page = client.get("/inspect/usage/?days=2").content.decode()
    assert "alice" in page and "40" in page and "bob" not in page.split("<h2>Budgets</h2>")[0]  # 3 days ago
    assert "bob" in client.get("/inspect/usage/?days=5").content.decode()
    assert "user · alice" in page and "group · team" in page and "per member" in page
