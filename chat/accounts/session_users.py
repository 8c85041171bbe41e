"""Who many session keys sign in, in two queries: the sessions, then their users.

A restarted server's pages all reconnect within seconds, each WebSocket signing in with its session
cookie (chat.doors.socket.credentials); one by one that was a session query and a user query per
socket on the one ORM thread. Here the handshakes that arrive together are signed in together. The
rules are session_user's (chat.accounts.revocation), for each key: the session exists and has not
expired, names a user, its backend is still configured and gives that user (the model backends
refuse inactive and deleted users), and its auth hash is the user's current password's.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib import auth
from django.contrib.auth.backends import ModelBackend
from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.crypto import constant_time_compare


def session_users(session_keys: Iterable[str | None]) -> dict[str, Any]:
    """The user each key signs in (None: nobody), by key; empty keys are left out. Queries: call it
    on the ORM thread."""
    keys = sorted({key for key in session_keys if key})
    if not keys:
        return {}
    datas = _session_datas(keys)
    claims: dict[str, tuple[Any, str]] = {}  # key -> (user id, backend path)
    for key, data in datas.items():
        try:
            user_id = auth.get_user_model()._meta.pk.to_python(data[auth.SESSION_KEY])
            backend_path = data[auth.BACKEND_SESSION_KEY]
        except (KeyError, ValidationError):
            continue
        if backend_path in settings.AUTHENTICATION_BACKENDS:
            claims[key] = (user_id, backend_path)
    users = _users({claim for claim in claims.values()})
    out: dict[str, Any] = dict.fromkeys(keys)
    for key, claim in claims.items():
        user = users.get(claim)
        if user is not None and _hash_holds(datas[key], user):
            out[key] = user
    return out


def _session_datas(keys: list[str]) -> dict[str, dict]:
    """Each live session's data, by key (a missing, expired or corrupted one is left out, as
    SessionStore.load reads it as empty)."""
    store = import_module(settings.SESSION_ENGINE).SessionStore
    if not issubclass(store, DatabaseSessionStore):  # another engine: its own loads, one by one
        return {key: data for key in keys if (data := store(key).load())}
    rows = store.get_model_class().objects.filter(session_key__in=keys, expire_date__gt=timezone.now())
    decoder = store()
    return {key: data for key, raw in rows.values_list("session_key", "session_data") if (data := decoder.decode(raw))}


def _users(claims: set[tuple[Any, str]]) -> dict[tuple[Any, str], Any]:
    """The user each (user id, backend path) gives: one query for every backend that reads users as
    Django's model backend does, the backend's own get_user otherwise."""
    out: dict[tuple[Any, str], Any] = {}
    batched: dict[Any, list[tuple[Any, str]]] = {}
    for claim in claims:
        user_id, backend_path = claim
        backend = auth.load_backend(backend_path)
        if type(backend).get_user is ModelBackend.get_user:
            batched.setdefault(user_id, []).append(claim)
        else:
            out[claim] = backend.get_user(user_id)
    if batched:
        for user in auth.get_user_model()._default_manager.filter(pk__in=list(batched)):
            for claim in batched[user.pk]:
                if auth.load_backend(claim[1]).user_can_authenticate(user):
                    out[claim] = user
    return out


def _hash_holds(data: dict, user) -> bool:
    session_hash = data.get(auth.HASH_SESSION_KEY) or ""
    return any(
        constant_time_compare(session_hash, known)
        for known in (user.get_session_auth_hash(), *user.get_session_auth_fallback_hash())
    )
