"""The body of POST /api/agui/<slug>/ (AG-UI's RunAgentInput, camelCase) read into what a run
start or a resume needs (docs/protocol.md, "AG-UI"). Raises ProtocolError with the protocol's
codes (BAD_REQUEST, TOO_LARGE), so that a refusal takes section 10's shape."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from chat.runs.client_frames import ProtocolError, message_content

MAX_ID_CHARS = 200
HISTORY_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


@dataclass(frozen=True)
class Resume:
    """One resume entry: the interrupt it answers and whether it approves the call."""

    interrupt_id: str
    approved: bool
    reason: str = ""


@dataclass(frozen=True)
class AguiRequest:
    thread_id: str
    run_id: str
    content: str = ""  # the last user message's text: the run's user_message
    images: tuple[str, ...] = ()  # its image parts' base64 data (chat.doors.agui.agui_images)
    message_id: str | None = None
    history: tuple[dict[str, Any], ...] = ()  # the messages before it, for a new thread
    context: tuple[dict[str, str], ...] = ()
    resume: tuple[Resume, ...] = field(default=())

    def recorded(self) -> dict[str, Any]:
        """The user_message's `request`."""
        kept: dict[str, Any] = {"threadId": self.thread_id, "runId": self.run_id}
        if self.message_id is not None:
            kept["messageId"] = self.message_id
        if self.context:
            kept["context"] = [dict(item) for item in self.context]
        return kept


def bad(message: str, detail: str = "") -> ProtocolError:
    return ProtocolError("BAD_REQUEST", message, detail)


def _id(body: Mapping[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_ID_CHARS or "\x00" in value:
        raise bad(f"{name} must be a string of 1 to {MAX_ID_CHARS} characters.", f"wrong field: {name}")
    return value


def _parts(message: Mapping[str, Any], where: str) -> tuple[str, tuple[str, ...]]:
    """A message's text (its content string, or its text parts joined) and its images' data."""
    content = message.get("content")
    if content is None or isinstance(content, str):
        return content or "", ()
    if not isinstance(content, list):
        raise bad("A message's content must be a string or a list of parts.", f"wrong type: {where}.content")
    texts, pictures = [], []
    for number, part in enumerate(content):
        at = f"{where}.content[{number}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "image":
            source = part.get("source")
            if not isinstance(source, dict) or source.get("type") != "data" or not isinstance(source.get("value"), str):
                raise bad(
                    "An image part needs a data source (base64): this server fetches no URL for a client.",
                    f"wrong part: {at}",
                )
            pictures.append(source["value"])
        else:
            raise bad("A message's parts must be text or image parts.", f"wrong part: {at}")
    return "".join(texts), tuple(pictures)


def _context(body: Mapping[str, Any]) -> tuple[dict[str, str], ...]:
    given = body.get("context")
    if given is None:
        return ()
    if not isinstance(given, list) or not all(
        isinstance(item, dict) and isinstance(item.get("description"), str) and isinstance(item.get("value"), str)
        for item in given
    ):
        raise bad("context must be a list of {description, value} strings.", "wrong field: context")
    kept = tuple({"description": item["description"], "value": item["value"]} for item in given)
    size = sum(len(item["description"]) + len(item["value"]) + 3 for item in kept)
    if size > settings.AGENT_MAX_MESSAGE_CHARS:
        raise ProtocolError(
            "TOO_LARGE",
            f"The context is longer than {settings.AGENT_MAX_MESSAGE_CHARS} characters.",
            f"{size} > {settings.AGENT_MAX_MESSAGE_CHARS}",
        )
    for item in kept:
        message_content({"content": item["value"] or "-"})  # text that can be stored
    return kept


def _resume(body: Mapping[str, Any]) -> tuple[Resume, ...]:
    given = body.get("resume")
    if given is None:
        return ()
    if not isinstance(given, list) or not given:
        raise bad("resume must be a non-empty list of resume entries.", "wrong field: resume")
    entries = []
    for number, entry in enumerate(given):
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("interruptId"), str)
            or entry.get("status") not in ("resolved", "cancelled")
        ):
            raise bad(
                'A resume entry needs interruptId and status "resolved" or "cancelled".',
                f"wrong entry: resume[{number}]",
            )
        payload = entry.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        reason = payload.get("reason") if isinstance(payload.get("reason"), str) else ""
        approved = entry["status"] == "resolved" and payload.get("approved") is True
        entries.append(Resume(entry["interruptId"], approved, reason))
    return tuple(entries)


def _messages(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise bad("messages must be a list of messages.", "wrong field: messages")
    return messages


def _accepted(body: Mapping[str, Any]) -> None:
    """The fields read and ignored must still have their types (`tools`: the agent runs its own)."""
    if body.get("tools") is not None and not isinstance(body["tools"], list):
        raise bad("tools must be a list (it is ignored: the agent runs its own tools).", "wrong type: tools")
    for name in ("parentRunId", "protocolVersion"):
        if body.get(name) is not None and not isinstance(body[name], str):
            raise bad(f"{name} must be a string.", f"wrong type: {name}")


def agui_request(body: Any) -> AguiRequest:
    """The RunAgentInput of a run, checked: a message to start the thread's run with, or the
    answers to its interrupts (`resume`)."""
    if not isinstance(body, dict):
        raise bad("The body must be a RunAgentInput JSON object.", "not an object")
    thread_id, run_id = _id(body, "threadId"), _id(body, "runId")
    messages, context, resume = _messages(body), _context(body), _resume(body)
    _accepted(body)
    if resume:
        return AguiRequest(thread_id, run_id, context=context, resume=resume)
    if not messages or messages[-1].get("role") != "user":
        raise bad("The last message must be the user's (or give resume).", "no user message last")
    last = messages[-1]
    text, pictures = _parts(last, f"messages[{len(messages) - 1}]")
    content = message_content({"content": text}, with_files=bool(pictures))  # images alone are a message
    given_id = last.get("id")
    message_id = given_id if isinstance(given_id, str) and 0 < len(given_id) <= MAX_ID_CHARS else None
    history = []
    for number, message in enumerate(messages[:-1]):
        role = HISTORY_ROLES.get(message.get("role", ""))
        if role is None:  # tool results, reasoning and activity are the client's own display
            continue
        text, _ = _parts(message, f"messages[{number}]")  # an earlier message's images are not kept
        if text.strip():
            history.append({"role": role, "content": text})
    return AguiRequest(
        thread_id,
        run_id,
        content=content,
        images=pictures,
        message_id=message_id,
        history=tuple(history),
        context=context,
    )


def thread_of(body: Any) -> str:
    """The threadId of a `connect` (only it is read)."""
    if not isinstance(body, dict):
        raise bad("The body must be a RunAgentInput JSON object.", "not an object")
    return _id(body, "threadId")
