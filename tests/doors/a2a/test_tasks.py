"""A run's stored events as an A2A Task and its stream events, without a server
(docs/protocol.md, "A2A agent"); tests/e2e/test_a2a.py runs them for real."""

from __future__ import annotations

import pytest
from a2a.types.a2a_pb2 import Message, Part, SendMessageConfiguration, SendMessageRequest, TaskState
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError
from google.protobuf.struct_pb2 import Value

from chat.agents import profiles
from chat.doors.a2a import messages
from chat.doors.a2a.tasks import TaskRender, rendered

RUN, CONVERSATION = "11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222"
TS = "2026-12-07T10:00:00.250Z"


def event(seq: int, kind: str, **fields) -> dict:
    return {"seq": seq, "type": kind, "runId": RUN, "ts": TS, **fields}


def retried_run() -> list[dict]:
    return [
        event(1, "user_message", content="hi", via="a2a", request={"messageId": "m-1"}),
        event(2, "text", content="Kept "),
        event(3, "tool_start", toolName="calculator", toolCallId="call_0", arguments="{}"),
        event(4, "tool_end", toolName="calculator", toolCallId="call_0", result="boom", isError=True),
        event(5, "text", content="lost"),
        event(6, "error", code="LLM_CALL_FAILED", message="The model call failed.", discards=5),
        event(7, "text", content="again"),
        event(8, "text", content=" and more"),
        event(9, "complete", status="succeeded"),
    ]


def chunks_of(events: list) -> str:
    text = ""
    for item in events:
        if hasattr(item, "append") and hasattr(item, "artifact"):
            piece = "".join(part.text for part in item.artifact.parts)
            text = text + piece if item.append else piece
    return text


def test_a_retried_attempts_text_is_replaced_and_the_chunks_end_as_the_answer():
    render = TaskRender(run_id=RUN, context_id=CONVERSATION)
    out = [item for frame in retried_run() for item in render.add(frame)]
    assert render.answer.text == "Kept again and more"
    assert chunks_of(out) == "Kept again and more"
    chunks = [item for item in out if hasattr(item, "append") and hasattr(item, "artifact")]
    # The first after the failed attempt carries the whole answer so far, not appended.
    assert [(c.append, c.artifact.parts[0].text, c.metadata["seq"]) for c in chunks] == [
        (False, "Kept ", 2),
        (True, "lost", 5),
        (False, "Kept again", 7),
        (True, " and more", 8),
    ]
    statuses = [
        item.status.message.parts[0].text for item in out if hasattr(item, "status") and item.status.message.parts
    ]
    assert statuses == ["calling calculator", "calculator failed"]
    task = render.task()
    assert task.status.state == TaskState.TASK_STATE_COMPLETED and task.status.timestamp.ToJsonString() == TS
    assert task.artifacts[0].parts[0].text == "Kept again and more"
    assert task.history[0].message_id == "m-1" and task.history[0].parts[0].text == "hi"
    assert list(render.task(history_length=0).history) == []


def test_a_failed_attempt_at_the_end_is_replaced_before_the_final_status():
    events = [
        event(1, "user_message", content="hi"),
        event(2, "text", content="half"),
        event(3, "error", code="LLM_CALL_FAILED", message="down", discards=2),
        event(4, "complete", status="failed"),
    ]
    render = TaskRender(run_id=RUN, context_id=CONVERSATION)
    out = [item for frame in events for item in render.add(frame)]
    assert chunks_of(out) == "" == render.answer.text
    assert out[-1].status.state == TaskState.TASK_STATE_FAILED
    assert out[-1].status.message.parts[0].text == "LLM_CALL_FAILED: down"
    assert render.task().history[0].message_id == f"{CONVERSATION}:1"  # not sent through A2A


def test_an_approval_request_is_input_required_until_answered_and_events_count_once():
    events = [
        event(1, "user_message", content="hi"),
        event(2, "approval_request", toolCallId="call_0", toolName="bash", arguments='{"c": 1}', expiresAt=TS),
    ]
    render = rendered(run_id=RUN, context_id=CONVERSATION, events=events)
    assert render.waiting and list(render.open) == ["call_0"]
    text, data = render.task().status.message.parts
    assert text.text == "bash needs your approval"
    assert data.data.struct_value.fields["approvalRequest"].struct_value.fields["toolCallId"].string_value == "call_0"
    assert render.add(events[1]) == []  # read again (the log, then live): once
    assert render.add({**event(3, "text", content="other run's"), "runId": "someone else"}) == []
    render.add(event(3, "approval_result", toolCallId="call_0", decision="approved"))
    assert render.state == TaskState.TASK_STATE_WORKING and not render.open


def request(*parts: Part, task_id: str = "", modes: tuple[str, ...] = ()) -> SendMessageRequest:
    message = Message(message_id="m", role=1, parts=list(parts), task_id=task_id)
    return SendMessageRequest(message=message, configuration=SendMessageConfiguration(accepted_output_modes=modes))


def test_a_message_is_its_text_parts_joined_and_an_answer_its_decision():
    assert messages.asked(request(Part(text="a"), Part(text="b"))).content == "a\nb"
    decision = Value()
    decision.struct_value.update({"decision": "deny", "reason": "no"})
    assert messages.asked(request(Part(data=decision), task_id="t")).decision == {"decision": "deny", "reason": "no"}
    assert messages.asked(request(Part(text="approve"), task_id="t")).decision == {"decision": "approve"}
    assert messages.asked(request(Part(text="sure"), task_id="t")).decision is None  # refused once the task waits
    with pytest.raises(InvalidParamsError):
        messages.asked(request())
    with pytest.raises(ContentTypeNotSupportedError):
        messages.asked(request(Part(text="a"), Part(raw=b"x")))
    with pytest.raises(ContentTypeNotSupportedError):
        messages.asked(request(Part(text="a"), modes=("image/png",)))
    with pytest.raises(InvalidParamsError, match="TOO_LARGE"):
        messages.asked(request(Part(text="x" * 40_000)))


def test_an_a2a_run_is_attended_whatever_conversation_it_continues():
    config = profiles.start_config(None, source="api", options=None, via=profiles.A2A_VIA)
    assert not config.unattended
    assert profiles.start_config(None, source="api", options=None).unattended
