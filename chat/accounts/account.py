"""The account page's reads and writes: the user's settings (display name, language, theme),
ending their other sessions, and deleting the account. The page itself is
chat.doors.pages.pages.account_page."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction

from chat.accounts.revocation import sessions_revoke
from chat.models import AccountSettings, UserSession

logger = logging.getLogger(__name__)


def account_settings_of(*, user_id) -> AccountSettings:
    """The user's settings; unsaved defaults when they never saved any."""
    return AccountSettings.objects.filter(user_id=user_id).first() or AccountSettings(user_id=user_id)


def account_language_of(*, user_id) -> str:
    """The language saved on the account, "" for none (the browser's then)."""
    return AccountSettings.objects.filter(user_id=user_id).values_list("language", flat=True).first() or ""


def account_update(*, user, display_name: str, email: str, language: str) -> None:
    with transaction.atomic():
        if user.email != email:
            user.email = email
            user.save(update_fields=["email"])
        AccountSettings.objects.update_or_create(
            user_id=user.pk, defaults={"display_name": display_name, "language": language}
        )


def account_language_save(*, user_id, language: str) -> None:
    AccountSettings.objects.update_or_create(user_id=user_id, defaults={"language": language})


def sessions_other_count(*, user_id, session_key: str | None) -> int:
    return UserSession.objects.filter(user_id=user_id).exclude(session_key=session_key).count()


def sessions_end_others(*, user_id, session_key: str | None) -> int:
    """Signs the user out everywhere but this session: the other sessions are deleted (their
    cookies sign nobody in over HTTP any more) and their sockets close on every process
    (docs/protocol.md, "The WebSocket"), once the delete has committed."""
    with transaction.atomic():
        others = list(
            UserSession.objects.filter(user_id=user_id)
            .exclude(session_key=session_key)
            .values_list("session_key", flat=True)
        )
        UserSession.objects.filter(session_key__in=others).delete()
        for key in others:
            transaction.on_commit(lambda key=key: sessions_revoke(user_id=user_id, session_key=key))
    return len(others)


def confirms_with_username(user) -> bool:
    """Whether the user confirms the deletion of their account by typing their username: they
    have no password to type (they sign in only with OpenID Connect)."""
    return not (settings.ALLOW_PASSWORD_LOGIN and user.has_usable_password())


def account_delete_confirmed(*, user, confirmation: str) -> bool:
    """Whether `confirmation` is the user's password (their username: confirms_with_username)."""
    if confirms_with_username(user):
        return confirmation == user.get_username()
    return user.check_password(confirmation)


def account_delete(*, user) -> None:
    """Deletes the user and everything of theirs, in one transaction: conversations with their
    runs, events, files and shares, API tokens, sessions, settings (every foreign key to the user
    cascades). What the database does not hold goes once it commits, through the receivers that
    any deletion of a user or a conversation sets off: the workspaces on disk
    (chat.conversations.workspaces) and every socket and stream of the user, on every process
    (chat.accounts.revocation). The log keeps the id, none of the user's data."""
    user_id = user.pk
    with transaction.atomic():
        user.delete()
    logger.info("user %s deleted their account", user_id)
