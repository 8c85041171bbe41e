"""tools/call of the MCP server (docs/protocol.md, "MCP server"): the named agent runs the message
on a new conversation of the user (source "mcp") or on the one `conversationId` names, started
through the run engine's front door (chat.runs.engine) with `via` "mcp" (unattended), and followed
as chat.doors.openai follows a completion: the conversation's stream (chat.realtime.follow.Stream)
joins before the start, so every event of the run comes live. Each event after the run's
user_message is a progress notification when the client asked for progress; the result comes
with the run's `complete`.

Cancellation: in the 2026-07-28 era closing the call's response stream cancels the run (the SDK
cancels this handler then, in both eras; only that era's cancels the run). In the handshake era
the client's `notifications/cancelled` is answered by chat.doors.mcp_server.gate from the call's
McpCall row, on whichever process receives it; the run's `complete` `cancelled` then reaches this
handler, which tells the gate to send no result (NO_RESULT)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from django.db import DatabaseError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from chat.agent.answer import Answer
from chat.agent.batching import GroupedCalls
from chat.agents.profiles import MCP_VIA
from chat.conversations.services import conversation_create, conversation_delete
from chat.doors.mcp_server import sessions
from chat.doors.mcp_server.tools import agent_of
from chat.eventlog.turns import first_message_title
from chat.models import DEFAULT_AGENT_SLUG, MCP_SOURCE, AgentProfile, ApiToken, Conversation
from chat.realtime.follow import Stream
from chat.runs import engine
from chat.runs.client_frames import ProtocolError, message_content
from chat.runs.requests import CancelRun, StartRun
from serving.loop_middleware import request_db

# The ASGI scope keys the gate and this handler share: who calls, and "send no result".
CALLER = "agentsite.mcp.caller"
NO_RESULT = "agentsite.mcp.no_result"
ARGUMENTS = frozenset({"message", "conversationId"})


@dataclass(frozen=True)
class Caller:
    """The token's user, the token, and the digest of the handshake era's session (None: 2026-07-28)."""

    user: Any
    token: ApiToken
    session: str | None


def tool_error(code: str, message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"{code}: {message}")], is_error=True)


def _arguments(arguments: Mapping[str, Any] | None) -> tuple[str, str | None]:
    """(content, conversationId) of arguments that fit the inputSchema; ProtocolError otherwise."""
    given = dict(arguments or {})
    unknown = sorted(set(given) - ARGUMENTS)
    if unknown:
        raise ProtocolError("BAD_REQUEST", f"Unknown arguments: {', '.join(unknown)}; give message and conversationId.")
    conversation_id = given.get("conversationId")
    if conversation_id is not None and not isinstance(conversation_id, str):
        raise ProtocolError("BAD_REQUEST", "conversationId must be a string.")
    return message_content({"content": given.get("message")} if "message" in given else {}), conversation_id


def _slug(conversation: Conversation) -> str:
    return conversation.agent.slug if conversation.agent is not None else DEFAULT_AGENT_SLUG


def _conversation(
    *, user, slug: str, profile: AgentProfile | None, conversation_id: str | None, content: str
) -> tuple[Conversation, bool]:
    """The call's conversation and whether it was made for it; ProtocolError NOT_FOUND or BAD_REQUEST."""
    if conversation_id is None:
        made = conversation_create(owner=user, title=first_message_title(content), agent=profile, source=MCP_SOURCE)
        return Conversation.objects.select_related("agent").get(pk=made.pk), True
    try:
        key = uuid.UUID(conversation_id)
    except ValueError:
        key = None
    conversation = (
        Conversation.objects.select_related("agent").filter(owner=user, pk=key).first() if key is not None else None
    )
    if conversation is None:
        raise ProtocolError("NOT_FOUND", "No such conversation.")
    if _slug(conversation) != slug:
        raise ProtocolError(
            "BAD_REQUEST", f"This conversation's agent is {_slug(conversation)!r}: call ask_{_slug(conversation)}."
        )
    return conversation, False


def _discard(conversation: Conversation) -> None:
    """A conversation made for a refused start goes again: a refusal stores nothing."""
    try:
        conversation_delete(conversation=conversation)
    except DatabaseError:
        pass  # its run never started; the conversation stays empty


def progress_message(frame: Mapping[str, Any]) -> str:
    kind = frame.get("type")
    if kind == "text":
        return str(frame.get("content", ""))
    if kind == "tool_start":
        return f"calling {frame.get('toolName')}"
    if kind == "tool_end":
        return f"{frame.get('toolName')} {'failed' if frame.get('isError') else 'done'}"
    if kind == "complete":
        return str(frame.get("status"))
    return str(kind)


