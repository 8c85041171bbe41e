"""The Responses API door (docs/protocol.md, "Responses API"): every run of the user is a
response. A create is checked and started as /v1/chat/completions starts its run (the same
pieces of chat.doors.openai.openai_api: the body, the images, the new conversation, the stream
joined before the start, one StartRun to chat.runs.engine); what it answers and every read
after it is rendered from the stored events by chat.doors.openai.responses_render."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson
from django.db import DatabaseError
from django.http import JsonResponse, StreamingHttpResponse
from django.views.decorators.http import require_http_methods

from chat.accounts import sockets
from chat.agents.profiles import RESPONSES_VIA
from chat.agents.selectors import agent_chosen
from chat.conversations import uploads
from chat.conversations.selectors import conversation_owned
from chat.conversations.services import conversation_delete
from chat.doors.http.json_api import BodyTooLarge, json_body, limited_body, read_off_the_loop
from chat.doors.http.run_answers import request_user
from chat.doors.http.seated import SeatedResponse
from chat.doors.openai import openai_images
from chat.doors.openai import openai_shapes as shapes
from chat.doors.openai.openai_api import ENDED, CheckedCall, body_limit, discard, new_conversation_grouped, started
from chat.doors.openai.responses_render import ResponseRender, input_items, run_id_of
from chat.doors.openai.responses_request import ResponsesRequest, responses_request
from chat.eventlog.reads import run_events
from chat.models import DEFAULT_AGENT_SLUG, Conversation, Event, Run
from chat.realtime.follow import KEEPALIVE, Stream
from chat.runs import engine
from chat.runs.client_frames import ProtocolError, message_content
from chat.runs.requests import CancelRun, StartRun
from serving.loop_middleware import request_db

CANCEL_WAIT_SECONDS = 10.0


def _not_signed_in() -> JsonResponse:
    response = shapes.openai_error(401, "invalid_api_key", "Give a personal API token as the API key.")
    response["WWW-Authenticate"] = "Bearer"
    return response


def _response_not_found() -> JsonResponse:
    return shapes.openai_error(404, "response_not_found", "No such response.")


def _checked(request) -> tuple[ResponsesRequest, CheckedCall]:
    asked = responses_request(json_body(request, raw=limited_body(request, limit=body_limit())))
    checked = CheckedCall(
        asked.call, message_content({"content": asked.call.content}), openai_images.decoded_images(asked.call)
    )
    return asked, checked


def _slug(run_or_conversation) -> str:
    agent = run_or_conversation.agent
    return agent.slug if agent is not None else DEFAULT_AGENT_SLUG


def _owned_run(*, user, response: str) -> Run | None:
    run_id = run_id_of(response)
    if run_id is None:
        return None
    return (
        Run.objects.select_related("conversation", "agent", "conversation__agent")
        .filter(pk=run_id, conversation__owner=user, imported=False)
        .first()
    )


def _user_message_seq(run: Run) -> int | None:
    return (
        Event.objects.filter(conversation_id=run.conversation_id, run_id=run.pk, type="user_message")
        .order_by("seq")
        .values_list("seq", flat=True)
        .first()
    )


def _existing(*, user, asked: ResponsesRequest, checked: CheckedCall):
    """The conversation a create continues and the parentSeq of its message; raises BadRequest,
    or returns an error response."""
    parent_seq = None
    if asked.previous_response_id is not None:
        run = _owned_run(user=user, response=asked.previous_response_id)
        parent_seq = _user_message_seq(run) if run is not None else None
        if run is None or parent_seq is None:
            raise shapes.BadRequest(
                "No such previous response.", param="previous_response_id", code="previous_response_not_found"
            )
        conversation = Conversation.objects.select_related("agent").get(pk=run.conversation_id)
    else:
        try:
            conversation_id = uuid.UUID(str(asked.conversation_id))
        except ValueError:
            conversation_id = None
        found = conversation_owned(user=user, conversation_id=conversation_id) if conversation_id else None
        if found is None:
            return shapes.openai_error(404, "conversation_not_found", "No such conversation.", param="conversation")
        conversation = Conversation.objects.select_related("agent").get(pk=found.pk)
    if _slug(conversation) != asked.call.model:
        raise shapes.BadRequest(
            f"This conversation's agent is {_slug(conversation)!r}, not {asked.call.model!r}; switch it first.",
            param="model",
            code="model_mismatch",
        )
    try:
        agent_chosen(user=user, slug=asked.call.model)
    except LookupError:
        return None
    decoded = openai_images.clear_of(checked.images, conversation_id=conversation.pk) if checked.images else {}
    try:
        attached = openai_images.stored(conversation_id=conversation.pk, decoded=decoded)
    except uploads.FileRefused as exc:
        raise shapes.BadRequest(
            f"The images were refused: {exc.message}.", param="input", code="image_too_large"
        ) from None
    return conversation, attached, parent_seq


@require_http_methods(["POST"])
async def create(request):
    """POST /v1/responses."""
    user = await request_user(request)
    if user is None:
        return _not_signed_in()
    try:
        asked, checked = await read_off_the_loop(request, _checked, request)
    except BodyTooLarge as exc:
        return shapes.openai_error(413, "request_too_large", f"The request is larger than {exc.limit} bytes.")
    except ValueError:
        return shapes.openai_error(400, "invalid_json", "The body must be a JSON object.")
    except shapes.BadRequest as exc:
        return exc.response()
    except ProtocolError as exc:
        status, code = shapes.START_REFUSALS.get(exc.code, (400, "invalid_request"))
        return shapes.openai_error(status, code, exc.message, param="input")
    call = asked.call
    seat = _seat(user) if call.stream else None
    if call.stream and seat is None:
        return _too_many()
    answered = None
    try:
        answered = await _create(request, user, asked, checked, seat)
        return answered
    finally:
        if seat is not None and not isinstance(answered, SeatedResponse):
            seat.release()  # refused: no stream holds it


async def _create(request, user, asked: ResponsesRequest, checked: CheckedCall, seat: sockets.Seat | None):
    """The create once read and checked; `seat`: the place of its stream (released by the answer,
    or by the caller when no stream is answered)."""
    call = asked.call
    token = getattr(request, "api_token", None)
    new = asked.previous_response_id is None and asked.conversation_id is None
    try:
        if new:
            made = await new_conversation_grouped(user=user, checked=checked)
            parent_seq = None
        else:
            made = await request_db(_existing)(user=user, asked=asked, checked=checked)
            if isinstance(made, JsonResponse):
                return made
            if made is not None:
                made, parent_seq = made[:2], made[2]
        if made is None:
            return shapes.openai_error(
                404, "model_not_found", f"The model {call.model!r} does not exist or you do not have access to it."
            )
        conversation, attached = made
        stream = Stream(
            conversation=conversation,
            user=user,
            token_id=token.pk if token is not None else None,
            session_key=request.session.session_key if token is None else None,
            after=conversation.last_seq,
            until_complete=True,
            new=new,
            scope=request.scope if call.stream else None,
        )
        frames = stream.frames()
        start = StartRun(
            conversation,
            user,
            checked.content,
            parent_seq=parent_seq,
            attachments=openai_images.attachments_of(call.images, attached),
            history=openai_images.recorded_history(call.history, attached),
            options=call.options,
            first=new,
            via=RESPONSES_VIA,
            request=asked.recorded(),
        )
        try:
            run = await started(frames, start)
        except ProtocolError:
            if new:
                await request_db(discard)(conversation)
            else:
                await request_db(openai_images.forget)(conversation_id=conversation.pk, attached=attached)
            raise
    except shapes.BadRequest as exc:
        return exc.response()
    except ProtocolError as exc:
        status, code = shapes.START_REFUSALS.get(exc.code, (400, "invalid_request"))
        return shapes.openai_error(status, code, exc.message)
    except DatabaseError:
        return shapes.openai_error(503, "service_unavailable", "The server cannot reach its database.")
    render = ResponseRender(
        run_id=run.pk, model=call.model, conversation_id=conversation.pk, created_at=int(run.started_at.timestamp())
    )
    if seat is not None:
        response: Any = _event_stream(_events(stream, frames, render, after=-1), seat)
    elif asked.background:
        await frames.aclose()
        render.request = asked.recorded()
        response = JsonResponse(render.response(initial=True))
    else:
        await _follow(frames, render)
        ended = ENDED.get(stream.ended_by or "")
        response = shapes.openai_error(*ended) if ended else JsonResponse(render.response())
    response["X-Agentsite-Conversation"] = str(conversation.pk)
    response["X-Agentsite-Run"] = str(run.pk)
    return response


async def _follow(frames: AsyncIterator[dict[str, Any] | bytes], render: ResponseRender) -> None:
    try:
        async for frame in frames:
            if not isinstance(frame, bytes):
                render.add(frame)
    finally:
        await frames.aclose()


def _sse(event: dict[str, Any]) -> bytes:
    return (
        f"id: {event['sequence_number']}\nevent: {event['type']}\n".encode() + b"data: " + orjson.dumps(event) + b"\n\n"
    )


async def _events(
    stream: Stream, frames: AsyncIterator[dict[str, Any] | bytes], render: ResponseRender, *, after: int
) -> AsyncIterator[bytes]:
    """The response's events with sequence_number > after, as they are rendered from the stored
    events; a stream the server ended gets the `error` event."""
    try:
        async for frame in frames:
            if isinstance(frame, bytes):
                yield KEEPALIVE
                continue
            if stream.behind:
                break
            for event in render.add(frame):
                if event["sequence_number"] > after:
                    yield _sse(event)
            if render.complete is not None:
                break
    finally:
        await frames.aclose()
    ended = ENDED.get(stream.ended_by or "")
    if ended is not None and render.complete is None:
        _, code, message = ended
        error = {"type": "error", "code": code, "message": message, "param": None}
        yield _sse({**error, "sequence_number": len(render.events)})


def _seat(user) -> sockets.Seat | None:
    """A place under the user's cap of open streams and sockets, for one stream of this door."""
    return sockets.take(user.pk, sockets.STREAM)


