"""Shared links: made, listed and revoked by the conversation's owner, opened by anyone who has
the link, copied by a signed-in visitor (docs/protocol.md, "Shared links").

A token is `sh_` and 43 URL-safe characters (256 random bits). Only its SHA-256 is stored and a
link is found by the digest of the token presented: a copy of the database opens nothing, and
no comparison of secrets happens in Python (the index lookup compares digests, whose timing
tells nothing about a token one does not already have), so there is nothing to compare in
constant time. The token is shown once, when the link is made, as an API token is.

A snapshot ends with the last finished run when the link is made (`up_to_seq`, the seq of its
`complete`): a half-written answer is never shared, and later messages never show. It holds the
branch the owner looks at, under the title of the moment (chat/sharing/snapshot.py).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.translation import gettext

from chat.conversations.export import export_json
from chat.conversations.importing import conversation_import, parse_import
from chat.conversations.services import TITLE_MAX
from chat.eventlog.reads import events_after
from chat.models import Conversation, Event, ShareLink
from chat.sharing.snapshot import branch_frames, snapshot_leaf

PREFIX = "sh_"
TOKEN_CHARS = len(PREFIX) + 43
EXPIRY_DAYS_MAX = 365
# Links of one conversation that may be open at once; past it, revoke one first.
ACTIVE_MAX = 20
# Revoked and expired links kept per conversation for the admin's history; older ones are
# deleted when the next link is made, so a conversation's rows stay bounded (ACTIVE_MAX + this).
CLOSED_KEPT = 20


class NothingToShare(Exception):
    """The conversation has no finished answer yet."""


class TooManyLinks(Exception):
    """The conversation has ACTIVE_MAX open links."""


@dataclass(frozen=True)
class Snapshot:
    link: ShareLink
    conversation: Conversation
    frames: list


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _open(now) -> Q:
    return Q(revoked_at__isnull=True) & (Q(expires_at__isnull=True) | Q(expires_at__gt=now))


def is_open(link: ShareLink, now=None) -> bool:
    now = now or timezone.now()
    return link.revoked_at is None and (link.expires_at is None or link.expires_at > now)


def share_create(
    *, conversation: Conversation, expires_in_days: int | None = None, leaf_seq: int | None = None
) -> tuple[ShareLink, str]:
    """A new link to the conversation as it is now (the branch through `leaf_seq`, else the one
    its owner views) and its token (never stored, shown once); NothingToShare before the
    branch's first finished answer, TooManyLinks past ACTIVE_MAX open ones, NotAUserMessage
    when `leaf_seq` names no turn of the conversation."""
    up_to = (
        Event.objects.filter(conversation_id=conversation.pk, type="complete")
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    )
    if up_to is None:
        raise NothingToShare()
    leaf = snapshot_leaf(conversation=conversation, up_to=up_to, leaf_seq=leaf_seq)
    if leaf is None:
        raise NothingToShare()
    now = timezone.now()
    value = PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        # The owner's row locked: two requests at once cannot both pass the cap.
        Conversation.objects.select_for_update().filter(pk=conversation.pk).first()
        links = ShareLink.objects.filter(conversation_id=conversation.pk)
        if links.filter(_open(now)).count() >= ACTIVE_MAX:
            raise TooManyLinks()
        closed = links.exclude(_open(now)).order_by("-created_at").values_list("pk", flat=True)[CLOSED_KEPT - 1 :]
        ShareLink.objects.filter(pk__in=list(closed)).delete()
        link = ShareLink.objects.create(
            conversation=conversation,
            digest=_digest(value),
            hint=value[:8],
            up_to_seq=up_to,
            leaf_seq=leaf,
            title=conversation.title,
            created_at=now,
            expires_at=now + timedelta(days=expires_in_days) if expires_in_days else None,
        )
    return link, value


def shares_of_conversation(*, conversation: Conversation) -> QuerySet[ShareLink]:
    """The conversation's links that are not revoked (open or expired), newest first."""
    return ShareLink.objects.filter(conversation_id=conversation.pk, revoked_at__isnull=True)


def share_revoke(*, user, share_id: int) -> bool:
    """Revoke one of the user's links; False when the user has no such link (or it was revoked)."""
    revoked = ShareLink.objects.filter(pk=share_id, conversation__owner=user, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    return bool(revoked)


def link_for_token(value: str) -> ShareLink | None:
    """The open link a token names, with its conversation and owner; None for anything else
    (sharing turned off, a malformed, unknown, revoked or expired token, a deleted conversation)."""
    if not settings.AGENT_SHARING or len(value) != TOKEN_CHARS or not value.startswith(PREFIX):
        return None
    link = ShareLink.objects.select_related("conversation__owner").filter(digest=_digest(value)).first()
    if link is None or not is_open(link) or not link.conversation.owner.is_active:
        return None
    return link


def snapshot_frames(link: ShareLink) -> list:
    """The frames of the snapshot (its branch, numbered again from 1), as the owner's page
    receives frames."""
    frames = events_after(conversation_id=link.conversation_id, until=link.up_to_seq)
    return branch_frames(frames, leaf_seq=link.leaf_seq)


def shared_frames(link: ShareLink) -> list:
    """The snapshot as a visitor sees it: the owner's token usage and files' workspace paths
    beyond their names are not theirs to see."""
    shown = []
    for frame in snapshot_frames(link):
        frame = {key: value for key, value in frame.items() if key != "usage"}
        if isinstance(frame.get("attachments"), list):
            frame["attachments"] = [
                {"path": item.get("path"), "size": item.get("size")}
                for item in frame["attachments"]
                if isinstance(item, dict)
            ]
        shown.append(frame)
    return shown


def copied_title(title: str) -> str:
    title = " ".join(title.split())
    if not title:
        return gettext("Shared conversation")
    marked = gettext("%(title)s (shared)")
    return marked % {"title": title[: TITLE_MAX - len(marked % {"title": ""})]}


def share_copy(*, link: ShareLink, owner) -> Conversation:
    """A new conversation of `owner` holding the snapshot's events, written by the import (the
    same checks, memory checkpoints and search documents), which then continues like any other.
    ImportRefused when the stored log cannot be imported (not a log the server writes)."""
    raw = export_json(conversation=link.conversation, frames=snapshot_frames(link))
    return conversation_import(owner=owner, imported=parse_import(raw), title=copied_title(link.title))
