"""The Responses rendering of a run's stored events (chat.doors.openai.responses_render): items,
statuses, events and their sequence numbers, checked against the SDK's own types."""

from __future__ import annotations

import uuid

from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from chat.doors.openai.responses_render import ResponseRender, input_items, response_id, run_id_of

RUN = str(uuid.uuid4())
HEX = uuid.UUID(RUN).hex
TS = "2026-01-02T03:04:05.000Z"
STREAM_EVENT = TypeAdapter(ResponseStreamEvent)


def frames(*events: dict) -> list[dict]:
    return [{"runId": RUN, "seq": seq, "ts": TS, **event} for seq, event in enumerate(events, start=1)]


def rendered(*events: dict) -> ResponseRender:
    render = ResponseRender(run_id=RUN, model="default", conversation_id="c", created_at=1)
    for frame in frames(*events):
        render.add(frame)
    return render


USER = {"type": "user_message", "content": "hi", "request": {"metadata": {"a": "b"}, "background": False}}
USAGE = {"promptTokens": 3, "completionTokens": 2, "totalTokens": 5}


def test_ids_round_trip_and_malformed_ones_are_none():
    assert run_id_of(response_id(RUN)) == uuid.UUID(RUN)
    assert run_id_of("resp_nope") is None and run_id_of(HEX) is None and run_id_of("resp_" + "z" * 32) is None


def test_thinking_text_and_a_tool_call_make_items_in_order_with_stable_ids():
    render = rendered(
        USER,
        {"type": "thinking", "content": "Hm"},
        {"type": "thinking", "content": "m."},
        {"type": "tool_start", "toolName": "bash", "toolCallId": "c1", "arguments": '{"cmd": "ls"}'},
        {"type": "tool_end", "toolName": "bash", "toolCallId": "c1", "result": "boom", "isError": True},
        {"type": "text", "content": "Do"},
        {"type": "text", "content": "ne."},
        {"type": "complete", "status": "succeeded", "usage": USAGE},
    )
    response = Response.model_validate(render.response())
    assert [item.type for item in response.output] == ["reasoning", "mcp_call", "message"]
    assert [item.id for item in response.output] == [f"rs_{HEX}_2", f"mcp_{HEX}_4", f"msg_{HEX}_6"]
    assert response.output_text == "Done." and response.status == "completed"
    call = response.output[1]
    assert call.status == "failed" and call.output == "boom" and call.arguments == '{"cmd": "ls"}'
    assert response.usage.total_tokens == 5 and response.metadata == {"a": "b"}
    types = [event["type"] for event in render.events]
    assert types[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert "response.mcp_call.failed" in types and types[-1] == "response.completed"
    assert [event["sequence_number"] for event in render.events] == list(range(len(render.events)))
    for event in render.events:
        STREAM_EVENT.validate_python(event)


def test_a_discarded_attempt_is_left_out_and_a_retry_answers():
    render = rendered(
        USER,
        {"type": "text", "content": "Half"},
        {"type": "error", "code": "LLM_CALL_FAILED", "message": "x", "discards": 2},
        {"type": "text", "content": "Whole."},
        {"type": "complete", "status": "succeeded", "usage": USAGE},
    )
    response = Response.model_validate(render.response())
    assert response.output_text == "Whole." and len(response.output) == 1
    assert render.items[0]["status"] == "incomplete"
    # output_index counts the left-out message too
    assert [e["output_index"] for e in render.events if e["type"] == "response.output_item.added"] == [0, 1]


def test_statuses_from_the_complete():
    cancelled = rendered(USER, {"type": "complete", "status": "cancelled", "usage": USAGE})
    assert cancelled.response()["status"] == "cancelled" and cancelled.events[-1]["type"] == "response.incomplete"
    failed = rendered(
        USER, {"type": "error", "code": "AGENT_ERROR", "message": "bad"}, {"type": "complete", "status": "failed"}
    )
    assert failed.response()["error"] == {"code": "server_error", "message": "bad"}
    assert failed.events[-1]["type"] == "response.failed"
    limit = rendered(
        USER, {"type": "error", "code": "MAX_ITERATIONS", "message": "m"}, {"type": "complete", "status": "succeeded"}
    )
    assert limit.response()["incomplete_details"] == {"reason": "max_messages"}
    cut = rendered(
        USER, {"type": "text", "content": "a"}, {"type": "complete", "status": "succeeded", "finishReason": "length"}
    )
    assert cut.response()["status"] == "incomplete"
    assert cut.response()["incomplete_details"] == {"reason": "max_output_tokens"}
    running = rendered(USER, {"type": "text", "content": "so far"})
    assert running.response()["status"] == "in_progress" and running.response()["usage"] is None
    assert running.response()["output"][0]["content"][0]["text"] == "so far"


def test_a_denied_call_gets_its_arguments_from_the_approval_request():
    render = rendered(
        USER,
        {"type": "approval_request", "toolCallId": "c9", "toolName": "bash", "arguments": '{"x": 1}'},
        {"type": "tool_end", "toolName": "bash", "toolCallId": "c9", "result": "denied", "isError": True},
        {"type": "complete", "status": "succeeded"},
    )
    (call,) = render.response()["output"]
    assert call["arguments"] == '{"x": 1}' and call["status"] == "failed" and call["id"] == f"mcp_{HEX}_3"


def test_another_runs_events_are_not_rendered():
    render = ResponseRender(run_id=RUN, model="default", conversation_id="c", created_at=1)
    assert render.add({"runId": str(uuid.uuid4()), "seq": 1, "type": "text", "content": "x"}) == []
    render.add({"runId": RUN, "seq": 1, "type": "user_message", "content": "hi"})
    render.add({"runId": RUN, "seq": 2, "type": "text", "content": "a"})
    assert render.add({"runId": RUN, "type": "sync", "running": True}) == []  # a stream's, no stored event
    render.add({"runId": RUN, "seq": 3, "type": "text", "content": "b"})
    assert render.response()["output"][0]["content"][0]["text"] == "ab"


def test_input_items_are_the_history_then_the_message():
    message = {
        "seq": 7,
        "type": "user_message",
        "content": "now",
        "attachments": [{"path": "image-1.png", "size": 3}],
        "history": [{"role": "user", "content": "before"}, {"role": "assistant", "content": "reply"}],
    }
    items = input_items(message, run_id=RUN, conversation_id="c")
    assert [(i["role"], i["content"][0]["text"]) for i in items] == [
        ("user", "before"),
        ("assistant", "reply"),
        ("user", "now"),
    ]
    assert items[1]["content"][0]["type"] == "output_text"
    assert items[2]["content"][1]["image_url"] == "/api/conversations/c/files/image-1.png"
    assert items[2]["id"] == f"msg_{HEX}_7"
