"""Sessions that end close their open sockets (docs/protocol.md, "The WebSocket": 4401 at once, on every process).

A socket is authenticated once, at the handshake. When the session behind it ends, the
server pushes a `session.revoked` message through the user's channel-layer group, which
every socket of that user on every process has joined (the layer is Redis when several
processes run). The triggers:

- logout: only the sockets of the session that logged out (the user's other sessions,
  other browsers, stay signed in, as they do over HTTP);
- "sign out of all other sessions" on the account page (chat.accounts.account): the sockets of each
  session it ended;
- a password change: every socket of the user's sessions (their API tokens still hold);
- `is_active` turned off, the user deleted: every socket and stream of the user, those opened
  with an API token included;
- an API token revoked (deleted, by its user or in the admin): the sockets opened with it.
  A password change closes the sockets of the session that made it as well: Django's
  `update_session_auth_hash` keeps that browser signed in by moving its data to a *new*
  session key and deleting the old one, so the socket's credential (the old key) no
  longer exists; the page reconnects with its new cookie.

Server-sent event streams (and streamed /v1 calls) are members of the same groups and end on
the same pushes (chat.realtime.follow); `revokes` decides, for either, whether a push ends it. A
deleted conversation is pushed the same way to its own group (chat.realtime.deletion).

The push is the first line. `session_is_current` is the second: the consumer re-checks
the session on the client frames that act (not on a ping, which must cost nothing) and when
the layer comes back after an outage, so a push that was lost (a layer hiccup, a change made
with a queryset `update()` that sends no signal) still closes the socket before it starts
anything.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib import auth
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_save

from chat.accounts.session_users import session_users
from chat.models import ApiToken

logger = logging.getLogger(__name__)

REVOKED = "session.revoked"


def user_group(user_id) -> str:
    return f"user.{user_id}"


def push(group: str, message: dict[str, Any]) -> None:
    """Hand `message` to every socket and stream in `group`, on every process.

    A layer that does not answer must not fail the logout, the deletion or the admin's save
    that called this: the sockets' own re-check closes them at their next frame instead."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        # The group named: a process's sockets share one channel (chat.realtime.hub).
        async_to_sync(layer.group_send)(group, {**message, "group": group})
    except Exception:
        logger.exception("could not push %s to %s", message["type"], group)


def sessions_revoke(*, user_id, session_key: str | None = None, tokens: bool = False) -> None:
    """Close the user's open sockets and streams on every process: those of `session_key`, or
    those of all their sessions; with `tokens`, those opened with their API tokens as well (the
    user can no longer sign in at all)."""
    push(user_group(user_id), {"type": REVOKED, "session_key": session_key, "tokens": tokens})


def token_revoked(*, user_id, token_id) -> None:
    """Close the sockets and streams opened with this API token, on every process (chat.accounts.tokens)."""
    push(user_group(user_id), {"type": REVOKED, "session_key": None, "token_id": token_id})


def revokes(message: dict[str, Any], *, token_id, session_key: str | None) -> bool:
    """Whether a REVOKED push ends a socket or stream opened with this credential (a token's id, or
    else a session's key)."""
    if message.get("token_id") is not None:
        return message["token_id"] == token_id
    if token_id is not None:
        return bool(message.get("tokens"))
    return message.get("session_key") is None or message["session_key"] == session_key


def session_is_current(*, session_key: str | None, user_id) -> bool:
    """Whether this session would still sign this user in over HTTP (session_user)."""
    user = session_user(session_key=session_key, user_id=user_id)
    return user is not None


def session_user(*, session_key: str | None, user_id=None):
    """The user this session would sign in over HTTP, or None: it exists, has not expired,
    names a user (`user_id` when given), the user can still authenticate (the backend refuses
    inactive and deleted users) and the session's auth hash matches the user's current password
    (chat.accounts.session_users, which signs in many keys at once by the same rules).

    The checks of Django's `auth.get_user`, without its side effects: that one flushes a
    stale session or moves a fallback-verified one to a new key, and a key rotated here
    would never reach the browser's cookie."""
    if not session_key:
        return None
    user = session_users([session_key])[session_key]
    if user is None or (user_id is not None and user.pk != user_id):
        return None
    return user


# -- the triggers ------------------------------------------------------------------------


def _on_logout(sender, request, user, **kwargs) -> None:
    # Sent before the session is flushed, so its key is still known here.
    if user is not None and request is not None and request.session.session_key:
        sessions_revoke(user_id=user.pk, session_key=request.session.session_key)


def _before_user_save(sender, instance, raw=False, update_fields=None, **kwargs) -> None:
    if raw or instance.pk is None:
        return
    if update_fields is not None and not {"password", "is_active"} & set(update_fields):
        return  # e.g. the last_login update of every login: no extra query
    before = sender._default_manager.filter(pk=instance.pk).values("password", "is_active").first()
    # What to revoke after the save: None nothing, False the sessions (a new password), True the
    # API tokens too (the user deactivated).
    instance._agentsite_revoke_sockets = None
    if before is not None and before["is_active"] and not instance.is_active:
        instance._agentsite_revoke_sockets = True
    elif before is not None and before["password"] != instance.password:
        instance._agentsite_revoke_sockets = False


def _after_user_save(sender, instance, raw=False, **kwargs) -> None:
    tokens = getattr(instance, "_agentsite_revoke_sockets", None)
    if tokens is not None:
        instance._agentsite_revoke_sockets = None
        _revoke_all_after_commit(instance.pk, tokens=tokens)


def _after_user_delete(sender, instance, **kwargs) -> None:
    _revoke_all_after_commit(instance.pk, tokens=True)


def _revoke_all_after_commit(user_id, *, tokens: bool) -> None:
    # After the commit (the admin saves inside a transaction): a socket that re-checks on
    # the push must see the new state, and a rolled-back change revokes nothing.
    transaction.on_commit(lambda: sessions_revoke(user_id=user_id, tokens=tokens))


def _after_token_delete(sender, instance, **kwargs) -> None:
    user_id, token_id = instance.user_id, instance.pk
    transaction.on_commit(lambda: token_revoked(user_id=user_id, token_id=token_id))


def connect_signals() -> None:
    user_model = auth.get_user_model()
    post_delete.connect(_after_token_delete, sender=ApiToken, dispatch_uid="agentsite-revoke-token")
    user_logged_out.connect(_on_logout, dispatch_uid="agentsite-revoke-logout")
    pre_save.connect(_before_user_save, sender=user_model, dispatch_uid="agentsite-revoke-pre-save")
    post_save.connect(_after_user_save, sender=user_model, dispatch_uid="agentsite-revoke-post-save")
    post_delete.connect(_after_user_delete, sender=user_model, dispatch_uid="agentsite-revoke-delete")
