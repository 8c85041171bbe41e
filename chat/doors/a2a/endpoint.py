"""`POST /a2a/<slug>/` (docs/protocol.md, "A2A agent"): a bearer token's JSON-RPC call to one
agent. The token and the agent are checked here, before anything else is read; the call is then
parsed, version-checked and routed by the SDK's own JSON-RPC dispatcher to the project's handler
(chat.doors.a2a.handler), whose answers are written back as Django responses: JSON, or for the
streaming methods server-sent events with a comment line every KEEPALIVE_SECONDS. Session cookies
are never read here, so no CSRF token is asked for."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.jsonrpc_models import InternalError, JSONRPCError
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.server.routes.common import ServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.utils import json_utils
from a2a.utils.errors import A2AError
from django.conf import global_settings, settings
from django.http import HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from chat import nesting
from chat.accounts import sockets
from chat.agent.batching import GroupedCalls
from chat.agents.selectors import agent_chosen
from chat.doors.a2a.cards import not_served, origin_of
from chat.doors.a2a.following import Door
from chat.doors.a2a.handler import RunsRequestHandler
from chat.doors.http.json_api import BodyTooLarge, limited_body, read_off_the_loop
from chat.doors.http.run_answers import request_user
from chat.doors.http.seated import SeatedResponse
from chat.realtime.follow import KEEPALIVE, KEEPALIVE_SECONDS
from serving.loop_middleware import request_db

log = logging.getLogger(__name__)

STREAMING = frozenset({"SendStreamingMessage", "SubscribeToTask"})


class Call:
    """What the SDK's dispatcher reads of a request (it would take a Starlette Request): the JSON
    body, and for the context, the request's headers and the Door."""

    def __init__(self, raw: bytes, door: Door, headers: dict[str, str]):
        self.raw, self.door, self.headers = raw, door, headers
        self.seat: sockets.Seat | None = None

    async def json(self) -> Any:
        try:
            return nesting.loads(self.raw)
        except ValueError as exc:  # not JSON, or nested too deeply: -32700
            raise json.JSONDecodeError(str(exc), "", 0) from None


class DoorContext(ServerCallContextBuilder):
    def build(self, request) -> ServerCallContext:
        # The SDK's version check reads `A2A-Version` from state["headers"].
        return ServerCallContext(state={"headers": request.headers, "door": request.door, "call": request})


class DjangoDispatcher(JsonRpcDispatcher):
    """The SDK's dispatcher answering with Django responses (its own are Starlette's)."""

    def _generate_error_response(self, request_id, error) -> JsonResponse:  # type: ignore[override]
        if not isinstance(error, A2AError | JSONRPCError):
            error = InternalError(message=str(error))
        return JsonResponse(build_error_response(request_id, error))

    def _create_response(self, context: ServerCallContext, handler_result) -> HttpResponse:  # type: ignore[override]
        if not isinstance(handler_result, AsyncGenerator):
            return JsonResponse(handler_result, safe=False)
        seat = context.state["call"].seat
        response = SeatedResponse(_sse(handler_result, context), seat, content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response


async def _sse(items: AsyncGenerator[dict[str, Any]], context: ServerCallContext) -> AsyncIterator[bytes]:
    """Each JSON-RPC response as one event's data, a comment line whenever KEEPALIVE_SECONDS pass
    without one; an error the handler raises midway is the stream's last event."""
    pending: asyncio.Future | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(items))
            done, _ = await asyncio.wait((pending,), timeout=KEEPALIVE_SECONDS)
            if not done:
                yield KEEPALIVE
                continue
            try:
                item = pending.result()
            except StopAsyncIteration:
                pending = None
                return
            except Exception as exc:  # noqa: BLE001 - the client is told, as the SDK's own stream does
                log.exception("an A2A stream failed")
                pending = None
                failure = exc if isinstance(exc, A2AError) else InternalError(message=str(exc))
                yield _event(build_error_response(context.state.get("request_id"), failure), error=True)
                return
            pending = None
            yield _event(item, error="error" in item)
    finally:
        if pending is not None:  # the client went: the step under way ends before the stream closes
            pending.cancel()
            await asyncio.wait((pending,))
        await items.aclose()


def _event(item: dict[str, Any], *, error: bool) -> bytes:
    head = b"event: error\n" if error else b""
    return head + b"data: " + json_utils.dumps(item).encode() + b"\n\n"


DISPATCHER = DjangoDispatcher(RunsRequestHandler(), context_builder=DoorContext())


def _refusal(status: int, code: str, message: str) -> JsonResponse:
    response = JsonResponse({"error": code, "message": message}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = "Bearer"
    return response


def _agent(*, user, slug: str) -> tuple[bool, Any]:
    try:
        return True, agent_chosen(user=user, slug=slug)
    except LookupError:
        return False, None


# The requests' agents looked up in groups, one trip per group (issue 55).
_agent_grouped = GroupedCalls(_agent, request_db, name="a2a-agents")


def _method(raw: bytes) -> str | None:
    try:
        body = nesting.loads(raw)
    except ValueError:
        return None
    return body.get("method") if isinstance(body, dict) else None


def _body_limit() -> int:
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE or global_settings.DATA_UPLOAD_MAX_MEMORY_SIZE


@csrf_exempt
@require_http_methods(["POST"])
async def endpoint(request, slug: str):
    """POST /a2a/<slug>/."""
    if not settings.AGENT_A2A:
        return not_served()
    token = getattr(request, "api_token", None)
    user = await request_user(request) if token is not None else None
    if user is None:
        return _refusal(401, "not_authenticated", "Give a personal API token: Authorization: Bearer as_...")
    found, profile = await _agent_grouped(user=user, slug=slug)
    if not found:
        return _refusal(404, "not_found", "No such agent.")
    try:
        raw = await read_off_the_loop(request, limited_body, request, limit=_body_limit())
    except BodyTooLarge as exc:
        return _refusal(413, "too_large", f"The request is larger than {exc.limit} bytes.")
    door = Door(
        user=user, token_id=token.pk, profile=profile, slug=slug, origin=origin_of(request), scope=request.scope
    )
    call = Call(raw, door, {name.lower(): value for name, value in request.headers.items()})
    if _method(raw) in STREAMING:
        call.seat = sockets.take(user.pk, sockets.STREAM)
        if call.seat is None:
            return _refusal(429, "rate_limited", "Too many open streams and sockets; close one first.")
    response = None
    try:
        response = await DISPATCHER.handle_requests(call)  # type: ignore[arg-type]
        return response
    finally:
        if call.seat is not None and not isinstance(response, SeatedResponse):
            call.seat.release()  # answered without a stream
