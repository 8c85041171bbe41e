"""The AG-UI door (docs/protocol.md, "AG-UI"): agent front-ends (CopilotKit, @ag-ui/client's
HttpAgent) post a RunAgentInput and read the run as AG-UI 1.0 events over server-sent events.

A message starts a run through the one front door (chat.runs.engine) on the thread's
conversation, the stream joined before the start (as /v1 joins it) so that every event of the
run comes live; a `resume` answers the thread's approval requests through the same front door;
`connect` reads the thread as it stands and follows the rest. Every AG-UI event is rendered
from the stored events (chat.doors.agui.agui_render), never from a side channel."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
from django.db import DatabaseError
from django.http import JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from chat.accounts import sockets
from chat.agent.batching import GroupedCalls
from chat.agents.profiles import AGUI_VIA
from chat.conversations.uploads import FileRefused
from chat.doors.agui import agui_images
from chat.doors.agui import agui_threads as threads
from chat.doors.agui.agui_capabilities import capabilities
from chat.doors.agui.agui_render import AguiRender, agui_run_id
from chat.doors.agui.agui_request import AguiRequest, agui_request, thread_of
from chat.doors.agui.agui_snapshot import snapshot_messages
from chat.doors.http.json_api import BodyTooLarge, json_body, limited_body, read_off_the_loop
from chat.doors.http.run_answers import request_user, run_error
from chat.doors.http.seated import SeatedResponse
from chat.models import Conversation
from chat.realtime.follow import KEEPALIVE, Stream
from chat.runs import engine
from chat.runs.client_frames import ProtocolError
from chat.runs.requests import StartRun, approve_request
from serving.loop_middleware import request_db

# How long a run that asked for approval stays quiet before its AG-UI run ends with the
# interrupt: the requests of one model turn are stored one after the other, within milliseconds.
INTERRUPT_GRACE_SECONDS = 0.5
# A stream the server ends before its run does (Stream.ended_by).
ENDED = {
    "deleted": ("NOT_FOUND", "The conversation of this thread was deleted."),
    "revoked": ("NOT_AUTHENTICATED", "The credential of this stream was revoked."),
}


def _error(status: int, code: str, message: str, detail: str = "") -> JsonResponse:
    """Section 10's refusal shape, for the codes of this door that have no frame code."""
    error = {"code": code, "message": message, **({"detail": detail} if detail else {})}
    return JsonResponse({"error": error}, status=status)


def _refused(exc: ProtocolError) -> JsonResponse:
    return run_error(exc.code, exc.message, exc.detail, exc.extra)


async def _signed_in(request):
    """The user, or the refusal: no credentials at all is NOT_AUTHENTICATED (an AG-UI client is
    told to sign in before anything else), a session's unsafe request without its CSRF token 403
    (the views are exempt from the middleware's check only to answer the first; a bearer token
    needs none)."""
    user = await request_user(request)
    if user is None:
        return None, _not_signed_in()
    if request.method == "POST" and getattr(request, "api_token", None) is None:
        refused = CsrfViewMiddleware(lambda r: None).process_view(request, None, (), {})
        if refused is not None:
            return None, refused
    return user, None


def _not_signed_in() -> JsonResponse:
    response = run_error("NOT_AUTHENTICATED", "Sign in, or give a personal API token as a bearer token.")
    response["WWW-Authenticate"] = "Bearer"
    return response


def _not_found(what: str = "thread") -> JsonResponse:
    return run_error("NOT_FOUND", f"No such {what}.")


def _mismatch(conversation: Conversation, slug: str) -> JsonResponse:
    return _error(
        409,
        "AGENT_MISMATCH",
        f"This thread's agent is {threads.slug_of(conversation)!r}, not {slug!r}; switch it first (PATCH).",
    )


def _body(request) -> Any:
    return json_body(request, raw=limited_body(request, limit=_limit()))


def _limit() -> int:
    return 1024 * 1024 * 4  # messages a front-end resends with every run: more than one message's


async def _read(request, parse):
    """The body read and checked by `parse`, or the refusal to answer."""
    try:
        return await read_off_the_loop(request, lambda: parse(_body(request)))
    except BodyTooLarge as exc:
        return run_error("TOO_LARGE", f"The request is larger than {exc.limit} bytes.")
    except ValueError:
        return run_error("BAD_REQUEST", "The body must be a RunAgentInput JSON object.", "invalid JSON")
    except ProtocolError as exc:
        return _refused(exc)


@csrf_exempt
@require_http_methods(["GET", "POST"])
async def agent(request, slug: str):
    """GET: the agent's AgentCapabilities; POST: a run (a message, or a `resume`)."""
    user, refused = await _signed_in(request)
    if refused is not None:
        return refused
    if request.method == "GET":
        found = await request_db(capabilities)(user=user, slug=slug)
        return JsonResponse(found) if found is not None else _not_found("agent")
    asked = await _read(request, agui_request)
    if isinstance(asked, JsonResponse):
        return asked
    return await _seated(request, user, lambda seat: _run(request, user, slug, asked, seat))


