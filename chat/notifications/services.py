"""Notifications made, read and marked read (docs/protocol.md, "Notifications"). A run event's
notification is made at most once: the second insert for the same (run, kind, toolCallId),
from another process or a resumed run, fails on the model's unique constraint and makes none."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from chat.models import Notification

KEEP = 500  # a user keeps their newest 500
BODY_CHARS = 200
LIMIT_DEFAULT, LIMIT_MAX = 50, 200


def notification_create(*, owner_id, kind: str, title: str, **fields: Any) -> Notification | None:
    """The new notification, or None when this run event has one already."""
    try:
        with transaction.atomic():
            made = Notification.objects.create(owner_id=owner_id, kind=kind, title=title[:200], **fields)
    except IntegrityError:
        return None
    _trim(owner_id)
    return made


def _trim(owner_id) -> None:
    oldest_kept = (
        Notification.objects.filter(owner_id=owner_id).order_by("-id").values_list("id", flat=True)[KEEP - 1 : KEEP]
    )
    boundary = list(oldest_kept)
    if boundary:
        Notification.objects.filter(owner_id=owner_id, id__lt=boundary[0]).delete()


def unread_count(*, user) -> int:
    return Notification.objects.filter(owner=user, read=False).count()


def notifications_page(*, user, unread: bool, limit: int, before: int | None) -> tuple[list[Notification], int | None]:
    """The user's notifications newest first, and the cursor of the next page (None: the last)."""
    rows: QuerySet[Notification] = Notification.objects.filter(owner=user)
    if unread:
        rows = rows.filter(read=False)
    if before is not None:
        rows = rows.filter(id__lt=before)
    page = list(rows.order_by("-id")[: limit + 1])
    if len(page) > limit:
        return page[:limit], page[limit - 1].pk
    return page, None


def notifications_mark_read(*, user, ids: list[int] | None) -> int:
    """Mark the user's notifications among `ids` (None: all of them) read; the unread count after.
    Ids that are not the user's are passed over."""
    rows = Notification.objects.filter(owner=user, read=False)
    if ids is not None:
        rows = rows.filter(id__in=ids)
    rows.update(read=True)
    return unread_count(user=user)


def notification_json(notification: Notification) -> dict[str, Any]:
    def text(value) -> str | None:
        return str(value) if value else None

    data: dict[str, Any] = {
        "id": notification.pk,
        "kind": notification.kind,
        "title": notification.title,
        "body": notification.body,
        "conversationId": text(notification.conversation_id),
        "runId": text(notification.run_id),
        "scheduleId": text(notification.schedule_id),
        "triggerId": text(notification.trigger_id),
        "status": notification.status or None,
        "createdAt": notification.created_at.isoformat(),
        "read": notification.read,
    }
    if notification.kind == Notification.Kind.APPROVAL_WAITING:
        data.update(toolCallId=notification.tool_call_id, toolName=notification.tool_name)
    if notification.kind == Notification.Kind.SCHEDULE_FAILED:
        data["code"] = notification.code
    return data
