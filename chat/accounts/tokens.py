"""Personal API tokens (docs/protocol.md, "API tokens"): made, listed and revoked by their user
(the account page, `/api/tokens/`) or by staff (the admin), and checked on every request and
socket that presents one as `Authorization: Bearer`.

A value is `as_` and 43 URL-safe characters (256 random bits); only its SHA-256 is stored, so a
copy of the database opens nothing. Revoking a token deletes its row and closes the sockets
opened with it on every process (chat.accounts.revocation). Failed attempts are counted and
locked out by chat.accounts.token_lockout.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.db.models import QuerySet
from django.utils import timezone

from chat.agent.text import clean
from chat.models import ApiToken

PREFIX = "as_"
NAME_MAX = 100
EXPIRY_DAYS_MAX = 3650
# last_used_at is written at most this often per token: a script polling every second would
# otherwise make every request a write.
LAST_USED_EVERY = timedelta(minutes=1)


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def token_create(*, user, name: str, expires_in_days: int | None = None) -> tuple[ApiToken, str]:
    """A new token of the user and its value, which is never stored and cannot be shown again."""
    value = PREFIX + secrets.token_urlsafe(32)
    expires_at = timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None
    token = ApiToken.objects.create(
        user=user, name=clean(name.strip())[:NAME_MAX], digest=_digest(value), hint=value[:7], expires_at=expires_at
    )
    return token, value


def tokens_for_user(*, user) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user)


def token_revoke(*, user, token_id) -> bool:
    """Delete one of the user's tokens (its sockets close: the post_delete signal); False when the
    user has no such token."""
    deleted, _ = ApiToken.objects.filter(user=user, pk=token_id).delete()
    return bool(deleted)


def token_user(value: str):
    """The active user a presented token authenticates, with the token, or (None, None): unknown,
    expired, or its user deactivated."""
    if not value.startswith(PREFIX) or len(value) > 200:
        return None, None
    # The account's settings come along for the interface language (chat.doors.pages.language): no second query.
    token = ApiToken.objects.select_related("user", "user__account_settings").filter(digest=_digest(value)).first()
    now = timezone.now()
    if token is None or (token.expires_at is not None and token.expires_at <= now) or not token.user.is_active:
        return None, None
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_EVERY:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token.user, token


def tokens_users(values: list[str]) -> list[tuple[object | None, ApiToken | None]]:
    """token_user of each value, the tokens read in one query and their due last_used_at written in
    one (the bearer checks of a group of requests, chat.accounts.token_checks). A value presented
    twice in the group is looked up again for its second request: no two requests share a user
    object."""
    wanted = {value: _digest(value) for value in values if value.startswith(PREFIX) and len(value) <= 200}
    rows = ApiToken.objects.select_related("user", "user__account_settings").filter(digest__in=set(wanted.values()))
    found = {token.digest: token for token in rows}
    now = timezone.now()
    out: list[tuple[object | None, ApiToken | None]] = []
    due: list[ApiToken] = []
    taken: set[str] = set()
    for value in values:
        digest = wanted.get(value)
        if digest in taken:
            out.append(token_user(value))  # the same token twice: its own objects
            continue
        token = found.pop(digest, None) if digest is not None else None
        if digest is not None:
            taken.add(digest)
        if token is None or (token.expires_at is not None and token.expires_at <= now) or not token.user.is_active:
            out.append((None, None))
            continue
        if token.last_used_at is None or now - token.last_used_at >= LAST_USED_EVERY:
            due.append(token)
        out.append((token.user, token))
    if due:
        ApiToken.objects.filter(pk__in=[token.pk for token in due]).update(last_used_at=now)
        for token in due:
            token.last_used_at = now
    return out


def token_is_current(*, token_id, user_id) -> bool:
    """Whether the token still exists, has not expired and its user is still active (the socket's
    re-check of its credential, as session_is_current is for a session's)."""
    return (
        ApiToken.objects.filter(pk=token_id, user_id=user_id, user__is_active=True)
        .exclude(expires_at__lte=timezone.now())
        .exists()
    )
