"""The frames a client sends, read and checked: JSON text within the nesting limit, the
`after` of the handshake, seq fields, approval answers, message content. Every refusal is a
ProtocolError carrying the error frame's code (docs/protocol.md, "Client frames")."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from django.conf import settings

from chat import nesting
from chat.agent.approval import APPROVED, DENIED, Decision
from chat.agent.text import invalid_reason

# The frames a client may send (docs/protocol.md, "Client frames").
FRAME_TYPES = ("message", "edit", "regenerate", "compact", "cancel", "ping", "approve", "unqueue")

# The `approve` frame's decisions, and what the run records for each.
ANSWERS = {"approve": APPROVED, "deny": DENIED}


MAX_REASON_CHARS = 1000


MAX_TOOL_CALL_ID_CHARS = 200


class ProtocolError(Exception):
    def __init__(self, code: str, message: str, detail: str = "", *, extra: dict[str, Any] | None = None):
        super().__init__(message)
        self.code, self.message, self.detail = code, message, detail
        # Fields of the refusal beyond these (QUOTA_EXCEEDED's retryAfter, resetsAt, budget).
        self.extra = extra or {}


def after_param(query_string: bytes) -> int:
    values = parse_qs(query_string.decode("latin-1")).get("after")
    try:
        return max(0, int(values[0])) if values else 0
    except ValueError:
        return 0


def parse_frame(text_data: str | None) -> dict[str, Any]:
    if text_data is None:
        raise ProtocolError("BAD_REQUEST", "Frames must be JSON text.", "binary frame")
    try:
        frame = nesting.loads(text_data)
    except nesting.TooDeep as exc:
        raise ProtocolError("BAD_REQUEST", "The frame is nested too deeply.", str(exc)) from None
    except ValueError as exc:
        raise ProtocolError("BAD_REQUEST", "The frame is not valid JSON.", str(exc)) from None
    if not isinstance(frame, dict):
        raise ProtocolError("BAD_REQUEST", "The frame must be a JSON object.", type(frame).__name__)
    kind = frame.get("type")
    if "type" not in frame:
        raise ProtocolError("BAD_REQUEST", "The frame has no type.", "missing field: type")
    if not isinstance(kind, str):
        raise ProtocolError("BAD_REQUEST", "The frame type must be a string.", "wrong type: type")
    if kind not in FRAME_TYPES:
        raise ProtocolError("BAD_REQUEST", f"Unknown frame type {kind[:50]!r}.", "unknown type")
    return frame


def seq_field(frame: dict[str, Any], name: str, *, optional: bool = False) -> int | None:
    """A field naming an event by its seq (docs/protocol.md, "Versions: edits, regenerated answers and branches"); whether it is a user_message of
    the conversation is checked when the run starts."""
    value = frame.get(name)
    if value is None and optional:
        return None
    if name not in frame:
        raise ProtocolError("BAD_REQUEST", f"The frame needs a {name} field.", f"missing field: {name}")
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value < 2**63:
        raise ProtocolError("BAD_REQUEST", f"{name} must be the seq of a message.", f"wrong type: {name}")
    return value


def already_answered() -> ProtocolError:
    return ProtocolError(
        "ALREADY_ANSWERED",
        "This approval request was already answered, has expired, or its run has ended.",
        "approval closed",
    )


def approval_answer(frame: dict[str, Any]) -> tuple[str, Decision]:
    """An `approve` frame's toolCallId and decision (docs/protocol.md, "Approvals")."""
    call_id = frame.get("toolCallId")
    # A NUL is never in a stored id (PostgreSQL's text cannot hold one, and it would refuse the
    # lookup with a DataError): such an id names no request.
    if not isinstance(call_id, str) or not call_id or len(call_id) > MAX_TOOL_CALL_ID_CHARS or "\x00" in call_id:
        raise ProtocolError("BAD_REQUEST", "An approve frame needs a toolCallId.", "missing or wrong field: toolCallId")
    choice = frame.get("decision")
    if choice not in ANSWERS:
        raise ProtocolError("BAD_REQUEST", 'The decision must be "approve" or "deny".', "wrong field: decision")
    reason = frame.get("reason")
    if reason is None:
        reason = ""
    if not isinstance(reason, str):
        raise ProtocolError("BAD_REQUEST", "The reason must be a string.", "wrong type: reason")
    if len(reason) > MAX_REASON_CHARS:
        raise ProtocolError(
            "TOO_LARGE",
            f"The reason is longer than {MAX_REASON_CHARS} characters.",
            f"{len(reason)} > {MAX_REASON_CHARS}",
        )
    problem = invalid_reason(reason)
    if problem:
        raise ProtocolError("BAD_REQUEST", "The reason contains text that cannot be stored.", f"reason: {problem}")
    return call_id, Decision(ANSWERS[choice], reason.strip())


def message_content(frame: dict[str, Any], *, with_files: bool = False) -> str:
    """A message's content; `with_files`: files come with it (a `message` frame's non-empty
    `attachments`), and they alone are a message, so its text may be empty."""
    if "content" not in frame:
        raise ProtocolError("BAD_REQUEST", "A message needs a content field.", "missing field: content")
    content = frame["content"]
    if not isinstance(content, str):
        raise ProtocolError("BAD_REQUEST", "The content must be a string.", "wrong type: content")
    if not content.strip() and not with_files:
        raise ProtocolError("BAD_REQUEST", "The message is empty.", "empty content")
    limit = settings.AGENT_MAX_MESSAGE_CHARS
    if len(content) > limit:
        raise ProtocolError("TOO_LARGE", f"The message is longer than {limit} characters.", f"{len(content)} > {limit}")
    reason = invalid_reason(content)
    if reason:
        raise ProtocolError("BAD_REQUEST", "The message contains text that cannot be stored.", f"content: {reason}")
    return content


def while_running(frame: dict[str, Any]) -> str | None:
    """A message's `whileRunning` (docs/protocol.md, "Queued messages"): "queue", "steer" or None."""
    value = frame.get("whileRunning")
    if value is None:
        return None
    if value not in ("queue", "steer"):
        raise ProtocolError(
            "BAD_REQUEST", 'whileRunning must be "queue", "steer" or null.', "wrong field: whileRunning"
        )
    if frame.get("parentSeq") is not None:
        raise ProtocolError(
            "BAD_REQUEST",
            "A queued message follows the newest turn: it takes no parentSeq.",
            "whileRunning with parentSeq",
        )
    if value == "steer" and frame.get("attachments"):
        # A steer is a line of text the running model reads next; files come with a message.
        raise ProtocolError(
            "BAD_REQUEST", "A steer is text only: send files with a queued message.", "steer with attachments"
        )
    return value


def queue_id_field(frame: dict[str, Any]) -> str:
    """An `unqueue` frame's queueId."""
    value = frame.get("queueId")
    if not isinstance(value, str) or not value:
        raise ProtocolError("BAD_REQUEST", "An unqueue frame needs a queueId.", "missing or wrong field: queueId")
    return value


def clear_queue_field(frame: dict[str, Any]) -> bool:
    """A `cancel`'s `clearQueue` (absent or null: false)."""
    value = frame.get("clearQueue")
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ProtocolError("BAD_REQUEST", "clearQueue must be true or false.", "wrong type: clearQueue")
    return value
