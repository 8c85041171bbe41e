"""The run inspector's data (docs/protocol.md, "Events" and "Run trace"): `ts` on every event frame, complete's
durationMs and usage, the model call records, GET /api/runs/<id>/trace/, GET /api/usage/, prices
and the daily token quota. Real runs: the real SDK against the fake model, the real runtime."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from asgiref.sync import sync_to_async
from django.core import checks
from django.test import Client
from django.utils import timezone

from chat.conversations.services import conversation_create
from chat.eventlog.append import events_append_many
from chat.eventlog.types import EventBatch, ModelCallData
from chat.models import Event, ModelCall, Run
from chat.runs.starts import run_start
from tests.asgi_socket import Socket
from tests.fakellm import text_reply, tool_call_reply
from tests.stored import stored_frame

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]

TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def with_usage(reply: dict, prompt: int, completion: int) -> dict:
    """The reply with a usage-only chunk at its end, as OpenAI sends it with include_usage."""
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    return {**reply, "chunks": [*reply["chunks"], {"usage": usage}]}


def failing(status: int = 500) -> dict:
    return {"status": status, "body": {"error": {"message": "the fake is overloaded"}}}


def parse(ts: str) -> datetime:
    return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def client_for(user=None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def get_json(user, url: str) -> tuple[int, dict]:
    response = client_for(user).get(url)
    return response.status_code, json.loads(b"".join(response))  # a streamed body too (the events route)


def staff_user(make_user, name: str = "root"):
    user = make_user(name)
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    return user


async def run_message(conversation, content: str = "go") -> list[dict]:
    """Send a message over a real socket; the run's event frames as they arrived live."""
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": content})
    frames = await socket.run_to_end()
    await socket.close()
    return [f for f in frames if "seq" in f]


async def trace_of(make_user, run_id) -> dict:
    staff = await sync_to_async(staff_user)(make_user)
    status, body = await sync_to_async(get_json)(staff, f"/api/runs/{run_id}/trace/")
    assert status == 200, body
    return body


def check_times(trace: dict) -> None:
    """Every time in a trace is consistent with its run's start and finish."""
    run = trace["run"]
    started, finished = parse(run["startedAt"]), parse(run["finishedAt"])
    # From the stored times (to the microsecond), the ts from them cut to the millisecond.
    assert abs(run["durationMs"] - (finished - started).total_seconds() * 1000) <= 1
    for call in trace["modelCalls"]:
        assert started <= parse(call["startedAt"]) + timedelta(milliseconds=1) <= finished + timedelta(seconds=1)
        assert call["durationMs"] >= 0
        if call["firstTokenMs"] is not None:
            assert 0 <= call["firstTokenMs"] <= call["durationMs"]
    for tool in trace["toolCalls"]:
        begin = parse(tool["startedAt"])
        assert started - timedelta(milliseconds=1) <= begin <= finished
        assert begin + timedelta(milliseconds=tool["durationMs"]) <= finished + timedelta(milliseconds=1)
    for event in trace["events"]:
        assert started - timedelta(milliseconds=1) <= parse(event["ts"]) <= finished + timedelta(milliseconds=1)


# --- ts, durationMs, usage ---------------------------------------------------------


async def test_live_frames_carry_ts_and_complete_carries_duration_and_usage_as_replayed(
    conversation, registry, llm_settings, make_user
):
    llm_settings.script(
        with_usage(tool_call_reply(("calculator", {"expression": "6*7"})), 20, 5),
        with_usage(text_reply("It is 42."), 30, 4),
    )
    live = await run_message(conversation)
    assert all(TS.match(f["ts"]) for f in live), live
    complete = live[-1]
    assert complete["type"] == "complete" and complete["status"] == "succeeded"
    assert complete["usage"] == {"promptTokens": 50, "completionTokens": 9, "totalTokens": 59}
    run = await Run.objects.aget(pk=complete["runId"])
    assert complete["durationMs"] == int((run.finished_at - run.started_at).total_seconds() * 1000)
    assert (run.prompt_tokens, run.completion_tokens, run.total_tokens) == (50, 9, 59)

    # Replays say exactly what the live frames said: the events API, a new socket, the trace.
    status, body = await sync_to_async(get_json)(conversation.owner, f"/api/conversations/{conversation.pk}/events/")
    assert status == 200 and body["events"] == live
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    replayed = [f for f in await socket.history() if "seq" in f]
    await socket.close()
    assert replayed == live
    assert (await trace_of(make_user, run.pk))["events"] == live


