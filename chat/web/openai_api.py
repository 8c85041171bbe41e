"""The OpenAI-compatible endpoint (docs/protocol.md, "OpenAI-compatible endpoint"): any OpenAI
client, with a personal API token as its key, lists the agents as models and runs one.

Each completion is a new conversation of the user (Conversation.source "api"), started through
the one start path (chat.realtime.run_actions: the same limits, quotas and agents as the chat
page), its run followed with the conversation stream's follower (chat.web.streams.Stream),
which joins before the run starts: register-then-fetch with nothing yet to fetch, so every
event of the run comes live and none is read back. Async views under daphne: no thread waits
for a run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from django.db import DatabaseError
from django.http import JsonResponse, StreamingHttpResponse
from django.views.decorators.http import require_http_methods

from agentsite.loop_middleware import request_db
from chat.agents.selectors import agent_profile_for_user, agent_profiles_for_user
from chat.conversations.services import conversation_create
from chat.models import API_SOURCE, DEFAULT_AGENT_SLUG, Run
from chat.realtime import run_actions
from chat.realtime.client_frames import ProtocolError, message_content
from chat.web import openai_shapes as shapes
from chat.web.json_api import json_body
from chat.web.runs_api import request_user
from chat.web.streams import KEEPALIVE, Stream


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


def _new_conversation(*, user, slug: str, title: str):
    """The call's conversation, or None when the user may not use that agent."""
    if slug == DEFAULT_AGENT_SLUG:
        agent = None
    else:
        agent = agent_profile_for_user(user=user, slug=slug)
        if agent is None:
            return None
    return conversation_create(owner=user, title=title, agent=agent, source=API_SOURCE)


@require_http_methods(["POST"])
async def chat_completions(request):
    """POST /v1/chat/completions: run the agent on a new conversation; the answer whole or streamed.
    A bearer token (no CSRF) or a session (with CSRF, as every unsafe route)."""
    user = await request_user(request)
    if user is None:
        return _not_signed_in()
    try:
        call = shapes.completion_request(json_body(request))
        content = message_content({"content": call.content})
    except ValueError:
        return shapes.openai_error(400, "invalid_json", "The body must be a JSON object.")
    except shapes.BadRequest as exc:
        return exc.response()
    except ProtocolError as exc:
        status, code = shapes.START_REFUSALS.get(exc.code, (400, "invalid_request"))
        return shapes.openai_error(status, code, exc.message, param="messages")
    token = getattr(request, "api_token", None)
    try:
        conversation = await request_db(_new_conversation)(user=user, slug=call.model, title=content)
        if conversation is None:
            return shapes.openai_error(
                404, "model_not_found", f"The model {call.model!r} does not exist or you do not have access to it."
            )
        stream = Stream(
            conversation=conversation,
            user=user,
            token_id=token.pk if token is not None else None,
            session_key=request.session.session_key if token is None else None,
            after=0,
            until_complete=True,
            new=True,
        )
        frames = stream.frames()
        run = await _started(
            frames, conversation=conversation, user=user, content=content, history=call.history, options=call.options
        )
    except ProtocolError as exc:
        status, code = shapes.START_REFUSALS.get(exc.code, (400, "invalid_request"))
        return shapes.openai_error(status, code, exc.message)
    except DatabaseError:
        return shapes.openai_error(503, "service_unavailable", "The server cannot reach its database.")
    completion_id, created = f"chatcmpl-{run.pk.hex}", shapes.now()
    outcome = shapes.RunOutcome(str(run.pk))
    if call.stream:
        chunks = _chunks(frames, outcome, call, completion_id=completion_id, created=created)
        response = StreamingHttpResponse(chunks, content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
    else:
        await _follow(frames, outcome)
        failure = outcome.failure()
        if failure is not None:
            response = shapes.openai_error(*failure)
        else:
            response = JsonResponse(
                shapes.completion(outcome, completion_id=completion_id, model=call.model, created=created)
            )
    response["X-Agentsite-Conversation"] = str(conversation.pk)
    response["X-Agentsite-Run"] = str(run.pk)
    return response


async def _started(frames: AsyncIterator[dict[str, Any] | bytes], **start) -> Run:
    """The run started once the stream of its new conversation has joined (its first step), so
    that every event of the run reaches the stream live, none read back from the database. A
    refused start, or any failure, leaves the stream's groups at once."""
    try:
        await anext(frames)  # the sync: nothing stored yet
        run, _ = await run_actions.run_start(**start)
        return run
    except BaseException:
        await frames.aclose()
        raise


async def _follow(frames: AsyncIterator[dict[str, Any] | bytes], outcome: shapes.RunOutcome) -> None:
    """Read the run to its `complete` (or to the stream's end: the token was revoked)."""
    try:
        async for frame in frames:
            if not isinstance(frame, bytes):
                outcome.add(frame)
    finally:
        await frames.aclose()


async def _chunks(
    frames: AsyncIterator[dict[str, Any] | bytes],
    outcome: shapes.RunOutcome,
    call: shapes.CompletionRequest,
    *,
    completion_id: str,
    created: int,
) -> AsyncIterator[bytes]:
    """The streamed answer: the role, each text and thinking delta as it is stored, the finish
    chunk, the usage chunk when asked, [DONE]; a failed run ends with an error event instead."""

    def piece(**fields) -> bytes:
        return shapes.chunk(completion_id=completion_id, model=call.model, created=created, **fields)

    try:
        yield piece(delta={"role": "assistant", "content": ""})
        async for frame in frames:
            if isinstance(frame, bytes):
                yield KEEPALIVE  # a comment line: OpenAI clients skip it
                continue
            outcome.add(frame)
            if frame.get("runId") != outcome.run_id:
                continue
            if frame["type"] == "text":
                yield piece(delta={"content": frame["content"]})
            elif frame["type"] == "thinking":
                yield piece(delta={"reasoning_content": frame["content"]})
    finally:
        await frames.aclose()
    failure = outcome.failure()
    if failure is not None:
        yield shapes.error_chunk(*failure)
        return
    yield piece(finish_reason=outcome.finish_reason)
    if call.include_usage:
        yield piece(usage=shapes.usage_of(outcome.complete))
    yield shapes.DONE
