"""Runs over HTTP (docs/protocol.md, "Runs over HTTP"): a program posts a message, cancels a
run or answers an approval request as the WebSocket's frames do, through the same functions
(chat.runs.engine: one start path, the same limits, quotas, agents and codes).

Async views: the run registry lives on the server's event loop. Refusals carry the frame's
code as `{"error": {"code", "message"}}` with the HTTP status of ERROR_STATUS (chat.doors.http.run_answers). Owner-only:
another user's conversation or run answers 404 like a missing one.
"""

from __future__ import annotations

import uuid
from functools import wraps

from django.db import DatabaseError
from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_http_methods

from chat.conversations.selectors import run_for_user
from chat.doors.http.json_api import json_body
from chat.doors.http.lookups import conversation_owned_grouped
from chat.doors.http.run_answers import request_user, run_error
from chat.eventlog.reads import run_asked
from chat.models import Run
from chat.runs import engine
from chat.runs.client_frames import ProtocolError, already_answered
from chat.runs.queue import Queued, Steered, queue_rows
from chat.runs.requests import Unqueue, approve_request, cancel_request, compact_request, start_request
from serving.loop_middleware import request_db


def _answering_refusals(view):
    """A run view whose refusals (ProtocolError, a database that does not answer) become the
    error answer with its HTTP status."""

    @wraps(view)
    async def answered(request, *args, **kwargs):
        try:
            return await view(request, *args, **kwargs)
        except ProtocolError as exc:
            return run_error(exc.code, exc.message, exc.detail, exc.extra)
        except DatabaseError:
            exc = engine.database_unavailable()
            return run_error(exc.code, exc.message, exc.detail)

    return answered


async def _signed_in(request):
    user = await request_user(request)
    if user is None:
        raise ProtocolError("NOT_AUTHENTICATED", "Sign in first.")
    return user


async def _owned_conversation(request, conversation_id):
    """The signed-in user and their conversation; another user's answers as a missing one."""
    user = await _signed_in(request)
    conversation = await conversation_owned_grouped(user=user, conversation_id=conversation_id)
    if conversation is None:
        raise ProtocolError("NOT_FOUND", "No such conversation.")
    return user, conversation


def _body(request) -> dict:
    try:
        return json_body(request)
    except ValueError as exc:
        raise ProtocolError("BAD_REQUEST", "The body must be a JSON object.", str(exc)) from None


@require_http_methods(["POST"])
@_answering_refusals
async def conversation_messages(request, conversation_id: uuid.UUID):
    """The body of a `message` frame (`content`, `parentSeq`?, `attachments`?, `whileRunning`?) →
    202 {"status": "started", runId, seq}, {"status": "queued", queueId, seq} or {"status":
    "steered", queueId, runId, seq}."""
    user, conversation = await _owned_conversation(request, conversation_id)
    frame = _body(request)
    token = getattr(request, "api_token", None)
    asked = await start_request(
        "message",
        frame,
        conversation=conversation,
        user=user,
        first=conversation.last_seq == 0,  # last_seq: read with the request
        api_token_id=token.pk if token is not None else None,
    )
    sent = await engine.send(asked)
    if isinstance(sent, Queued):
        return JsonResponse({"status": "queued", "queueId": sent.queue_id, "seq": sent.seq}, status=202)
    if isinstance(sent, Steered):
        answer = {"status": "steered", "queueId": sent.queue_id, "runId": sent.run_id, "seq": sent.seq}
        return JsonResponse(answer, status=202)
    run, seq = sent
    return JsonResponse({"status": "started", "runId": str(run.pk), "seq": seq}, status=202)


def _cancel_body(request) -> dict:
    """A cancel's optional body: JSON (sent as such, or looking like an object); anything else,
    such as the empty form a program's bare POST carries, is no body, as before clearQueue."""
    if request.content_type == "application/json" or request.body.lstrip().startswith(b"{"):
        return _body(request)
    return {}


@require_http_methods(["POST"])
@_answering_refusals
async def conversation_cancel(request, conversation_id: uuid.UUID):
    """Cancel the conversation's run (`{"clearQueue": true}`?: withdraw the waiting messages
    first) → 202 {"cancelled": whether a run was in progress, "cleared": how many were withdrawn}."""
    user, conversation = await _owned_conversation(request, conversation_id)
    cancelled, cleared = await engine.cancel_clearing(
        cancel_request(_cancel_body(request), conversation_id=conversation.pk)
    )
    return JsonResponse({"cancelled": cancelled, "cleared": cleared}, status=202)


@require_http_methods(["POST"])
@_answering_refusals
async def conversation_compact(request, conversation_id: uuid.UUID):
    """A compaction run of the branch ending at the user_message `seq`? (docs/protocol.md,
    "Compaction") → 202 {"runId"}; NOTHING_TO_COMPACT 409, BAD_REQUEST 400 for another seq."""
    user, conversation = await _owned_conversation(request, conversation_id)
    token = getattr(request, "api_token", None)
    frame = _cancel_body(request)  # an empty body: the newest message's branch
    asked = compact_request(frame, conversation=conversation, user=user, api_token_id=token.pk if token else None)
    run, _ = await engine.start(asked)
    return JsonResponse({"runId": str(run.pk)}, status=202)


@require_http_methods(["GET"])
@_answering_refusals
async def conversation_queue(request, conversation_id: uuid.UUID):
    """The waiting messages in start order and the pending steers in arrival order → {"queue":
    [...], "steers": [...]}."""
    user, conversation = await _owned_conversation(request, conversation_id)
    waiting, steers = await request_db(queue_rows)(conversation_id=conversation.pk)
    return JsonResponse(
        {
            "queue": [
                {
                    "queueId": str(row.pk),
                    "content": row.content,
                    "attachments": row.attachments,
                    "steered": row.steered,
                    "createdAt": _time(row.created_at),
                }
                for row in waiting
            ],
            "steers": [
                {
                    "queueId": str(row.pk),
                    "content": row.content,
                    "runId": str(row.steer_run_id),
                    "createdAt": _time(row.created_at),
                }
                for row in steers
            ],
        }
    )


def _time(moment) -> str:
    return moment.isoformat().replace("+00:00", "Z")


@require_http_methods(["DELETE"])
@_answering_refusals
async def conversation_unqueue(request, conversation_id: uuid.UUID, queue_id: str):
    """Withdraw a waiting message → 204; 404 NOT_QUEUED as the `unqueue` frame."""
    user, conversation = await _owned_conversation(request, conversation_id)
    await engine.unqueue(Unqueue(conversation.pk, queue_id))
    return HttpResponse(status=204)


@require_http_methods(["POST"])
@_answering_refusals
async def run_approval(request, run_id: uuid.UUID):
    """`{"toolCallId", "decision", "reason"?}`, the `approve` frame's checks → 202."""
    user = await _signed_in(request)
    run = await request_db(run_for_user)(user=user, run_id=run_id)
    if run is None:
        raise ProtocolError("NOT_FOUND", "No such run.")
    answer = approve_request(_body(request), conversation_id=run.conversation_id, reply_to=None)
    # The socket answers by conversation; this route names the run, so the request must be
    # that run's, and only the running run (one per conversation) still waits on one.
    if not await request_db(run_asked)(run_id=run.pk, tool_call_id=answer.tool_call_id):
        raise ProtocolError(
            "BAD_REQUEST", "This run has no approval request with that toolCallId.", "unknown toolCallId"
        )
    if run.status != Run.Status.RUNNING:
        raise already_answered()
    await engine.approve(answer)
    return JsonResponse({"toolCallId": answer.tool_call_id, "decision": answer.decision.decision}, status=202)