def test_ts_is_the_rows_stored_time_to_the_millisecond(conversation):
    run, (frame,) = run_start(conversation=conversation, user=conversation.owner, content="hi", model="m", worker="w")
    row = Event.objects.get(run=run)
    assert frame["ts"] == row.created_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + (
        f"{row.created_at.microsecond // 1000:03d}Z"
    )
    assert stored_frame(row) == frame


# --- the trace -----------------------------------------------------------------------


async def test_trace_lists_every_attempt_of_a_run_with_retries(conversation, registry, llm_settings, make_user):
    llm_settings.script(failing(), failing(503), with_usage(text_reply("Finally."), 11, 3))
    live = await run_message(conversation)
    assert [f["code"] for f in live if f["type"] == "error"] == ["LLM_CALL_FAILED", "LLM_CALL_FAILED"]
    trace = await trace_of(make_user, live[0]["runId"])

    calls = trace["modelCalls"]
    assert [(c["iteration"], c["attempt"]) for c in calls] == [(1, 1), (1, 2), (1, 3)]
    assert all(c["error"] and "500" in calls[0]["error"] for c in calls[:1])
    assert "503" in calls[1]["error"] and calls[1]["finishReason"] is None
    assert calls[2]["error"] is None and calls[2]["finishReason"] == "stop"
    assert (calls[2]["promptTokens"], calls[2]["completionTokens"]) == (11, 3)
    assert calls[2]["firstTokenMs"] is not None and calls[0]["firstTokenMs"] is None
    assert all(c["messageCount"] == calls[0]["messageCount"] >= 1 for c in calls)
    assert "requestMessages" not in calls[0]  # AGENT_TRACE_REQUESTS is off by default

    run = trace["run"]
    assert run["status"] == "succeeded" and run["user"] == "alice" and run["model"] == "fake-model"
    assert run["conversationId"] == str(conversation.pk) and run["iterations"] == 1 and run["error"] is None
    assert run["usage"] == {"promptTokens": 11, "completionTokens": 3, "totalTokens": 14} == live[-1]["usage"]
    assert run["durationMs"] == live[-1]["durationMs"]
    assert run["finishedAt"] == live[-1]["ts"]
    assert run["cost"] is None  # no price for the model
    check_times(trace)


async def test_trace_of_parallel_tools_with_an_error(conversation, registry, llm_settings, make_user):
    llm_settings.script(
        tool_call_reply(("calculator", {"expression": "2+2"}), ("calculator", {"expression": "1/0"})),
        text_reply("4, and 1/0 is undefined."),
    )
    live = await run_message(conversation)
    trace = await trace_of(make_user, live[0]["runId"])
    tools = {t["toolCallId"]: t for t in trace["toolCalls"]}
    assert set(tools) == {"call_0", "call_1"}
    assert tools["call_0"]["result"] == "4" and tools["call_0"]["isError"] is False
    assert tools["call_0"]["arguments"] == json.dumps({"expression": "2+2"})
    assert tools["call_1"]["isError"] is True and "division by zero" in tools["call_1"]["result"]
    ends = {f["toolCallId"]: f for f in live if f["type"] == "tool_end"}
    assert all(tools[i]["durationMs"] == ends[i]["durationMs"] for i in tools)
    assert [(c["iteration"], c["attempt"], c["finishReason"]) for c in trace["modelCalls"]] == [
        (1, 1, "tool_calls"),
        (2, 1, "stop"),
    ]
    # The second call was sent the first one's messages plus the assistant turn and two results.
    first, second = trace["modelCalls"]
    assert second["messageCount"] == first["messageCount"] + 3
    assert live[-1]["usage"] == {"promptTokens": 0, "completionTokens": 0, "totalTokens": 0}  # none reported
    check_times(trace)


async def test_trace_of_a_cancelled_run_records_the_cut_model_call(conversation, registry, llm_settings, make_user):
    llm_settings.script(text_reply("never finished " * 50, piece=2, delay=0.05))
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "go"})
    await socket.until(lambda f: f["type"] == "text")
    await socket.send({"type": "cancel"})
    live = [f for f in await socket.run_to_end() if "seq" in f]
    await socket.close()
    await registry.wait_idle()
    trace = await trace_of(make_user, live[-1]["runId"])
    assert trace["run"]["status"] == "cancelled" and trace["run"]["error"].startswith("CANCELLED")
    (call,) = trace["modelCalls"]
    assert call["error"] == "cancelled" and call["finishReason"] is None
    assert call["firstTokenMs"] is not None and call["firstTokenMs"] <= call["durationMs"]
    check_times(trace)


