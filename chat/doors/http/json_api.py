"""What every JSON endpoint shares (docs/protocol.md, "The JSON API"): the one error shape, the
sign-in check, the body read within the nesting limit, text fields checked."""

from __future__ import annotations

import asyncio
from functools import wraps

from django.http import JsonResponse

from chat import nesting
from chat.agent.text import invalid_reason


def json_error(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"error": code, "message": message}, status=status)


def api_login_required(view):
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return json_error(401, "not_authenticated", "Sign in first.")
        return view(request, *args, **kwargs)

    return wrapped


class BodyTooLarge(Exception):
    """A request body longer than its route takes (`limit` bytes)."""

    def __init__(self, limit: int):
        super().__init__(f"the body is larger than {limit} bytes")
        self.limit = limit


def limited_body(request, *, limit: int) -> bytes:
    """The body read from the request's stream, for a route that takes more than `request.body`
    does (it stops at DATA_UPLOAD_MAX_MEMORY_SIZE); BodyTooLarge past `limit`, by the declared
    length before anything is read."""
    try:
        declared = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise BodyTooLarge(limit)
    raw = request.read(limit + 1)
    if len(raw) > limit:
        raise BodyTooLarge(limit)
    return raw


# A body declared this small is read and parsed on the loop (well under a millisecond); a larger
# one, or one of unknown length, in a thread. In a burst of 100 completion requests each small
# body's trip to a thread waited for one, then for the loop to take its result back (issue 55).
INLINE_BODY = 16 * 1024


async def read_off_the_loop(request, function, /, *args, **kwargs):
    """`function(*args, **kwargs)`, work that reads and checks the request's body: on the loop when
    the body is declared small (INLINE_BODY), else in a thread."""
    try:
        declared = int(request.headers.get("Content-Length") or "x")
    except ValueError:
        declared = None
    if declared is not None and declared <= INLINE_BODY:
        return function(*args, **kwargs)
    return await asyncio.to_thread(function, *args, **kwargs)


def json_body(request, *, raw: bytes | None = None) -> dict:
    """The JSON object of the request's body (or of `raw`, a body read already); ValueError saying
    what is wrong with it. No body is an empty object."""
    if raw is None:
        raw = request.body
    if not raw:
        return {}
    try:
        body = nesting.loads(raw)
    except nesting.TooDeep:
        raise ValueError("the body is nested too deeply") from None
    except ValueError:
        raise ValueError("the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    return body


def text_field(value, name: str, max_length: int) -> str:
    """A text field of a request body, or ValueError naming what is wrong with it."""
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string")
    if len(value) > max_length:
        raise ValueError(f"{name} is longer than {max_length} characters")
    reason = invalid_reason(value)
    if reason:
        raise ValueError(f"{name} contains text that cannot be stored: {reason}")
    return value


def iso_time(moment) -> str | None:
    return moment.isoformat() if moment is not None else None


def expiry_days(value, maximum: int) -> int | None:
    """`expiresInDays` of a token or a shared link: absent or null for one that does not expire,
    else a whole number of days from 1 to `maximum`, or ValueError saying so."""
    if value is None:
        return None
    if type(value) is not int or not 1 <= value <= maximum:
        raise ValueError(f"expiresInDays must be a whole number of days from 1 to {maximum}")
    return value
