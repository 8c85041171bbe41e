"""The project's layer in front of the SDK's Streamable HTTP transport at /mcp (docs/protocol.md,
"MCP server"): whether /mcp is served, the host and `Origin` checks, the bearer token (401 before
anything else is read), the handshake era's sessions, `DELETE`, and `notifications/cancelled`.

Why the SDK's managers run stateless: StreamableHTTPSessionManager in its stateful mode keeps each
session (its transport, its server task, the credential that opened it) in one process's memory,
so a request of the session that reaches another server process answers 404. The contract wants
any process to serve any request of a session. Here each request is served by the SDK's
stateless mode (a fresh transport and server per request), and what the protocol needs to outlive
one request lives in the database (chat.doors.mcp_server.sessions): the session id, its token and
user, found by any process; the run each tools/call started, so that the client's
`notifications/cancelled` (which names a request id, which the stateless SDK cannot resolve: that
request lives in another transport, maybe another process) cancels the run through the front
door. `initialize` is answered by the SDK (its version negotiation, serverInfo, capabilities); the
gate adds the `Mcp-Session-Id` it stored. The 2026-07-28 era has no session: its requests go to
the SDK untouched but for the token."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import anyio
import mcp_types as types
from django.conf import settings
from django.db import DatabaseError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.responses import JSONResponse, Response

from chat.accounts.bearer import bearer_value
from chat.accounts.token_checks import token_check_batched
from chat.doors.http.origins import host_allowed, origin_allowed
from chat.doors.mcp_server import sessions
from chat.doors.mcp_server.calls import CALLER, NO_RESULT, Caller
from chat.doors.mcp_server.server import MAX_BODY, managers
from chat.runs import engine
from chat.runs.requests import CancelRun
from serving.loop_middleware import request_db
from serving.proxy import socket_client_address

logger = logging.getLogger(__name__)

SESSION_HEADER = b"mcp-session-id"
VERSION_HEADER = b"mcp-protocol-version"


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _refusal(status: int, code: str, message: str) -> Response:
    response = JSONResponse({"error": code, "message": message}, status_code=status)
    if status == 401:
        response.headers["WWW-Authenticate"] = "Bearer"
    return response


def _rpc_error(status: int, code: int, message: str, request_id: Any = None) -> Response:
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}, status)


async def _body(receive) -> tuple[bytes | None, list[dict]]:
    """The request's body (None past MAX_BODY) and the messages read after it (a disconnect)."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(body), [message]
        body += message.get("body", b"")
        if len(body) > MAX_BODY:
            return None, []
        if not message.get("more_body", False):
            return bytes(body), []


def _replayed(body: bytes, after: list[dict], receive):
    pending = [{"type": "http.request", "body": body, "more_body": False}, *after]

    async def replay():
        return pending.pop(0) if pending else await receive()

    return replay


def _with_session_header(send, value: str):
    """The SDK's answer to `initialize`, carrying the session's id when it succeeded."""

    async def sending(message):
        if message["type"] == "http.response.start" and message["status"] == 200:
            message = {**message, "headers": [*message.get("headers", []), (SESSION_HEADER, value.encode())]}
        await send(message)

    return sending


def _without_cancelled_result(scope, send):
    """The SDK's answer to a tools/call, with no result when its client cancelled it (calls.NO_RESULT):
    the event stream ends without it, a JSON answer becomes an empty 202."""
    held: list[dict] = []
    ended = False

    async def sending(message):
        nonlocal ended
        if ended:  # what the SDK still writes after the answer was ended here
            return
        if message["type"] == "http.response.start":
            if dict(message.get("headers", [])).get(b"content-type", b"").startswith(b"application/json"):
                held.append(message)  # sent with its body, once it is known whether to send it
                return
        elif message["type"] == "http.response.body" and scope.get(NO_RESULT):
            if held:
                held.clear()
                await send({"type": "http.response.start", "status": 202, "headers": []})
            ended = True
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        if held:
            await send(held.pop())
        await send(message)

    return sending