async def test_trace_of_a_resumed_run_sums_the_attempts_of_both_processes(make_user, registry, llm_settings, settings):
    settings.AGENT_HEARTBEAT_TIMEOUT = 20
    user = await sync_to_async(make_user)("erin")
    conversation = await sync_to_async(conversation_create)(owner=user)

    def dead_run() -> Run:
        """A run whose process died mid-answer after one model call that cost 10 + 2 tokens."""
        run, _ = run_start(conversation=conversation, user=user, content="hi", model="m", worker="dead!x")
        call = ModelCallData(1, 1, timezone.now(), 5, 30, 2, 10, 2, 12, "", "")
        events_append_many(
            batches=[
                EventBatch(conversation.pk, run.pk, [{"type": "text", "content": "half an ans"}], model_calls=[call])
            ]
        )
        Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=60))
        return run

    run = await sync_to_async(dead_run)()
    llm_settings.script(with_usage(text_reply("A whole answer."), 20, 4))
    await registry.reap_once()
    await registry.wait_idle()

    trace = await trace_of(make_user, run.pk)
    assert trace["run"]["status"] == "succeeded"
    types = [e["type"] for e in trace["events"]]
    # The resumed answer's first delta is stored at once, the rest (if it came later) coalesced.
    assert types[:4] == ["user_message", "text", "error", "text"] and types[-1] == "complete", types
    assert set(types[3:-1]) == {"text"} and len(types) <= 6, types
    assert "".join(e["content"] for e in trace["events"][3:-1]) == "A whole answer."
    assert trace["events"][2]["code"] == "INTERRUPTED" and trace["events"][2]["resumed"] is True
    assert [(c["promptTokens"], c["completionTokens"]) for c in trace["modelCalls"]] == [(10, 2), (20, 4)]
    usage = {"promptTokens": 30, "completionTokens": 6, "totalTokens": 36}
    assert trace["run"]["usage"] == usage == trace["events"][-1]["usage"]
    check_times(trace)


async def test_trace_keeps_the_request_messages_only_when_asked(
    conversation, registry, llm_settings, make_user, settings
):
    settings.AGENT_TRACE_REQUESTS = True
    settings.AGENT_SYSTEM_PROMPT = "Be brief."
    live = await run_message(conversation, "what is up?")
    (call,) = (await trace_of(make_user, live[0]["runId"]))["modelCalls"]
    assert call["requestMessages"][-1] == {"role": "user", "content": "what is up?"}
    assert len(call["requestMessages"]) == call["messageCount"]


def test_trace_is_for_staff_only(conversation, make_user):
    run, _ = run_start(conversation=conversation, user=conversation.owner, content="hi", model="m", worker="w")
    url = f"/api/runs/{run.pk}/trace/"
    staff = staff_user(make_user)
    assert get_json(staff, url)[0] == 200
    for who in (None, conversation.owner, make_user("mallory")):  # anonymous, the owner, another user
        status, body = get_json(who, url)
        assert status == 404 and body["error"] == "not_found"
    staff.is_active = False  # a deactivated staff account is nobody
    staff.save(update_fields=["is_active"])
    assert client_for(staff).get(url).status_code == 404
    assert get_json(staff_user(make_user, "root2"), "/api/runs/00000000-0000-0000-0000-000000000000/trace/")[0] == 404


def test_cost_comes_from_the_models_price(conversation, make_user, settings):
    settings.AGENT_MODEL_PRICES = {"priced": {"input": 2.5, "output": 10}}
    run, _ = run_start(conversation=conversation, user=conversation.owner, content="hi", model="priced", worker="w")
    Run.objects.filter(pk=run.pk).update(prompt_tokens=1_000, completion_tokens=200, total_tokens=1_200)
    status, body = get_json(staff_user(make_user), f"/api/runs/{run.pk}/trace/")
    assert status == 200 and body["run"]["cost"] == pytest.approx((1_000 * 2.5 + 200 * 10) / 1_000_000)
    assert body["run"]["finishedAt"] is None and body["run"]["durationMs"] is None  # still running


@pytest.mark.parametrize(
    "prices",
    [[], {"m": 1}, {"m": {"input": 1}}, {"m": {"input": -1, "output": 1}}, {"m": {"input": "1", "output": 1}}],
)
def test_a_bad_price_setting_is_a_system_check_error(settings, prices):
    settings.AGENT_MODEL_PRICES = prices
    assert "agentsite.E005" in [e.id for e in checks.run_checks()]


def test_good_prices_pass_the_check(settings):
    settings.AGENT_MODEL_PRICES = {"gpt-4o-mini": {"input": 0.15, "output": 0.6}, "free": {"input": 0, "output": 0}}
    assert "agentsite.E005" not in [e.id for e in checks.run_checks()]


