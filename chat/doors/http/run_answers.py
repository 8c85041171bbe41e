"""The answers of the run endpoints over HTTP (docs/protocol.md, "Runs over HTTP"), which the SSE
stream and the OpenAI-compatible door give too: a refusal as `{"error": {"code", "message"}}`
with the frame code's HTTP status, and the signed-in user of an async view."""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse

# The frame codes (docs/protocol.md, "Client frames") as HTTP statuses.
ERROR_STATUS = {
    "BAD_REQUEST": 400,
    "NOT_AUTHENTICATED": 401,
    "NOT_FOUND": 404,
    "NOT_QUEUED": 404,
    "RUN_IN_PROGRESS": 409,
    "NOTHING_TO_COMPACT": 409,
    "QUEUE_FULL": 409,
    "AGENT_UNAVAILABLE": 409,
    "ALREADY_ANSWERED": 409,
    "TOO_LARGE": 413,
    "RATE_LIMITED": 429,
    "QUOTA_EXCEEDED": 429,
    "UNAVAILABLE": 503,
}


def run_error(code: str, message: str, detail: str = "", extra: dict[str, Any] | None = None) -> JsonResponse:
    """`extra`: the refusal's own fields (QUOTA_EXCEEDED's retryAfter, resetsAt, budget)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if detail:
        error["detail"] = detail
    response = JsonResponse({"error": {**error, **(extra or {})}}, status=ERROR_STATUS[code])
    if extra and "retryAfter" in extra:
        response["Retry-After"] = str(extra["retryAfter"])
    return response


def not_found(what: str = "conversation") -> JsonResponse:
    return run_error("NOT_FOUND", f"No such {what}.")


async def request_user(request):
    """The signed-in user of an async view: the bearer token's (chat.accounts.bearer set it), else the
    session's; None when neither signs anyone in."""
    if getattr(request, "api_token", None) is not None:
        user = request.user
    else:
        user = await request.auser()
    return user if user.is_authenticated else None


def not_signed_in() -> JsonResponse:
    return run_error("NOT_AUTHENTICATED", "Sign in first.")
