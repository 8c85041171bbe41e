"""A SendMessage read (docs/protocol.md, "A2A agent"): the text of a new message, checked as a
`message` frame's content is, or the answer to a task's approval request; every refusal is the
A2A error the client's SDK raises."""

from __future__ import annotations

from dataclasses import dataclass

from a2a.types.a2a_pb2 import Message, SendMessageRequest
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError
from google.protobuf.json_format import MessageToDict

from chat.runs.client_frames import ProtocolError, approval_answer, message_content

TEXT = "text/plain"
DECISIONS = ("approve", "deny")


@dataclass(frozen=True)
class Asked:
    """A new message's text, or (with `task_id`) an answer to that task's approval request:
    `decision` and `reason` as an `approve` frame has them, `tool_call_id` when the client named it."""

    content: str = ""
    task_id: str = ""
    context_id: str = ""
    message_id: str = ""
    decision: dict | None = None


def invalid(exc: ProtocolError) -> InvalidParamsError:
    return InvalidParamsError(message=f"{exc.code}: {exc.message}")


def _checked_parts(message: Message) -> None:
    for part in message.parts:
        if part.WhichOneof("content") in ("raw", "url"):
            raise ContentTypeNotSupportedError(
                message="File parts are not taken: upload files through the conversation's files API."
            )


def _decision(message: Message) -> dict | None:
    """The approval answer a message holds: a data part {"decision", "reason"?, "toolCallId"?},
    or a text part that is exactly `approve` or `deny`."""
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "data":
            data = MessageToDict(part.data)
            if isinstance(data, dict) and "decision" in data:
                return data
        elif kind == "text" and part.text in DECISIONS:
            return {"decision": part.text}
    return None


def asked(params: SendMessageRequest) -> Asked:
    message = params.message
    _checked_parts(message)
    modes = list(params.configuration.accepted_output_modes)
    if modes and TEXT not in modes:
        raise ContentTypeNotSupportedError(message="The answer is text/plain: acceptedOutputModes must name it.")
    common = {"context_id": message.context_id, "message_id": message.message_id}
    if message.task_id:  # whether it holds a decision is checked once the task is known to wait
        return Asked(task_id=message.task_id, decision=_decision(message), **common)
    texts = [part.text for part in message.parts if part.WhichOneof("content") == "text"]
    if not texts:
        raise InvalidParamsError(message="BAD_REQUEST: The message has no text part.")
    try:
        content = message_content({"content": "\n".join(texts)})
    except ProtocolError as exc:
        raise invalid(exc) from None
    return Asked(content=content, **common)


def no_decision() -> InvalidParamsError:
    return InvalidParamsError(
        message='A message with a taskId answers its approval request: a data part {"decision": '
        '"approve" | "deny"} or the text approve or deny.'
    )


def approval(decision: dict, *, tool_call_id: str):
    """The ApproveRun fields of an answer to the request `tool_call_id`: (toolCallId, Decision)."""
    try:
        return approval_answer(
            {"toolCallId": tool_call_id, "decision": decision.get("decision"), "reason": decision.get("reason")}
        )
    except ProtocolError as exc:
        raise invalid(exc) from None
