"""Server-sent events (docs/protocol.md, "Server-sent events"): a conversation's events for a
program that reads HTTP, exactly as the WebSocket sends them, without a thread per stream.

`GET /api/conversations/<id>/stream/?after=<seq>` (or `Last-Event-ID`, which wins): the
persisted events after it, one `sync` event, then the live events, as chat.realtime.follow's
Stream yields them; each is written here as an SSE event with its seq as `id`. A client that
falls behind gets the `error` event SLOW_CONSUMER and the stream ends. `&until=complete` ends it
after the first `complete` event past `after`. nginx must not buffer it: the response says
`X-Accel-Buffering: no` (docs/deployment.md).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson
from django.views.decorators.http import require_http_methods

from chat.accounts import sockets
from chat.agent.text import clean_value
from chat.doors.http.lookups import conversation_owned_grouped
from chat.doors.http.run_answers import not_found, not_signed_in, request_user, run_error
from chat.doors.http.seated import SeatedResponse
from chat.realtime.backlog import SLOW_CONSUMER, SLOW_CONSUMER_MESSAGE
from chat.realtime.follow import Stream


def _seq(value: str | None) -> int | None:
    try:
        return max(0, int(value)) if value is not None and value.strip() else None
    except ValueError:
        return None


def sse_event(frame: dict[str, Any], *, with_id: bool = True) -> bytes:
    """One event: `id: <seq>`, `event: <type>`, `data: <the frame's JSON>` (orjson's JSON holds no newline)."""
    try:
        data = orjson.dumps(frame)
    except TypeError:  # a surrogate stored before text was cleaned on the way in, as on the socket
        data = orjson.dumps(clean_value(frame))
    head = f"id: {frame['seq']}\n" if with_id and "seq" in frame else ""
    return f"{head}event: {frame['type']}\n".encode() + b"data: " + data + b"\n\n"


async def sse_events(stream: Stream) -> AsyncIterator[bytes]:
    """The stream as server-sent events: each frame with its seq as id (sync without one); a
    client that fell behind gets the `error` event SLOW_CONSUMER after the last seq it was
    sent, and the stream ends (it resumes with Last-Event-ID)."""
    frames, sent = stream.frames(), stream.last_seq
    try:
        async for frame in frames:
            if stream.behind:  # nothing more is queued behind what the client has not read
                break
            if isinstance(frame, bytes):
                yield frame
                continue
            yield sse_event(frame, with_id=frame["type"] != "sync")
            sent = frame.get("seq", sent)
    finally:
        await frames.aclose()
    if stream.behind:
        error = {"type": "error", "code": SLOW_CONSUMER, "message": SLOW_CONSUMER_MESSAGE, "lastSeq": sent}
        yield sse_event(error, with_id=False)


@require_http_methods(["GET"])
async def conversation_stream(request, conversation_id: uuid.UUID):
    user = await request_user(request)
    if user is None:
        return not_signed_in()
    conversation = await conversation_owned_grouped(user=user, conversation_id=conversation_id)
    if conversation is None:
        return not_found()
    after = _seq(request.headers.get("Last-Event-ID"))
    if after is None:
        after = _seq(request.GET.get("after")) or 0
    seat = sockets.take(user.pk, sockets.STREAM)
    if seat is None:
        return run_error("RATE_LIMITED", "Too many open streams and sockets; close one first.")
    token = getattr(request, "api_token", None)
    stream = Stream(
        conversation=conversation,
        user=user,
        token_id=token.pk if token is not None else None,
        session_key=request.session.session_key if token is None else None,
        after=after,
        until_complete=request.GET.get("until") == "complete",
        scope=request.scope,
    )
    response = SeatedResponse(_until_done(stream, seat), seat, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
    return response


async def _until_done(stream: Stream, seat: sockets.Seat) -> AsyncIterator[bytes]:
    events = sse_events(stream)
    try:
        async for chunk in events:
            yield chunk
    finally:
        seat.release()
        await events.aclose()  # leaves the groups now, not when the generator is collected