@csrf_exempt
@require_http_methods(["POST"])
async def connect(request, slug: str):
    """The thread as it stands, then the live rest of its running run."""
    user, refused = await _signed_in(request)
    if refused is not None:
        return refused
    thread_id = await _read(request, thread_of)
    if isinstance(thread_id, JsonResponse):
        return thread_id
    return await _seated(request, user, lambda seat: _connect(request, user, slug, thread_id, seat))


async def _seated(request, user, answer):
    seat = sockets.take(user.pk, sockets.STREAM)
    if seat is None:
        return run_error("RATE_LIMITED", "Too many open streams and sockets; close one first.")
    answered = None
    try:
        answered = await answer(seat)
        return answered
    except ProtocolError as exc:
        return _refused(exc)
    except DatabaseError:
        return run_error("UNAVAILABLE", "The server cannot reach its database; try again in a moment.")
    finally:
        if not isinstance(answered, SeatedResponse):
            seat.release()  # refused: no stream holds it


# The agent's and the thread's look-ups of a request, grouped with the other requests' of the moment.
_open_thread = GroupedCalls(threads.open_thread, request_db, name="agui-threads")


def _stream(request, user, conversation: Conversation, *, after: int, new: bool = False) -> Stream:
    token = getattr(request, "api_token", None)
    return Stream(
        conversation=conversation,
        user=user,
        token_id=token.pk if token is not None else None,
        session_key=request.session.session_key if token is None else None,
        after=after,
        until_complete=True,
        new=new,
        state=False,  # AG-UI's events are the stored events' (AguiRender): its `sync` is not rendered
        scope=request.scope,
    )


async def _thread(user, slug: str, thread_id: str) -> Conversation | JsonResponse | None:
    """The thread's conversation (None: none yet), or the refusal."""
    agent_open, found = await _open_thread(user=user, slug=slug, thread_id=thread_id)
    if not agent_open:
        return _not_found("agent")
    if isinstance(found, threads.Foreign):
        return _not_found()
    if found is not None and threads.slug_of(found) != slug:
        return _mismatch(found, slug)
    return found


async def _run(request, user, slug: str, asked: AguiRequest, seat: sockets.Seat):
    found = await _thread(user, slug, asked.thread_id)
    if isinstance(found, JsonResponse):
        return found
    if asked.resume:
        if found is None:
            raise ProtocolError("BAD_REQUEST", "This thread has no interrupt to resume.", "unknown thread")
        return await _resume(request, user, found, asked, seat)
    # All checked before anything is made; none (most messages): no trip to a thread.
    pictures = await asyncio.to_thread(agui_images.decoded, asked.images) if asked.images else []
    new = found is None
    conversation = found
    if conversation is None:
        conversation = await request_db(threads.new_thread)(
            user=user, thread_id=asked.thread_id, slug=slug, content=asked.content
        )
        if conversation is None:
            return _not_found("agent")
    token = getattr(request, "api_token", None)
    stream = _stream(request, user, conversation, after=conversation.last_seq, new=new)
    frames = stream.frames()
    attachments: tuple[dict[str, Any], ...] = ()
    try:
        first = await anext(frames)  # joined: every event of the run comes live
        if pictures:  # none (most messages): no trip to a thread
            attachments = await request_db(_stored)(conversation_id=conversation.pk, pictures=pictures)
        start = StartRun(
            conversation,
            user,
            asked.content,
            attachments=attachments,
            history=asked.history if new else (),
            first=new,
            via=AGUI_VIA,
            request=asked.recorded(),
            api_token_id=token.pk if token is not None else None,
        )
        run, _ = await engine.start(start)
    except BaseException:
        await frames.aclose()
        if new:
            await request_db(threads.discard)(conversation)  # its workspace with it
        elif attachments:
            await request_db(agui_images.forget)(conversation_id=conversation.pk, attachments=attachments)
        raise
    render = AguiRender(run_id=run.pk, thread_id=asked.thread_id, agui_run_id=asked.run_id, model=slug)
    return _answer(stream, frames, render, [render.started(), *_followed(render, first)], seat, conversation, run.pk)


def _stored(*, conversation_id, pictures: list[agui_images.Picture]) -> tuple[dict[str, Any], ...]:
    try:
        return agui_images.stored(conversation_id=conversation_id, pictures=pictures)
    except FileRefused as exc:
        code = "TOO_LARGE" if exc.status == 413 else "BAD_REQUEST"
        raise ProtocolError(code, f"The images were refused: {exc.message}.", "image refused") from None


