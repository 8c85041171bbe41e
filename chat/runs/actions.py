"""Starting, cancelling and answering a run on a user's behalf, whichever door asked: the
WebSocket's frames (chat.doors.socket.consumers) and the HTTP run endpoints (chat.doors.api.runs_api) call
these and nothing else, so both share one start path, its limits, quotas and refusal codes
(docs/protocol.md, "Client frames" and "Runs over HTTP"). Every refusal is a ProtocolError."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from chat.agent.approval import Decision
from chat.agent.turns import ModelOptions
from chat.conversations import uploads
from chat.exceptions import (
    AgentUnavailable,
    ApprovalClosed,
    ConversationGone,
    NotAUserMessage,
    QuotaBusy,
    QuotaExceeded,
    RateLimited,
    RunInProgress,
    UnknownApproval,
)
from chat.models import Run
from chat.runs.client_frames import ProtocolError, already_answered, message_content, seq_field
from chat.runtime.registry import get_registry


def database_unavailable() -> ProtocolError:
    return ProtocolError(
        "UNAVAILABLE", "The server cannot reach its database; try again in a moment.", "database unavailable"
    )


async def message_attachments(frame: dict[str, Any], *, conversation_id) -> tuple[dict[str, Any], ...]:
    """The files a message's `attachments` names, as its user_message records them; each must
    be in the conversation's workspace (docs/protocol.md, "Attachments")."""
    paths = frame.get("attachments")
    if paths is None:
        return ()
    if not isinstance(paths, list) or not all(isinstance(path, str) for path in paths):
        raise ProtocolError("BAD_REQUEST", "attachments must be a list of file paths.", "wrong type: attachments")
    try:
        found = await asyncio.to_thread(uploads.attachments_resolve, conversation_id=conversation_id, paths=paths)
    except uploads.FileRefused as exc:
        raise ProtocolError("BAD_REQUEST", "The attachments were refused.", exc.message) from None
    return tuple(found)


@dataclass(frozen=True)
class MessageRequest:
    """A `message` frame (the socket's, or the body of POST .../messages/), checked: what a run
    start is asked with."""

    content: str
    parent_seq: int | None
    attachments: tuple[dict[str, Any], ...]


async def message_request(frame: dict[str, Any], *, conversation_id) -> MessageRequest:
    """The `message` frame's `content`, `parentSeq`? and `attachments`?, each checked (a message
    with files may have no text)."""
    attachments = await message_attachments(frame, conversation_id=conversation_id)
    return MessageRequest(
        content=message_content(frame, with_files=bool(attachments)),
        parent_seq=seq_field(frame, "parentSeq", optional=True),
        attachments=attachments,
    )


async def run_start(
    *,
    conversation,
    user,
    content: str,
    attachments: tuple[dict[str, Any], ...] = (),
    history: tuple[dict[str, Any], ...] = (),
    options: ModelOptions | None = None,
    first: bool = False,
    **version: int | None,
) -> tuple[Run, int]:
    """The run and the seq of its user_message. `history`: the earlier messages of an
    OpenAI-compatible request, recorded on the user_message; `options`: its temperature and
    max_tokens for the run's model calls (None: the agent's own); `first`: the caller saw no
    event in the conversation (chat.runtime.head_start)."""
    try:
        return await get_registry().start(
            conversation=conversation,
            user=user,
            content=content,
            attachments=attachments,
            history=history,
            options=options,
            first=first,
            **version,
        )
    except NotAUserMessage as exc:
        raise ProtocolError("BAD_REQUEST", "That is not a message of this conversation.", str(exc)) from None
    except RunInProgress:
        raise ProtocolError("RUN_IN_PROGRESS", "A run is already in progress in this conversation.") from None
    except RateLimited as exc:
        raise ProtocolError("RATE_LIMITED", "Too many messages; wait a minute.", str(exc)) from None
    except QuotaBusy as exc:
        raise ProtocolError(
            "QUOTA_EXCEEDED",
            "A run of yours is in progress and may use up your daily token quota; wait for it to end.",
            str(exc),
        ) from None
    except QuotaExceeded as exc:
        raise ProtocolError(
            "QUOTA_EXCEEDED", "Your daily token quota is used up; try again tomorrow.", str(exc)
        ) from None
    except AgentUnavailable as exc:
        # Refused rather than answered by another agent: a profile may stand for an endpoint
        # chosen for what it may see (a local model for confidential work), and a silent
        # switch would send the message elsewhere. The user picks another agent (PATCH).
        raise ProtocolError(
            "AGENT_UNAVAILABLE", "This conversation's agent is no longer available to you; pick another.", str(exc)
        ) from None
    except ConversationGone:
        raise ProtocolError("NOT_FOUND", "This conversation no longer exists.", "conversation deleted") from None


async def run_cancel(*, conversation_id) -> bool:
    return await get_registry().cancel(conversation_id=conversation_id)


async def run_approve(
    *, conversation_id, tool_call_id: str, decision: Decision, reply_to: tuple[str, int] | None
) -> None:
    """`reply_to`: the socket's address (chat.realtime.hub), told if the answer reaches another process too late
    (None over HTTP: nobody is left to tell)."""
    try:
        await get_registry().approve(
            conversation_id=conversation_id, tool_call_id=tool_call_id, decision=decision, reply_to=reply_to
        )
    except UnknownApproval:
        raise ProtocolError(
            "BAD_REQUEST", "This conversation has no approval request with that toolCallId.", "unknown toolCallId"
        ) from None
    except ApprovalClosed:
        raise already_answered() from None
