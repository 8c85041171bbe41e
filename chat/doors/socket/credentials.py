"""Who a WebSocket handshake signs in as. The consumer signs its socket in itself, in the same
trip to the ORM thread as its conversation check (chat.doors.socket.consumers), rather than through
Channels' session and auth middlewares and a bearer middleware, which took a trip each: in a
reconnect storm those trips queued on the one ORM thread, turn after turn.

The rules are HTTP's: a bearer token (chat.accounts.bearer) signs in its token's user, and a token's
socket is signed in by the token alone, never by a cookie (a bad token signs in nobody, whatever
cookie comes along); without a token, the session cookie signs in its session's user while the
session exists, has not expired, names a user who can still sign in and carries that user's
password hash (chat.accounts.revocation.session_user). What the socket keeps is ids: the
session key or the token's id, for the re-checks and the revocation pushes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http.cookie import parse_cookie

from chat.accounts.bearer import socket_bearer, socket_token_user
from chat.accounts.revocation import session_user


@dataclass(frozen=True, slots=True)
class SignedIn:
    user: Any
    session_key: str | None  # None for a token's socket
    token_id: Any  # None for a session's socket


def signed_in(scope) -> SignedIn | None:
    """The handshake's user and credential; None when nobody is signed in. Queries: call it on
    the ORM thread."""
    value = socket_bearer(scope)
    if value is not None:
        user, token = socket_token_user(scope, value)
        return SignedIn(user, None, token.pk) if user is not None else None
    session_key = session_cookie(scope)
    user = session_user(session_key=session_key)
    return SignedIn(user, session_key, None) if user is not None else None


def session_cookie(scope) -> str | None:
    """The session key of the handshake's cookie header (the first one, as Channels read it)."""
    for name, value in scope.get("headers") or []:
        if name == b"cookie":
            return parse_cookie(value.decode("latin-1")).get(settings.SESSION_COOKIE_NAME)
    return None