@dataclass
class Followed:
    answer: Answer
    errors: list[Mapping[str, Any]]
    complete: Mapping[str, Any] | None = None


async def _follow(ctx, frames: AsyncIterator[dict[str, Any] | bytes], *, run_id: str, after: int) -> Followed:
    """The run's events to its `complete`, each after its user_message (`after`) a progress notification."""
    followed = Followed(Answer(), [])
    async for frame in frames:
        if isinstance(frame, bytes) or str(frame.get("runId")) != run_id:
            continue
        followed.answer.add(frame)
        if frame.get("type") == "error":
            followed.errors.append(frame)
        if frame["seq"] > after:
            # A no-op when the request asked for no progress (no progressToken).
            await ctx.session.report_progress(frame["seq"], None, progress_message(frame))
        if frame.get("type") == "complete":
            followed.complete = frame
            break
    return followed


def _result(followed: Followed, *, conversation_id, run_id: str) -> types.CallToolResult:
    complete = followed.complete or {}
    status = complete.get("status", "interrupted")
    answer = followed.answer.text
    text = answer
    if status in ("failed", "interrupted") and followed.errors:
        last = followed.errors[-1]
        text = f"{last.get('code')}: {last.get('message')}"
    structured = {"answer": answer, "conversationId": str(conversation_id), "runId": run_id, "status": status}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=structured,
        is_error=status != "succeeded",
    )


def _tool_conversation(*, user, name: str, arguments) -> tuple[str, Conversation, bool] | None:
    """A call's agent and conversation in one trip: None for a tool that names no agent of the
    user's (before its arguments are looked at); else (content, conversation, whether it was made
    for the call); ProtocolError for arguments or a conversation refused (_arguments, _conversation)."""
    found = agent_of(user=user, name=name)
    if found is None:
        return None
    slug, profile = found
    content, conversation_id = _arguments(arguments)
    conversation, new = _conversation(
        user=user, slug=slug, profile=profile, conversation_id=conversation_id, content=content
    )
    return content, conversation, new


# ... grouped with the other calls' of the moment, one trip for all (issue 55).
_call_conversation = GroupedCalls(_tool_conversation, request_db, name="mcp-calls")
# A started call's record in its session, grouped likewise: the call's answer is followed after it.
_call_record = GroupedCalls(sessions.call_record, request_db, name="mcp-call-records")


async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    caller: Caller = ctx.request.scope[CALLER]
    user, token = caller.user, caller.token
    try:
        found = await _call_conversation(user=user, name=params.name, arguments=params.arguments)
    except ProtocolError as exc:
        return tool_error(exc.code, exc.message)
    if found is None:
        raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {params.name}")
    content, conversation, new = found
    stream = Stream(
        conversation=conversation,
        user=user,
        token_id=token.pk,
        session_key=None,
        after=conversation.last_seq,
        until_complete=True,
        new=new,
    )
    frames = stream.frames()
    try:
        async for frame in frames:  # to the sync: joined before the run starts, nothing of it missed
            if isinstance(frame, dict) and frame.get("type") == "sync":
                break
        start = StartRun(conversation, user, content, first=new, via=MCP_VIA, api_token_id=token.pk)
        run, seq = await engine.start(start)
    except ProtocolError as exc:
        await frames.aclose()
        if new:
            await request_db(_discard)(conversation)
        return tool_error(exc.code, exc.message)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await frames.aclose()
        raise
    run_id = str(run.pk)
    try:
        if caller.session is not None and await _call_record(
            session=caller.session, request_id=ctx.request_id, run_id=run.pk
        ):
            await engine.cancel(CancelRun(conversation.pk))  # its client cancelled it before it was recorded
        followed = await _follow(ctx, frames, run_id=run_id, after=seq)
    except anyio.get_cancelled_exc_class():
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:  # its stream closed: the call is cancelled
            with anyio.CancelScope(shield=True):
                await engine.cancel(CancelRun(conversation.pk))
        raise
    finally:
        with anyio.CancelScope(shield=True):
            await frames.aclose()
    if followed.complete is None:  # the server ended the stream: the conversation deleted, the token revoked
        ended = "the conversation was deleted" if stream.ended_by == "deleted" else "the token was revoked"
        return tool_error("NOT_FOUND", f"The run's answer cannot be followed: {ended}.")
    if (
        followed.complete.get("status") == "cancelled"
        and caller.session is not None
        and await request_db(sessions.call_was_cancelled)(
            session=caller.session, request_id=ctx.request_id, run_id=run.pk
        )
    ):
        ctx.request.scope[NO_RESULT] = True  # the client cancelled the call: it gets no result (MCP)
    return _result(followed, conversation_id=conversation.pk, run_id=run_id)
