"""The typed requests of the front door (chat.runs.engine), one per action, and the reading of
a client's frame into one. Every door builds these: the socket's frames, the HTTP run
endpoints, `/v1` and the pages; the engine takes nothing else."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from chat.agent.approval import Decision
from chat.conversations import uploads
from chat.eventlog.types import Message
from chat.models import Conversation
from chat.runs.client_frames import (
    ProtocolError,
    approval_answer,
    clear_queue_field,
    message_content,
    seq_field,
    while_running,
)


@dataclass(frozen=True)
class StartRun(Message):
    """A run to start for a user's message, an edit or a regenerate (Message's fields)."""

    # The caller saw no event in the conversation: the run may begin while its start is stored
    # (chat.runtime.head_start).
    first: bool = False
    # While the conversation's run works, "queue": the message waits (docs/protocol.md,
    # "Queued messages"); "steer": the run takes it in before its next model call ("Steering").
    while_running: str | None = None


@dataclass(frozen=True)
class CancelRun:
    """Cancel the conversation's running run, wherever it runs; `clear_queue`: withdraw every
    waiting message first."""

    conversation_id: Any
    clear_queue: bool = False


@dataclass(frozen=True)
class Unqueue:
    """Withdraw a waiting message."""

    conversation_id: Any
    queue_id: str


@dataclass(frozen=True)
class ApproveRun:
    """The owner's answer to a run's approval request."""

    conversation_id: Any
    tool_call_id: str
    decision: Decision
    # The socket's address (chat.realtime.hub), told if the answer reaches another process too
    # late; None over HTTP, where nobody is left to tell.
    reply_to: tuple[str, int] | None = None


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


async def start_request(
    kind: str, frame: dict[str, Any], *, conversation: Conversation, user, first: bool, api_token_id: int | None = None
) -> StartRun:
    """A `message`, `edit` or `regenerate` frame (the socket's, or the body of POST .../messages/,
    a `message`) as a StartRun, each field checked: a message's `content`, `parentSeq`? and
    `attachments`? (files alone are a message), an edit's `seq` and `content`, a regenerate's `seq`.
    `api_token_id`: the token that sent it (None: a session)."""
    if kind == "edit":
        content = message_content(frame)
        return StartRun(
            conversation, user, content, edits=seq_field(frame, "seq"), first=first, api_token_id=api_token_id
        )
    if kind == "regenerate":
        regenerates = seq_field(frame, "seq")
        return StartRun(conversation, user, "", regenerates=regenerates, first=first, api_token_id=api_token_id)
    attachments = await message_attachments(frame, conversation_id=conversation.pk)
    content = message_content(frame, with_files=bool(attachments))  # the content rules first
    return StartRun(
        conversation,
        user,
        content,
        parent_seq=seq_field(frame, "parentSeq", optional=True),
        attachments=attachments,
        first=first,
        while_running=while_running(frame),
        api_token_id=api_token_id,
    )


def compact_request(
    frame: dict[str, Any], *, conversation: Conversation, user, api_token_id: int | None = None
) -> StartRun:
    """A `compact` frame (or the body of POST .../compact/) as the StartRun of a compaction run:
    `seq`?, the user_message whose turn ends the branch to compact (docs/protocol.md, "Compaction")."""
    seq = seq_field(frame, "seq", optional=True)
    return StartRun(conversation, user, "", parent_seq=seq, compact=True, api_token_id=api_token_id)


def cancel_request(frame: dict[str, Any], *, conversation_id) -> CancelRun:
    """A `cancel` frame (or the body of POST .../cancel/) as a CancelRun."""
    return CancelRun(conversation_id, clear_queue_field(frame))


def approve_request(frame: dict[str, Any], *, conversation_id, reply_to: tuple[str, int] | None) -> ApproveRun:
    """An `approve` frame (or the body of POST /api/runs/<id>/approval/) as an ApproveRun."""
    tool_call_id, decision = approval_answer(frame)
    return ApproveRun(conversation_id, tool_call_id, decision, reply_to)