# --- quota and usage -----------------------------------------------------------------


def spend(user, *, tokens: int, model: str = "m", when: datetime | None = None) -> None:
    """A finished run of the user's whose one model call used `tokens` (prompt tokens)."""
    conversation = conversation_create(owner=user)
    run, _ = run_start(conversation=conversation, user=user, content="x", model=model, worker="w")
    Run.objects.filter(pk=run.pk).update(status="succeeded")
    ModelCall.objects.create(
        run=run,
        iteration=1,
        attempt=1,
        started_at=when or timezone.now(),
        prompt_tokens=tokens,
        total_tokens=tokens,
    )


async def test_the_daily_quota_refuses_new_runs_with_an_unpersisted_error(
    conversation, registry, llm_settings, settings
):
    settings.AGENT_DAILY_TOKEN_QUOTA = 100
    await sync_to_async(spend)(conversation.owner, tokens=60, when=timezone.now() - timedelta(days=1))  # yesterday
    llm_settings.script(with_usage(text_reply("ok"), 90, 10))
    first = await run_message(conversation)  # 0 used today: allowed, and it spends 100
    assert first[-1]["status"] == "succeeded"
    events_before = await Event.objects.filter(conversation=conversation).acount()

    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "more"})
    error = await socket.recv()
    assert error["type"] == "error" and error["code"] == "QUOTA_EXCEEDED" and "seq" not in error
    assert "100 of 100" in error["detail"]
    await socket.close()
    assert await Event.objects.filter(conversation=conversation).acount() == events_before
    assert await Run.objects.filter(conversation=conversation).acount() == 1

    settings.AGENT_DAILY_TOKEN_QUOTA = 0  # off
    other = await sync_to_async(conversation_create)(owner=conversation.owner)
    assert (await run_message(other))[-1]["status"] == "succeeded"


def test_the_quota_counts_only_the_users_own_tokens(conversation, make_user, settings):
    settings.AGENT_DAILY_TOKEN_QUOTA = 50
    spend(make_user("bob"), tokens=500)
    run, _ = run_start(conversation=conversation, user=conversation.owner, content="hi", model="m", worker="w")
    assert run.status == "running"


def test_usage_api_gives_the_users_own_tokens_today_and_this_month(conversation, make_user, settings):
    settings.AGENT_DAILY_TOKEN_QUOTA = 1000
    alice = conversation.owner
    now = timezone.now()
    month_start = now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    spend(alice, tokens=7, model="a")
    spend(alice, tokens=5, model="b")
    if now - month_start > timedelta(days=1, minutes=1):
        earlier = now - timedelta(days=1)  # this month, not today
        expected_month_a = 7 + 100
    else:  # the first day of the month: "earlier" is last month and is not counted
        earlier = month_start - timedelta(minutes=1)
        expected_month_a = 7
    spend(alice, tokens=100, model="a", when=earlier)
    spend(alice, tokens=1000, model="a", when=month_start - timedelta(days=1))  # last month
    spend(make_user("bob"), tokens=999, model="a")  # someone else's

    status, body = get_json(alice, "/api/usage/")
    assert status == 200
    assert body["today"] == {"promptTokens": 12, "completionTokens": 0, "totalTokens": 12}
    assert body["month"]["totalTokens"] == expected_month_a + 5
    assert body["models"] == [
        {
            "model": "a",
            "today": {"promptTokens": 7, "completionTokens": 0, "totalTokens": 7},
            "month": {"promptTokens": expected_month_a, "completionTokens": 0, "totalTokens": expected_month_a},
        },
        {
            "model": "b",
            "today": {"promptTokens": 5, "completionTokens": 0, "totalTokens": 5},
            "month": {"promptTokens": 5, "completionTokens": 0, "totalTokens": 5},
        },
    ]
    assert body["dailyTokenQuota"] == 1000
    assert client_for().get("/api/usage/").status_code == 401


def test_the_run_admin_shows_its_model_calls_read_only(conversation, make_user):
    run, _ = run_start(conversation=conversation, user=conversation.owner, content="hi", model="m", worker="w")
    ModelCall.objects.create(
        run=run, iteration=1, attempt=2, started_at=timezone.now(), error="HTTP 503: the fake is overloaded"
    )
    admin = make_user("admin")
    admin.is_staff = admin.is_superuser = True
    admin.save()
    page = client_for(admin).get(f"/admin/chat/run/{run.pk}/change/").content.decode()
    assert "HTTP 503: the fake is overloaded" in page
    assert 'name="model_calls-0-error"' not in page  # shown, not editable
