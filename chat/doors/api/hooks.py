"""`POST /hooks/<id>/` (docs/protocol.md, "Triggers"): a door taking no session, CSRF or API
token, authenticated by the trigger's secret. It reads the call, builds one StartRun and calls
the front door (chat.scheduling.hooks.trigger_fire); refusals in the shape of "Runs over HTTP"."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError
from django.http import HttpResponseNotAllowed, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from chat.accounts.token_lockout import address_failed, address_locked
from chat.doors.http.run_answers import run_error
from chat.runs import engine
from chat.runs.client_frames import ProtocolError
from chat.scheduling.hooks import (
    hook_authenticated,
    hook_trigger,
    payload_text,
    prompt_filled,
    rate_limited,
    trigger_fire,
)
from serving.loop_middleware import request_db
from serving.proxy import client_address


def _not_authenticated():
    response = run_error("NOT_AUTHENTICATED", "Give the trigger's secret (Authorization: Bearer, or a signature).")
    response["WWW-Authenticate"] = "Bearer"
    return response


@csrf_exempt
async def hook(request, trigger_id: uuid.UUID):
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    try:
        return await _call(request, trigger_id)
    except ProtocolError as exc:
        return run_error(exc.code, exc.message, exc.detail, exc.extra)
    except DatabaseError:
        exc = engine.database_unavailable()
        return run_error(exc.code, exc.message, exc.detail)


async def _call(request, trigger_id: uuid.UUID):
    trigger = await request_db(hook_trigger)(trigger_id)
    if trigger is None:
        return run_error("NOT_FOUND", "No such trigger.")
    address = client_address(request) or ""
    if await request_db(address_locked)(address):
        return run_error("RATE_LIMITED", "Too many failed attempts from this address; try again later.")
    cap = 4 * settings.AGENT_MAX_MESSAGE_CHARS
    try:
        body = request.body
    except RequestDataTooBig:
        return run_error("TOO_LARGE", f"The body is over {cap} bytes.")
    held = hook_authenticated(
        trigger,
        authorization=request.headers.get("Authorization", ""),
        signature=request.headers.get("X-Agentsite-Signature", ""),
        body=body,
    )
    if not held:
        await request_db(address_failed)(address)
        return _not_authenticated()
    if len(body) > cap:
        return run_error("TOO_LARGE", f"The body is over {cap} bytes.")
    try:
        payload = payload_text(body, request.content_type or "")
    except UnicodeDecodeError:
        return run_error("BAD_REQUEST", "The body must be UTF-8 text.")
    prompt = prompt_filled(trigger, payload)
    if len(prompt) > settings.AGENT_MAX_MESSAGE_CHARS:
        return run_error("TOO_LARGE", f"The filled prompt is over {settings.AGENT_MAX_MESSAGE_CHARS} characters.")
    if await request_db(rate_limited)(trigger):
        return run_error("RATE_LIMITED", "This trigger started too many runs in the last minute.")
    run, seq = await trigger_fire(trigger, prompt)
    return JsonResponse({"runId": str(run.pk), "conversationId": str(run.conversation_id), "seq": seq}, status=202)
