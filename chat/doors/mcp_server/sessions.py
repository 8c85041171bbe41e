"""The handshake era's sessions and calls in the database (chat.models.McpSession, McpCall):
opened by `initialize`, found by their `Mcp-Session-Id` with the token that opened them, ended by
`DELETE /mcp`, by idleness (AGENT_MCP_SESSION_IDLE) or with their token. A call records its run
so that `notifications/cancelled`, on any process, finds it. Runs in the request database threads."""

from __future__ import annotations

import hashlib
import json
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError
from django.utils import timezone

from chat.models import ApiToken, McpCall, McpSession, Run

# last_used_at is written at most this often per session (as a token's: chat.accounts.tokens).
TOUCH_EVERY = timedelta(minutes=1)


def _idle() -> timedelta:
    return timedelta(seconds=settings.AGENT_MCP_SESSION_IDLE)


def digest_of(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def request_key(request_id: Any) -> str:
    """A JSON-RPC id as stored: its JSON, so that 1 and "1" stay two requests."""
    return json.dumps(request_id)[:200]


def session_open(*, token: ApiToken, protocol_version: str) -> str:
    """A new session of the token; its `Mcp-Session-Id` (256 random bits), whose digest alone is stored."""
    value = secrets.token_urlsafe(32)
    # The sessions nobody will use again go here, with their calls (last_used_at is indexed).
    McpSession.objects.filter(last_used_at__lt=timezone.now() - _idle()).delete()
    McpSession.objects.create(
        digest=digest_of(value), token=token, user_id=token.user_id, protocol_version=protocol_version[:16]
    )
    return value


def session_forget(*, value: str) -> None:
    """The session an `initialize` that failed had opened."""
    McpSession.objects.filter(digest=digest_of(value)).delete()


def session_found(*, value: str, token: ApiToken) -> str | None:
    """The digest of the token's live session `value`; None for an unknown or ended session, one
    idle too long (deleted now) or another token's."""
    session = McpSession.objects.filter(digest=digest_of(value)).first()
    if session is None or session.token_id != token.pk:
        return None
    now = timezone.now()
    if now - session.last_used_at > _idle():
        session.delete()
        return None
    if now - session.last_used_at >= min(TOUCH_EVERY, _idle() / 2):
        McpSession.objects.filter(pk=session.pk).update(last_used_at=now)
    return session.pk


def touch_due(seconds: float) -> bool:
    """Whether a request that took `seconds` should mark its session used again when it ends (a
    long tools/call holds its session: it is not idle while the call works)."""
    return seconds >= min(TOUCH_EVERY, _idle() / 2).total_seconds()


def session_touch(*, session: str) -> None:
    McpSession.objects.filter(pk=session).update(last_used_at=timezone.now())


def session_end(*, value: str, token: ApiToken) -> bool:
    """End the token's session (DELETE /mcp); its runs go on. False when there is no such session."""
    if session_found(value=value, token=token) is None:
        return False
    McpSession.objects.filter(digest=digest_of(value)).delete()
    return True


def call_record(*, session: str, request_id: Any, run_id) -> bool:
    """The run of a session's tools/call; True when the client cancelled the call before (its
    `notifications/cancelled` came first, maybe to another process): the caller cancels the run.
    A client reusing a request id: the newer call takes the row."""
    key = request_key(request_id)
    try:
        call, created = McpCall.objects.get_or_create(session_id=session, request_id=key, defaults={"run_id": run_id})
    except IntegrityError:  # the session ended meanwhile: nothing can cancel the call through it
        return False
    if created:
        return False
    cancelled_first = call.cancelled and call.run_id is None
    McpCall.objects.filter(pk=call.pk).update(run_id=run_id, cancelled=cancelled_first)
    return cancelled_first


def call_cancel(*, session: str, request_id: Any) -> Run | None:
    """Mark the session's call cancelled by its client; its run when that still runs (a call whose
    run is not recorded yet is marked: call_record tells its handler)."""
    call, created = McpCall.objects.select_related("run").get_or_create(
        session_id=session, request_id=request_key(request_id), defaults={"cancelled": True}
    )
    if created:
        return None
    McpCall.objects.filter(pk=call.pk).update(cancelled=True)
    return call.run if call.run is not None and call.run.status == Run.Status.RUNNING else None


def call_was_cancelled(*, session: str, request_id: Any, run_id) -> bool:
    return McpCall.objects.filter(
        session_id=session, request_id=request_key(request_id), run_id=run_id, cancelled=True
    ).exists()