def _too_many() -> JsonResponse:
    return shapes.openai_error(429, "rate_limit_exceeded", "Too many open streams and sockets; close one first.")


async def _seated(chunks: AsyncIterator[bytes], seat: sockets.Seat) -> AsyncIterator[bytes]:
    try:
        async for chunk in chunks:
            yield chunk
    finally:
        seat.release()
        await chunks.aclose()  # leaves the groups now, not when the generator is collected


def _event_stream(chunks: AsyncIterator[bytes], seat: sockets.Seat) -> StreamingHttpResponse:
    response = SeatedResponse(_seated(chunks, seat), seat, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


def _read(*, user, response: str) -> tuple[Run, list[dict[str, Any]]] | None:
    run = _owned_run(user=user, response=response)
    if run is None:
        return None
    return run, list(run_events(conversation_id=run.conversation_id, run_id=run.pk))


def _render_of(run: Run) -> ResponseRender:
    return ResponseRender(
        run_id=run.pk,
        model=_slug(run),
        conversation_id=run.conversation_id,
        created_at=int(run.started_at.timestamp()),
    )


def _rendered(run: Run, events: list[dict[str, Any]]) -> ResponseRender:
    render = _render_of(run)
    for frame in events:
        render.add(frame)
    return render


def _after(request) -> int:
    for value in (request.GET.get("starting_after"), request.headers.get("Last-Event-ID")):
        if value is not None and value.strip():
            try:
                return int(value)
            except ValueError:
                return -1
    return -1


def _delete(*, user, response: str) -> bool:
    """Delete the conversation that holds the response, as DELETE /api/conversations/<id>/ does
    (its run cancelled, its events and files with it): the log is append-only, so one run cannot go alone."""
    run = _owned_run(user=user, response=response)
    if run is None:
        return False
    conversation_delete(conversation=run.conversation)
    return True


@require_http_methods(["GET", "DELETE"])
async def retrieve(request, response_id: str):
    """GET /v1/responses/<id>, whole or (?stream=true) as its events from the log, then live;
    DELETE /v1/responses/<id>."""
    user = await request_user(request)
    if user is None:
        return _not_signed_in()
    if request.method == "DELETE":
        if not await request_db(_delete)(user=user, response=response_id):
            return _response_not_found()
        return JsonResponse({"id": response_id, "object": "response.deleted", "deleted": True})
    read = await request_db(_read)(user=user, response=response_id)
    if read is None:
        return _response_not_found()
    run, events = read
    if request.GET.get("stream") != "true":
        return JsonResponse(_rendered(run, events).response())
    first = events[0]["seq"] if events else run.conversation.last_seq + 1
    seat = _seat(user)
    if seat is None:
        return _too_many()
    token = getattr(request, "api_token", None)
    stream = Stream(
        conversation=run.conversation,
        user=user,
        token_id=token.pk if token is not None else None,
        session_key=request.session.session_key if token is None else None,
        after=first - 1,
        until_complete=True,
        scope=request.scope,
    )
    return _event_stream(_events(stream, stream.frames(), _render_of(run), after=_after(request)), seat)


@require_http_methods(["POST"])
async def cancel(request, response_id: str):
    """POST /v1/responses/<id>/cancel."""
    user = await request_user(request)
    if user is None:
        return _not_signed_in()
    read = await request_db(_read)(user=user, response=response_id)
    if read is None:
        return _response_not_found()
    run, events = read
    if run.status == Run.Status.RUNNING:
        await engine.cancel(CancelRun(run.conversation_id))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CANCEL_WAIT_SECONDS
        while loop.time() < deadline:
            run, events = await request_db(_read)(user=user, response=response_id) or (run, events)
            if run.status != Run.Status.RUNNING and any(e["type"] == "complete" for e in events):
                break
            await asyncio.sleep(0.1)
        return JsonResponse(_rendered(run, events).response())
    render = _rendered(run, events)
    if render.status != "cancelled":
        return shapes.openai_error(
            400, "not_cancellable", f"This response is {render.status}: only one in progress can be cancelled."
        )
    return JsonResponse(render.response())


def _input_of(*, user, response: str) -> list[dict[str, Any]] | None:
    run = _owned_run(user=user, response=response)
    if run is None:
        return None
    first = next(iter(run_events(conversation_id=run.conversation_id, run_id=run.pk)), None)
    if first is None or first.get("type") != "user_message":
        return []
    return input_items(first, run_id=run.pk, conversation_id=run.conversation_id)


@require_http_methods(["GET"])
async def list_input_items(request, response_id: str):
    """GET /v1/responses/<id>/input_items?order=&limit=&after=."""
    user = await request_user(request)
    if user is None:
        return _not_signed_in()
    items = await request_db(_input_of)(user=user, response=response_id)
    if items is None:
        return _response_not_found()
    order = request.GET.get("order", "desc")
    if order not in ("asc", "desc"):
        return shapes.openai_error(400, "invalid_request", "order must be asc or desc.", param="order")
    try:
        limit = int(request.GET.get("limit", "20"))
    except ValueError:
        limit = 0
    if not 1 <= limit <= 100:
        return shapes.openai_error(400, "invalid_request", "limit must be from 1 to 100.", param="limit")
    if order == "desc":
        items.reverse()
    after = request.GET.get("after")
    if after is not None:
        ids = [item["id"] for item in items]
        items = items[ids.index(after) + 1 :] if after in ids else []
    page = items[:limit]
    return JsonResponse(
        {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(items) > limit,
        }
    )
