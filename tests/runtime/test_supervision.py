"""chat.runtime.supervision: the reaper that closes or resumes dead processes' runs, and the
heartbeat that stops a run cancelled through the database or taken by another process."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from unittest.mock import ANY

import pytest
from asgiref.sync import sync_to_async
from django.db import OperationalError
from django.utils import timezone

from chat.conversations.services import conversation_create
from chat.eventlog.append import events_append
from chat.eventlog.takeover import run_request_cancel
from chat.models import Event, Run
from chat.runs.requests import StartRun
from chat.runs.starter import start_run
from chat.runs.starts import run_start
from chat.runtime import supervision
from tests.fakellm import text_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]

# The fake model reports no usage unless a reply holds a usage chunk.
NO_USAGE = {"promptTokens": 0, "completionTokens": 0, "totalTokens": 0}


def _payloads(run_id) -> list[dict]:
    return list(Event.objects.filter(run_id=run_id).order_by("seq").values_list("payload", flat=True))


def _run(run_id) -> Run:
    return Run.objects.get(pk=run_id)


def _dead_run(conversation, *, content: str = "hi", events: list[dict], age: float = 60) -> Run:
    """A running run whose process died `age` seconds ago, after storing `events`."""
    run, _ = run_start(
        conversation=conversation, user=conversation.owner, content=content, model="m", worker="runs.dead!x"
    )
    events_append(conversation_id=conversation.pk, run_id=run.pk, payloads=events)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=age))
    return run


MID_TOOL = [
    {"type": "thinking", "content": "I should compute."},
    {"type": "text", "content": "Let me check."},
    {"type": "tool_start", "toolName": "calculator", "toolCallId": "c1", "arguments": '{"expression": "2+2"}'},
    {"type": "tool_start", "toolName": "calculator", "toolCallId": "c2", "arguments": '{"expression": "1"}'},
    {
        "type": "tool_end",
        "toolName": "calculator",
        "toolCallId": "c2",
        "result": "1",
        "isError": False,
        "durationMs": 1,
    },
]
MID_ANSWER = [
    {"type": "tool_start", "toolName": "calculator", "toolCallId": "c1", "arguments": '{"expression": "2+2"}'},
    {
        "type": "tool_end",
        "toolName": "calculator",
        "toolCallId": "c1",
        "result": "4",
        "isError": False,
        "durationMs": 1,
    },
    {"type": "text", "content": "The answer is fo"},
]


async def test_the_reaper_closes_dead_runs_without_resumes_and_spares_live_ones(conversation, registry, settings):
    settings.AGENT_HEARTBEAT_TIMEOUT = 20
    settings.AGENT_MAX_RESUMES = 0
    dead = await sync_to_async(_dead_run)(conversation, events=MID_TOOL)
    other = await sync_to_async(conversation_create)(owner=conversation.owner)
    live = await sync_to_async(_dead_run)(other, events=MID_TOOL, age=5)
    await registry.reap_once()
    await registry.reap_once()  # closed once, never twice
    tail = await sync_to_async(_payloads)(dead.pk)
    assert tail[len(MID_TOOL) + 1 :] == [
        {
            "type": "tool_end",
            "toolName": "calculator",
            "toolCallId": "c1",
            "result": '{"error": "interrupted"}',
            "isError": True,
            "durationMs": 0,
        },
        {
            "type": "error",
            "code": "INTERRUPTED",
            "message": "The server running this run stopped before it finished.",
            "detail": "",
        },
        {"type": "complete", "status": "interrupted", "durationMs": ANY, "usage": NO_USAGE},
    ]
    assert (await sync_to_async(_run)(dead.pk)).status == "interrupted"
    assert (await sync_to_async(_run)(live.pk)).status == "running"
    assert len(await sync_to_async(_payloads)(live.pk)) == len(MID_TOOL) + 1


async def test_the_reaper_resumes_a_dead_run_from_its_event_log(make_user, registry, llm_settings, settings):
    settings.AGENT_HEARTBEAT_TIMEOUT = 20
    user = await sync_to_async(make_user)("erin")
    mid_tool, mid_answer = [await sync_to_async(conversation_create)(owner=user) for _ in range(2)]
    run_tool = await sync_to_async(_dead_run)(mid_tool, content="cut mid-tool", events=MID_TOOL)
    run_answer = await sync_to_async(_dead_run)(mid_answer, content="cut mid-answer", events=MID_ANSWER)
    llm_settings.responder = lambda body: text_reply(f"resumed: {body['messages'][1]['content']}")

    await registry.reap_once()
    await registry.reap_once()  # taken once: the second pass finds them alive
    await registry.wait_idle()

    tool_events = await sync_to_async(_payloads)(run_tool.pk)
    resumed = tool_events[len(MID_TOOL) + 1 :]
    # The answer's first delta is stored at once, the rest in the next window.
    assert "".join(e["content"] for e in resumed if e["type"] == "text") == "resumed: cut mid-tool"
    assert [e for e in resumed if e["type"] != "text"] == [
        {
            "type": "tool_end",
            "toolName": "calculator",
            "toolCallId": "c1",
            "result": '{"error": "interrupted"}',
            "isError": True,
            "durationMs": 0,
        },
        {
            "type": "error",
            "code": "INTERRUPTED",
            "message": "The server running this run stopped before it finished.",
            "detail": "",
            "resumed": True,
        },
        {"type": "complete", "status": "succeeded", "durationMs": ANY, "usage": NO_USAGE, "context": ANY},
    ]
    answer_events = await sync_to_async(_payloads)(run_answer.pk)
    kinds = [e["type"] for e in answer_events[len(MID_ANSWER) + 1 :]]
    assert kinds[0] == "error" and kinds[-1] == "complete" and set(kinds[1:-1]) == {"text"}
    half_answer_seq = await sync_to_async(
        lambda: Event.objects.get(run_id=run_answer.pk, type="text", payload__content="The answer is fo").seq
    )()
    assert answer_events[len(MID_ANSWER) + 1]["discards"] == half_answer_seq  # the dead attempt's text
    assert "discards" not in tool_events[len(MID_TOOL) + 2]  # no text was cut off mid-tool
    for run in (run_tool, run_answer):
        stored = await sync_to_async(_run)(run.pk)
        assert (stored.status, stored.resumes, stored.worker) == ("succeeded", 1, registry.channel)

    sent = {r["messages"][1]["content"]: r["messages"][1:] for r in llm_settings.requests}
    assert sent["cut mid-tool"] == [
        {"role": "user", "content": "cut mid-tool"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "calculator", "arguments": '{"expression": "2+2"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "calculator", "arguments": '{"expression": "1"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"error": "interrupted"}'},
        {"role": "tool", "tool_call_id": "c2", "content": "1"},
    ]
    assert sent["cut mid-answer"] == [  # the dead attempt's half answer is not part of it
        {"role": "user", "content": "cut mid-answer"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "calculator", "arguments": '{"expression": "2+2"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "4"},
    ]


async def test_a_run_resumed_as_often_as_allowed_is_closed_at_the_next_death(conversation, registry, settings):
    settings.AGENT_MAX_RESUMES = 2
    dead = await sync_to_async(_dead_run)(conversation, events=MID_ANSWER)
    await sync_to_async(Run.objects.filter(pk=dead.pk).update)(resumes=2)
    await registry.reap_once()
    tail = await sync_to_async(_payloads)(dead.pk)
    assert [e["type"] for e in tail[-2:]] == ["error", "complete"]
    assert "resumed" not in tail[-2] and tail[-1]["status"] == "interrupted"


async def test_the_heartbeat_stops_a_run_cancelled_through_the_database(conversation, registry, llm_settings, settings):
    settings.AGENT_HEARTBEAT_SECONDS = 0.1
    llm_settings.script(text_reply("slow words " * 40, piece=2, delay=0.05))
    run, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content="go"))
    await sync_to_async(run_request_cancel)(run_id=run.pk)  # the cancel message got lost
    await registry.wait_idle()
    events = await sync_to_async(_payloads)(run.pk)
    assert events[-2]["code"] == "CANCELLED" and events[-1] == {
        "type": "complete",
        "status": "cancelled",
        "durationMs": ANY,
        "usage": ANY,
        "context": ANY,
    }
    # The cut model call's tokens were spent: counted by their estimate (chat/agent/estimate.py).
    assert events[-1]["usage"]["promptTokens"] > 0


async def test_a_take_over_whose_reads_fail_is_undone_and_spends_no_resume(
    make_user, registry, llm_settings, settings, monkeypatch
):
    """The database answers the take-over, then the connection breaks before the run's memory is
    read (a restart of PostgreSQL between two queries): the pass fails, and the run is as it was,
    its one resume not spent, so that the next pass resumes it instead of closing it `interrupted`."""
    settings.AGENT_HEARTBEAT_TIMEOUT = 20
    user = await sync_to_async(make_user)("ines")
    conversation = await sync_to_async(conversation_create)(owner=user)
    run = await sync_to_async(_dead_run)(conversation, content="cut once", events=MID_ANSWER)
    llm_settings.responder = lambda body: text_reply("resumed after all")
    real_memory = supervision.memory.runs_memory

    def connection_broke(**kwargs):
        raise OperationalError("the connection is closed")

    monkeypatch.setattr(supervision.memory, "runs_memory", connection_broke)
    with pytest.raises(OperationalError):
        await registry.reap_once()
    stored = await sync_to_async(_run)(run.pk)
    assert (stored.status, stored.resumes, stored.worker) == ("running", 0, "runs.dead!x")
    assert len(await sync_to_async(_payloads)(run.pk)) == len(MID_ANSWER) + 1  # no INTERRUPTED stored

    monkeypatch.setattr(supervision.memory, "runs_memory", real_memory)
    await registry.reap_once()  # this pass or the registry's own periodic one takes it
    await registry.wait_idle()
    stored = await sync_to_async(_run)(run.pk)
    assert (stored.status, stored.resumes) == ("succeeded", 1)
    payloads = await sync_to_async(_payloads)(run.pk)
    assert [p["code"] for p in payloads if p["type"] == "error"] == ["INTERRUPTED"]
    assert "".join(p["content"] for p in payloads[len(MID_ANSWER) + 1 :] if p["type"] == "text") == "resumed after all"


async def test_the_heartbeat_drops_a_run_another_process_has_taken_without_a_word(
    conversation, registry, llm_settings, settings
):
    settings.AGENT_HEARTBEAT_SECONDS = 0.1
    llm_settings.script(text_reply("slow words " * 60, piece=2, delay=0.05))
    run, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content="go"))
    await asyncio.sleep(0.3)
    # As if this process had been taken for dead and another had resumed the run.
    await sync_to_async(Run.objects.filter(pk=run.pk).update)(worker="runs.other!y", resumes=1)
    await registry.wait_idle()
    assert not registry.holds(run.pk)
    events = await sync_to_async(_payloads)(run.pk)
    assert "complete" not in [e["type"] for e in events] and "error" not in [e["type"] for e in events]
    assert (await sync_to_async(_run)(run.pk)).status == "running"
