"""The AG-UI rendering of a run's stored events (chat.doors.agui.agui_render) and a thread's
snapshot (chat.doors.agui.agui_snapshot): every event checked against ag-ui-protocol's own
models, the ids stable, the order AG-UI's."""

from __future__ import annotations

import uuid

from ag_ui.core import Event, MessagesSnapshotEvent
from pydantic import TypeAdapter

from chat.doors.agui.agui_render import AguiRender, agui_run_id, millis
from chat.doors.agui.agui_snapshot import snapshot_messages
from tests.e2e.agui_stream import check_order

RUN = str(uuid.uuid4())
HEX = uuid.UUID(RUN).hex
TS = "2026-01-02T03:04:05.000Z"
EVENT = TypeAdapter(Event)
USER = {"type": "user_message", "content": "hi", "model": "gpt-test", "request": {"runId": "r1", "messageId": "m1"}}
USAGE = {"promptTokens": 3, "completionTokens": 2, "totalTokens": 5}


def frames(*events: dict) -> list[dict]:
    return [{"runId": RUN, "seq": seq, "ts": TS, **event} for seq, event in enumerate(events, start=1)]


def rendered(*events: dict) -> list[dict]:
    render = AguiRender(run_id=RUN, thread_id="t", agui_run_id="r1", model="default")
    out = [render.started()]
    for frame in frames(*events):
        out += render.add(frame)
    for event in out:
        assert EVENT.validate_python(event).model_dump(by_alias=True, mode="json") == event
    return out


def test_reasoning_text_a_tool_call_and_success_with_usage():
    events = rendered(
        USER,
        {"type": "thinking", "content": "hm"},
        {"type": "text", "content": "Let "},
        {"type": "text", "content": "me."},
        {"type": "tool_start", "toolCallId": "call_0", "toolName": "calculator", "arguments": '{"e": 1}'},
        {"type": "tool_end", "toolCallId": "call_0", "toolName": "calculator", "result": "1", "isError": False},
        {"type": "text", "content": "One."},
        {"type": "complete", "status": "succeeded", "usage": USAGE},
    )
    check_order(events)
    assert [e["type"] for e in events] == [
        "RUN_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert events[1]["messageId"] == f"rs_{HEX}_2" and events[6]["messageId"] == f"msg_{HEX}_3"
    start, result = events[10], events[13]
    assert start == {
        "type": "TOOL_CALL_START",
        "toolCallId": f"call_{HEX}_5",
        "toolCallName": "calculator",
        "parentMessageId": f"msg_{HEX}_3",
        "timestamp": millis(TS),
    }
    assert result["messageId"] == f"tool_{HEX}_6" and result["toolCallId"] == f"call_{HEX}_5"
    assert events[-1]["outcome"] == {"type": "success"}
    assert events[-1]["usage"] == [{"model": "gpt-test", "inputTokens": 3, "outputTokens": 2, "totalTokens": 5}]


def test_an_approval_is_announced_once_and_interrupts_until_answered():
    render = AguiRender(run_id=RUN, thread_id="t", agui_run_id="r1", model="default")
    asked = frames(
        USER,
        {"type": "approval_request", "toolCallId": "call_0", "toolName": "bash", "arguments": "{}", "expiresAt": TS},
        {"type": "approval_result", "toolCallId": "call_0", "decision": "approved"},
        {"type": "tool_start", "toolCallId": "call_0", "toolName": "bash", "arguments": "{}"},
    )
    out = render.add(asked[0]) + render.add(asked[1])
    assert [e["type"] for e in out] == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
    assert render.waiting
    (finished,) = [EVENT.validate_python(e) for e in render.interrupt()]
    (interrupt,) = finished.outcome.interrupts
    assert interrupt.id == interrupt.tool_call_id == f"call_{HEX}_2" and interrupt.reason == "tool_approval"
    assert interrupt.metadata == {"toolName": "bash", "arguments": "{}"} and interrupt.expires_at == TS
    # Read again (a resume primes a renderer with the run so far): the answer closes the request,
    # and the call's tool_start announces nothing again.
    again = AguiRender(run_id=RUN, thread_id="t", agui_run_id="r2", model="default")
    assert [again.add(f) for f in asked][2:] == [[], []] and not again.waiting


def test_a_denied_call_that_never_started_gets_its_result():
    events = rendered(
        USER,
        {"type": "approval_request", "toolCallId": "c", "toolName": "bash", "arguments": "", "expiresAt": TS},
        {"type": "approval_result", "toolCallId": "c", "decision": "denied", "reason": "no"},
        {"type": "tool_end", "toolCallId": "c", "toolName": "bash", "result": '{"error": "denied"}', "isError": True},
        {"type": "complete", "status": "succeeded", "usage": USAGE},
    )
    check_order(events)
    assert [e["type"] for e in events[1:]] == ["TOOL_CALL_START", "TOOL_CALL_END", "TOOL_CALL_RESULT", "RUN_FINISHED"]


def test_a_retried_attempts_text_is_ended_and_named_and_a_failure_is_run_error():
    events = rendered(
        USER,
        {"type": "text", "content": "Half"},
        {"type": "error", "code": "LLM_CALL_FAILED", "message": "retrying", "detail": "x", "discards": 2},
        {"type": "text", "content": "Whole."},
        {"type": "error", "code": "LLM_CALL_FAILED", "message": "gave up", "detail": ""},
        {"type": "complete", "status": "failed", "usage": USAGE},
    )
    kinds = [e["type"] for e in events]
    assert kinds[1:5] == ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "CUSTOM"]
    custom = events[4]
    assert custom["name"] == "agentsite.error" and custom["value"]["discardedMessageId"] == f"msg_{HEX}_2"
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "LLM_CALL_FAILED"
    assert events[-1]["message"] == "gave up" and events[-1]["usage"][0]["totalTokens"] == 5


