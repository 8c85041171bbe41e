"""`Authorization: Bearer <token>` (chat.accounts.tokens) for programs: over HTTP on `/api/`, `/v1/` and
`/a2a/` only, where it replaces the session and CSRF (a script has no cookie to protect), and on
the WebSocket handshake. A token never opens the admin, the inspector or a page: there the header
is ignored and only a session signs in."""

from __future__ import annotations

from django.http import JsonResponse

from chat.accounts.token_checks import token_check_batched
from chat.accounts.token_lockout import TokenCheck, token_check
from serving.loop_middleware import DualMiddleware
from serving.proxy import client_address, socket_client_address

BEARER_PATHS = ("/api/", "/v1/", "/a2a/")
# Where refusals take OpenAI's error shape (docs/protocol.md, "OpenAI-compatible endpoint").
OPENAI_PATHS = ("/v1/",)
# There: (OpenAI's error type, code) by status.
OPENAI_REFUSALS = {401: ("authentication_error", "invalid_api_key"), 429: ("rate_limit_error", "rate_limit_exceeded")}


def bearer_value(header: str) -> str | None:
    """The token of an `Authorization: Bearer <token>` header; None for any other header."""
    scheme, _, value = header.strip().partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


def _refusal(status: int, code: str, message: str, *, openai: bool = False) -> JsonResponse:
    if openai:
        kind, openai_code = OPENAI_REFUSALS[status]
        body = {"error": {"message": message, "type": kind, "param": None, "code": openai_code}}
    else:
        body = {"error": code, "message": message}
    response = JsonResponse(body, status=status)
    response["WWW-Authenticate"] = 'Bearer error="invalid_token"' if status == 401 else "Bearer"
    return response


class BearerTokenMiddleware(DualMiddleware):
    """After AuthenticationMiddleware: a request to `/api/` with a bearer token is its token's
    user's, whatever session cookie it also carries, and skips the CSRF check. On the loop the
    look-up (the failure count and the token's row) goes with the other requests' checks of the
    moment, one trip to a request database thread for all (chat.accounts.token_checks)."""

    def call_sync(self, request):
        value = _presented(request)
        if value is not None and (refusal := _sign_in(request, token_check(value, client_address(request) or ""))):
            return refusal
        return self.get_response(request)

    async def call_async(self, request):
        value = _presented(request)
        if value is not None:
            check = await token_check_batched(value, client_address(request) or "")
            if refusal := _sign_in(request, check):
                return refusal
        return await self.get_response(request)


def _presented(request) -> str | None:
    """The bearer token of a request where one is taken."""
    value = bearer_value(request.META.get("HTTP_AUTHORIZATION", ""))
    return value if value is not None and request.path.startswith(BEARER_PATHS) else None


def _sign_in(request, check: TokenCheck) -> JsonResponse | None:
    """The request signed in as the checked token's user; the refusal when the token does not hold."""
    openai = request.path.startswith(OPENAI_PATHS)
    if check.locked:
        return _refusal(429, "rate_limited", "Too many failed token attempts; try again later.", openai=openai)
    if check.user is None:
        return _refusal(401, "not_authenticated", "The API token is unknown, revoked or expired.", openai=openai)
    request.user = request._cached_user = check.user
    request.api_token = check.token
    request._dont_enforce_csrf_checks = True
    return None


def socket_bearer(scope) -> str | None:
    """The bearer token a WebSocket handshake presents, if any."""
    headers = dict(scope.get("headers") or [])
    return bearer_value(headers.get(b"authorization", b"").decode("latin-1"))


def socket_token_user(scope, value: str):
    """(user, token) of a handshake's bearer token; (None, None) for a bad one, counted as a
    failed attempt as over HTTP (chat.doors.socket.credentials signs sockets in)."""
    check = token_check(value, socket_client_address(scope))
    return check.user, check.token
