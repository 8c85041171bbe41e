"""The OpenAI-compatible endpoint (docs/protocol.md, "OpenAI-compatible endpoint"): any OpenAI
client, with a personal API token as its key, lists the agents as models and runs one.

Each completion is a new conversation of the user (Conversation.source "api"), started through
the one start path (chat.runs.engine: the same limits, quotas and agents as the chat
page), its run followed with the conversation stream's follower (chat.realtime.follow.Stream),
which joins before the run starts: register-then-fetch with nothing yet to fetch, so every
event of the run comes live and none is read back. Async views under daphne: no thread waits
for a run.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from django.conf import global_settings, settings
from django.db import DatabaseError
from django.http import JsonResponse, StreamingHttpResponse
from django.views.decorators.http import require_http_methods

from chat.agent.batching import GroupedCalls
from chat.agents.selectors import agent_chosen, agent_profiles_for_user
from chat.conversations import uploads
from chat.conversations.services import conversation_create, conversation_delete
from chat.doors.http.json_api import BodyTooLarge, json_body, limited_body, read_off_the_loop
from chat.doors.http.run_answers import request_user
from chat.doors.openai import openai_images
from chat.doors.openai import openai_shapes as shapes
from chat.eventlog.turns import first_message_title
from chat.models import API_SOURCE, DEFAULT_AGENT_SLUG, Conversation, Run
from chat.realtime.follow import KEEPALIVE, Stream
from chat.runs import engine
from chat.runs.client_frames import ProtocolError, message_content
from chat.runs.requests import StartRun
from serving.loop_middleware import request_db

log = logging.getLogger(__name__)

# A call the server ends before its run does (Stream.ended_by): its conversation deleted, or its
# credential revoked (the token, or its user deactivated).
ENDED = {
    "deleted": (404, "not_found", "The conversation of this completion was deleted."),
    "revoked": (401, "invalid_api_key", "The API key was revoked."),
}


def _not_signed_in() -> JsonResponse:
    response = shapes.openai_error(401, "invalid_api_key", "Give a personal API token as the API key.")
    response["WWW-Authenticate"] = "Bearer"
    return response


def _model_slugs(user) -> list[str]:
    return [DEFAULT_AGENT_SLUG, *(p.slug for p in agent_profiles_for_user(user=user))]


@require_http_methods(["GET"])
async def models(request):
    """GET /v1/models: the agents this user may pick, `default` first."""
    user = await request_user(request)
    if user is None:
        return _not_signed_in()
    slugs = await request_db(_model_slugs)(user)
    return JsonResponse(shapes.model_list(slugs, created=int(user.date_joined.timestamp())))


def body_limit() -> int:
    """The largest body taken: the messages (Django's DATA_UPLOAD_MAX_MEMORY_SIZE, every other JSON
    body's limit) and one image at the upload limit, as base64."""
    text = settings.DATA_UPLOAD_MAX_MEMORY_SIZE or global_settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return text + 4 * math.ceil(settings.AGENT_MAX_UPLOAD_BYTES / 3)


@dataclass(frozen=True)
class CheckedCall:
    """A request checked, its images decoded: all that is known before anything is created."""

    call: shapes.CompletionRequest
    content: str
    images: dict[str, openai_images.Decoded]


def checked_call(request) -> CheckedCall:
    """Read and check the request; BadRequest, BodyTooLarge, ValueError (not JSON) or ProtocolError
    (the last message refused as a `message` frame's content would be). Decodes: run it in a thread."""
    call = shapes.completion_request(json_body(request, raw=limited_body(request, limit=body_limit())))
    return CheckedCall(call, message_content({"content": call.content}), openai_images.decoded_images(call))


def new_conversation(*, user, checked: CheckedCall) -> tuple[Conversation, dict[str, dict[str, Any]]] | None:
    """The call's conversation with the request's images in its workspace, and the attachment each
    became (by URL); None when the user may not use that agent. BadRequest when the upload service
    refuses an image (the workspace quota): the conversation is deleted again."""
    try:
        agent = agent_chosen(user=user, slug=checked.call.model)
    except LookupError:
        return None
    conversation = conversation_create(
        owner=user, title=first_message_title(checked.content), agent=agent, source=API_SOURCE
    )
    try:
        return conversation, openai_images.stored(conversation_id=conversation.pk, decoded=checked.images)
    except uploads.FileRefused as exc:
        conversation_delete(conversation=conversation)  # its workspace with it
        raise shapes.BadRequest(
            f"The images were refused: {exc.message}.", param="messages", code="image_too_large"
        ) from None


# The calls' conversations made in groups, those asked while a group is made forming the next, one
# trip to a request database thread per group, each made as alone (its own transaction): in a
# burst, each call's was a trip of its own, 4 threads contending for the database (issue 55).
new_conversation_grouped: GroupedCalls[tuple[Conversation, dict[str, dict[str, Any]]] | None] = GroupedCalls(
    new_conversation, request_db, name="v1-conversations"
)


def discard(conversation: Conversation) -> None:
    """A conversation whose run was refused (no run was made) goes again: a refused request leaves
    nothing behind. Best effort: the database may have gone since."""
    try:
        conversation_delete(conversation=conversation)
    except DatabaseError:
        log.warning("could not delete the conversation %s of a refused completion", conversation.pk)


@require_http_methods(["POST"])
async def chat_completions(request):
    """POST /v1/chat/completions: run the agent on a new conversation; the answer whole or streamed.
    A bearer token (no CSRF) or a session (with CSRF, as every unsafe route)."""
    user = await request_user(request)
    if user is None:
        return _not_signed_in()
    try:
        checked = await read_off_the_loop(request, checked_call, request)
    except BodyTooLarge as exc:
        message = (
            f"The request is larger than {exc.limit} bytes: its messages and at most one image at the "
            "upload limit (as base64) fit."
        )
        return shapes.openai_error(413, "request_too_large", message)
    except ValueError:
        return shapes.openai_error(400, "invalid_json", "The body must be a JSON object.")
    except shapes.BadRequest as exc:
        return exc.response()
    except ProtocolError as exc:
        return _refused(exc, param="messages")
    call = checked.call
    token = getattr(request, "api_token", None)
    try:
        made = await new_conversation_grouped(user=user, checked=checked)
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
            after=0,
            until_complete=True,
            new=True,
            # A streamed answer whose client falls too far behind ends (SLOW_CONSUMER below);
            # a whole one is read here at the run's pace and sent at once.
            scope=request.scope if call.stream else None,
        )
        frames = stream.frames()
        try:
            asked = StartRun(
                conversation,
                user,
                checked.content,
                attachments=openai_images.attachments_of(call.images, attached),
                history=openai_images.recorded_history(call.history, attached),
                options=call.options,
                first=True,  # its conversation was made for it
                api_token_id=token.pk if token is not None else None,
            )
            run = await started(frames, asked)
        except ProtocolError:
            await request_db(discard)(conversation)
            raise
    except shapes.BadRequest as exc:
        return exc.response()
    except ProtocolError as exc:
        return _refused(exc)
    except DatabaseError:
        return shapes.openai_error(503, "service_unavailable", "The server cannot reach its database.")
    completion_id, created = f"chatcmpl-{run.pk.hex}", shapes.now()
    outcome = shapes.RunOutcome(str(run.pk))
    if call.stream:
        chunks = _chunks(stream, frames, outcome, call, completion_id=completion_id, created=created)
        response = StreamingHttpResponse(chunks, content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
    else:
        await _follow(frames, outcome)
        failure = ENDED.get(stream.ended_by or "") or outcome.failure()
        if failure is not None and failure[1] == "insufficient_quota":
            response = shapes.quota_refusal(failure[2], outcome.retry_after)
        elif failure is not None:
            response = shapes.openai_error(*failure)
        else:
            response = JsonResponse(
                shapes.completion(outcome, completion_id=completion_id, model=call.model, created=created)
            )
    response["X-Agentsite-Conversation"] = str(conversation.pk)
    response["X-Agentsite-Run"] = str(run.pk)
    return response


async def started(frames: AsyncIterator[dict[str, Any] | bytes], asked: StartRun) -> Run:
    """The run started once the stream of its new conversation has joined (its first step), so
    that every event of the run reaches the stream live, none read back from the database. A
    refused start, or any failure, leaves the stream's groups at once."""
    try:
        await anext(frames)  # the sync: nothing stored yet
        run, _ = await engine.start(asked)
        return run
    except BaseException:
        await frames.aclose()
        raise


async def _follow(frames: AsyncIterator[dict[str, Any] | bytes], outcome: shapes.RunOutcome) -> None:
    """Read the run to its `complete` (or to the stream's end: Stream.ended_by)."""
    try:
        async for frame in frames:
            if not isinstance(frame, bytes):
                outcome.add(frame)
    finally:
        await frames.aclose()


async def _chunks(
    stream: Stream,
    frames: AsyncIterator[dict[str, Any] | bytes],
    outcome: shapes.RunOutcome,
    call: shapes.CompletionRequest,
    *,
    completion_id: str,
    created: int,
) -> AsyncIterator[bytes]:
    """The streamed answer: the role, each text and thinking delta as it is stored, the finish
    chunk, the usage chunk when asked, [DONE]; a failed run ends with an error event instead, and
    a call the server ended (ENDED) with an error event, then [DONE]."""

    def piece(**fields) -> bytes:
        return shapes.chunk(completion_id=completion_id, model=call.model, created=created, **fields)

    try:
        yield piece(delta={"role": "assistant", "content": ""})
        async for frame in frames:
            if isinstance(frame, bytes):
                yield KEEPALIVE  # a comment line: OpenAI clients skip it
                continue
            if stream.behind:  # nothing more is queued behind what the client has not read
                break
            outcome.add(frame)
            if frame.get("runId") != outcome.run_id:
                continue
            if frame["type"] == "text":
                yield piece(delta={"content": frame["content"]})
            elif frame["type"] == "thinking":
                yield piece(delta={"reasoning_content": frame["content"]})
    finally:
        await frames.aclose()
    ended = ENDED.get(stream.ended_by or "")
    if stream.behind:
        ended = (
            408,
            "slow_consumer",
            f"The client fell too far behind the answer and was given up on; the run goes on and is "
            f"stored: read it from /api/conversations/{stream.conversation.pk}/events/.",
        )
    if ended is not None:
        yield shapes.error_chunk(*ended)
        yield shapes.DONE
        return
    failure = outcome.failure()
    if failure is not None:
        yield shapes.error_chunk(*failure)
        return
    yield piece(finish_reason=outcome.finish_reason)
    if call.include_usage:
        yield piece(usage=shapes.usage_of(outcome.complete))
    yield shapes.DONE


def _refused(exc: ProtocolError, *, param: str | None = None) -> JsonResponse:
    """A refused start in OpenAI's shape: a budget's as insufficient_quota, not retried."""
    if exc.code == "QUOTA_EXCEEDED":
        return shapes.quota_refusal(exc.message, exc.extra.get("retryAfter", 1))
    status, code = shapes.START_REFUSALS.get(exc.code, (400, "invalid_request"))
    return shapes.openai_error(status, code, exc.message, param=param)