async def _resume(request, user, conversation: Conversation, asked: AguiRequest, seat: sockets.Seat):
    """Answer the interrupts, then stream the rest of the same run as a new AG-UI run."""
    target = await request_db(threads.answering)(conversation=conversation, entries=asked.resume)
    stream = _stream(request, user, conversation, after=target.before[-1]["seq"])
    frames = stream.frames()
    try:
        first = await anext(frames)
        for tool_call_id, _, entry in target.calls:
            frame = {"toolCallId": tool_call_id, "decision": "approve" if entry.approved else "deny"}
            await engine.approve(
                approve_request({**frame, "reason": entry.reason}, conversation_id=conversation.pk, reply_to=None)
            )
    except BaseException:
        await frames.aclose()
        raise
    user_message = target.before[0] if target.before and target.before[0]["type"] == "user_message" else {}
    render = AguiRender(
        run_id=target.run_id,
        thread_id=asked.thread_id,
        agui_run_id=agui_run_id(user_message, target.run_id),
        model=threads.slug_of(conversation),
    )
    for frame in target.before:
        render.add(frame)
    for _, interrupt_id, _ in target.calls:
        render.asked.pop(interrupt_id, None)  # answered now: their results come live
    events = [render.started(agui_run_id=asked.run_id), *_followed(render, first)]
    return _answer(stream, frames, render, events, seat, conversation, target.run_id)


async def _connect(request, user, slug: str, thread_id: str, seat: sockets.Seat):
    agent_open, found = await _open_thread(user=user, slug=slug, thread_id=thread_id)
    if not agent_open:
        return _not_found("agent")
    if found is None or isinstance(found, threads.Foreign):
        return _not_found()
    state = await request_db(threads.thread_state)(conversation=found)
    model = state.user_message.get("model") or threads.slug_of(found)
    run_id = state.run_id if state.run_id is not None else found.pk
    render = AguiRender(
        run_id=run_id, thread_id=thread_id, agui_run_id=agui_run_id(state.user_message, run_id), model=model
    )
    ended: list[dict[str, Any]] = []  # its RUN_FINISHED or RUN_ERROR, once it ended
    for frame in state.run:
        made = render.add(frame)
        if render.finished and not ended:
            ended = made[-1:]
    events = [render.started(), {"type": "MESSAGES_SNAPSHOT", "messages": snapshot_messages(state.branch)}]
    if state.run_id is None:
        events.append(render.finished_event({"type": "success"}))
        return _answer(None, None, render, events, seat, found, None)
    if render.finished:
        return _answer(None, None, render, [*events, *ended], seat, found, run_id)
    if render.waiting:
        return _answer(None, None, render, [*events, *render.interrupt()], seat, found, run_id)
    stream = _stream(request, user, found, after=state.last_seq)
    return _answer(stream, stream.frames(), render, [*events, *render.reopen()], seat, found, run_id)


def _followed(render: AguiRender, frame: dict[str, Any] | bytes) -> list[dict[str, Any]]:
    """The events of the stream's first step (its `sync`, or events read back), a keep-alive none."""
    return [] if isinstance(frame, bytes) else render.add(frame)


def _sse(event: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(event) + b"\n\n"


def _answer(stream, frames, render: AguiRender, first: list[dict[str, Any]], seat, conversation, run_id):
    chunks = _events(stream, frames, render, first)
    response = SeatedResponse(_seated_chunks(chunks, seat), seat, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    response["X-Agentsite-Conversation"] = str(conversation.pk)
    if run_id is not None:
        response["X-Agentsite-Run"] = str(run_id)
    return response


async def _seated_chunks(chunks: AsyncIterator[bytes], seat: sockets.Seat) -> AsyncIterator[bytes]:
    try:
        async for chunk in chunks:
            yield chunk
    finally:
        seat.release()
        await chunks.aclose()  # leaves the groups now, not when the generator is collected


async def _events(
    stream: Stream | None,
    frames: AsyncIterator[dict[str, Any] | bytes] | None,
    render: AguiRender,
    first: list[dict[str, Any]],
) -> AsyncIterator[bytes]:
    """`first`, then the AG-UI events of the run's stored events as they come, to its end; a
    run waiting for approval ends its AG-UI run with the interrupt once quiet."""
    for event in first:
        yield _sse(event)
    if stream is None or frames is None or render.finished:
        return
    step: asyncio.Future | None = None
    try:
        while not render.finished:
            step = asyncio.ensure_future(anext(frames))
            if render.waiting:
                await asyncio.wait((step,), timeout=INTERRUPT_GRACE_SECONDS)
                if not step.done():
                    for event in render.interrupt():
                        yield _sse(event)
                    break
            try:
                frame = await step
            except StopAsyncIteration:
                break
            step = None
            if isinstance(frame, bytes):
                yield KEEPALIVE
                continue
            if stream.behind:
                break
            for event in render.add(frame):
                yield _sse(event)
    finally:
        if step is not None and not step.done():
            step.cancel()
            await asyncio.wait((step,))
        await frames.aclose()
    if not render.finished:
        code, message = ENDED.get(stream.ended_by or "", ("SLOW_CONSUMER", "The client fell too far behind."))
        yield _sse(render.stopped(code, message))