class McpGate:
    """The ASGI application of /mcp."""

    async def __call__(self, scope, receive, send) -> None:
        answer = await self._refusal(scope)
        if answer is not None:
            await answer(scope, receive, send)
            return
        try:
            await self._serve(scope, receive, send)
        except DatabaseError:
            await _refusal(503, "unavailable", "The server cannot reach its database.")(scope, receive, send)

    async def _refusal(self, scope) -> Response | None:
        if not settings.AGENT_MCP_SERVER:
            return _refusal(404, "not_found", "The MCP server is off on this server.")
        if not host_allowed(scope):
            return _refusal(400, "bad_request", "The Host header names no host of this server.")
        if _header(scope, b"origin") is not None and not origin_allowed(scope):
            return _refusal(403, "forbidden", "Requests from this Origin are refused.")
        return None

    async def _serve(self, scope, receive, send) -> None:
        value = bearer_value(_header(scope, b"authorization") or "")
        check = await token_check_batched(value, socket_client_address(scope)) if value else None
        if check is not None and check.locked:
            await _refusal(429, "rate_limited", "Too many failed token attempts; try again later.")(
                scope, receive, send
            )
            return
        if check is None or check.user is None:
            message = "Give a personal API token: Authorization: Bearer as_..."
            await _refusal(401, "not_authenticated", message)(scope, receive, send)
            return
        method = scope["method"]
        if method not in ("POST", "DELETE"):
            await Response(status_code=405, headers={"Allow": "POST, DELETE"})(scope, receive, send)
            return
        era = _header(scope, VERSION_HEADER)
        if era is not None and era not in HANDSHAKE_PROTOCOL_VERSIONS:  # 2026-07-28: no session
            scope[CALLER] = Caller(check.user, check.token, None)
            await (await managers()).events.handle_request(scope, receive, send)
            return
        await self._handshake_era(scope, receive, send, check)

    async def _handshake_era(self, scope, receive, send, check) -> None:
        session_value = _header(scope, SESSION_HEADER)
        if scope["method"] == "DELETE":
            if session_value is None:
                await _rpc_error(400, types.INVALID_REQUEST, "Bad Request: Missing session ID")(scope, receive, send)
            elif await request_db(sessions.session_end)(value=session_value, token=check.token):
                await Response(status_code=204)(scope, receive, send)
            else:
                await _rpc_error(404, types.INVALID_REQUEST, "Session not found")(scope, receive, send)
            return
        body, after = await _body(receive)
        if body is None:
            await Response("Request body too large", status_code=413)(scope, receive, send)
            return
        try:
            message = json.loads(body)
        except ValueError:
            message = None  # the SDK answers it (-32700)
        message = message if isinstance(message, dict) else {}
        replay = _replayed(body, after, receive)
        handler = await managers()
        if message.get("method") == "initialize":
            await self._initialize(scope, replay, send, check, message.get("params"), handler)
            return
        if session_value is None:
            await _rpc_error(400, types.INVALID_REQUEST, "Bad Request: Missing session ID")(scope, receive, send)
            return
        session = await request_db(sessions.session_found)(value=session_value, token=check.token)
        if session is None:
            await _rpc_error(404, types.INVALID_REQUEST, "Session not found", message.get("id"))(scope, receive, send)
            return
        if message.get("method") == "notifications/cancelled" and "id" not in message:
            await self._cancel(session, message.get("params"))
            await Response(status_code=202)(scope, receive, send)
            return
        scope[CALLER] = Caller(check.user, check.token, session)
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        progress = isinstance(meta, dict) and meta.get("progressToken") is not None
        manager = handler.events if progress else handler.json
        began = time.monotonic()
        touched = False
        answer = _without_cancelled_result(scope, send)

        async def touching(reply) -> None:
            # A long request marks its session used before its answer's end goes out: the
            # client's next request, sent once it has the answer, must not find the session
            # idle (touched after the answer, a loaded server lost that race: "Session not found").
            nonlocal touched
            last = reply["type"] == "http.response.body" and not reply.get("more_body", False)
            if last and not touched and sessions.touch_due(time.monotonic() - began):
                touched = True
                with anyio.CancelScope(shield=True):
                    await self._touch(session)
            await answer(reply)

        try:
            await manager.handle_request(scope, replay, touching)
        finally:
            if not touched and sessions.touch_due(time.monotonic() - began):  # its answer never ended
                with anyio.CancelScope(shield=True):
                    await self._touch(session)

    async def _initialize(self, scope, replay, send, check, params: Any, handler) -> None:
        """The SDK answers `initialize` (its version, serverInfo, capabilities); a session is opened
        for it, its id sent with a successful answer and forgotten again after any other."""
        asked = params.get("protocolVersion") if isinstance(params, dict) else None
        version = asked if asked in HANDSHAKE_PROTOCOL_VERSIONS else HANDSHAKE_PROTOCOL_VERSIONS[-1]
        opened = await request_db(sessions.session_open)(token=check.token, protocol_version=version)
        scope[CALLER] = Caller(check.user, check.token, sessions.digest_of(opened))
        status = {}
        with_header = _with_session_header(send, opened)

        async def sending(reply):
            if reply["type"] == "http.response.start":
                status["code"] = reply["status"]
            await with_header(reply)

        await handler.json.handle_request(scope, replay, sending)
        if status.get("code") != 200:
            await request_db(sessions.session_forget)(value=opened)

    async def _touch(self, session: str) -> None:
        """Mark the session used at the end of a long request (its answer is sent: a failure here
        has no one to tell, and the session is touched again by its next request)."""
        try:
            await request_db(sessions.session_touch)(session=session)
        except DatabaseError:
            logger.warning("could not mark an MCP session used", exc_info=True)

    async def _cancel(self, session: str, params: Any) -> None:
        """The client's `notifications/cancelled` {"requestId"}: the run of that call of the session
        is cancelled as the `cancel` frame cancels it, whichever process runs it."""
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if request_id is None:
            return
        run = await request_db(sessions.call_cancel)(session=session, request_id=request_id)
        if run is not None:
            await engine.cancel(CancelRun(run.conversation_id))