def test_cancelled_and_interrupted_runs_and_references():
    cancelled = rendered(
        USER,
        {"type": "reference", "references": [{"title": "a", "url": "https://a", "snippet": ""}]},
        {"type": "complete", "status": "cancelled", "usage": USAGE},
    )
    assert cancelled[1]["name"] == "agentsite.reference" and cancelled[-1]["outcome"] == {"type": "cancelled"}
    interrupted = rendered(USER, {"type": "complete", "status": "interrupted", "usage": USAGE})
    assert (interrupted[-1]["type"], interrupted[-1]["code"]) == ("RUN_ERROR", "INTERRUPTED")
    other_run = AguiRender(run_id=RUN, thread_id="t", agui_run_id="r", model="m")
    assert other_run.add({**frames(USER)[0], "runId": str(uuid.uuid4())}) == []
    assert agui_run_id(USER, RUN) == "r1" and agui_run_id({"type": "user_message"}, RUN) == RUN


def test_the_snapshot_is_the_branch_as_the_stream_names_it():
    branch = frames(
        {**USER, "history": [{"role": "user", "content": "before"}, {"role": "assistant", "content": "ok"}]},
        {"type": "thinking", "content": "hm"},
        {"type": "text", "content": "Lost"},
        {"type": "error", "code": "LLM_CALL_FAILED", "message": "retrying", "detail": "", "discards": 3},
        {"type": "text", "content": "Kept."},
        {"type": "tool_start", "toolCallId": "call_0", "toolName": "calculator", "arguments": "{}"},
        {"type": "tool_end", "toolCallId": "call_0", "toolName": "calculator", "result": "2", "isError": False},
        {"type": "approval_request", "toolCallId": "call_1", "toolName": "bash", "arguments": "{}", "expiresAt": TS},
    )
    messages = snapshot_messages(branch)
    MessagesSnapshotEvent(messages=messages)  # ag-ui-protocol's own model takes them
    assert [(m["id"], m["role"]) for m in messages] == [
        (f"history_{HEX}_1_0", "user"),
        (f"history_{HEX}_1_1", "assistant"),
        ("m1", "user"),
        (f"rs_{HEX}_2", "reasoning"),
        (f"msg_{HEX}_5", "assistant"),
        (f"tool_{HEX}_7", "tool"),
        (f"msg_{HEX}_8", "assistant"),
    ]
    kept, waiting = messages[4], messages[6]
    assert kept["content"] == "Kept." and kept["toolCalls"][0]["id"] == f"call_{HEX}_6"
    assert waiting["toolCalls"][0]["id"] == f"call_{HEX}_8" and messages[5]["toolCallId"] == f"call_{HEX}_6"
