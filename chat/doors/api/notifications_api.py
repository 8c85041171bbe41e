"""`/api/notifications/` (docs/protocol.md, "Notifications"): the user's notifications, newest
first, and marking them read. Only the user's own are ever read or marked; the new unread count
goes to every bell of the user (chat.notifications.push)."""

from __future__ import annotations

from django.http import JsonResponse
from django.views.decorators.http import require_http_methods

from chat.doors.http.json_api import api_login_required, json_body, json_error
from chat.notifications.push import push_unread
from chat.notifications.services import (
    LIMIT_DEFAULT,
    LIMIT_MAX,
    notification_json,
    notifications_mark_read,
    notifications_page,
    unread_count,
)


def _refused(field: str, message: str) -> JsonResponse:
    return JsonResponse({"error": "bad_request", "message": message, "field": field}, status=400)


def _whole(raw: str) -> int | None:
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 19 else None


@require_http_methods(["GET"])
@api_login_required
def notifications(request):
    limit = _whole(request.GET.get("limit", str(LIMIT_DEFAULT)))
    if limit is None or limit < 1:
        return _refused("limit", "limit must be a whole number from 1")
    before = request.GET.get("before")
    cursor = _whole(before) if before is not None else None
    if before is not None and cursor is None:
        return _refused("before", "before must be the cursor of an earlier answer")
    unread = request.GET.get("unread", "") in ("1", "true")
    page, following = notifications_page(user=request.user, unread=unread, limit=min(limit, LIMIT_MAX), before=cursor)
    return JsonResponse(
        {
            "notifications": [notification_json(n) for n in page],
            "unread": unread_count(user=request.user),
            "next": str(following) if following is not None else None,
        }
    )


# Notification ids are positive database keys: anything past this names none of them.
ID_MAX = 2**63 - 1


def _ids(body: dict) -> list[int] | None:
    """The ids to mark (None: all of them); ValueError for any other body."""
    if set(body) == {"all"} and body["all"] is True:
        return None
    ids = body.get("ids")
    if set(body) != {"ids"} or not isinstance(ids, list):
        raise ValueError('the body must be {"ids": [id, ...]} or {"all": true}')
    if any(isinstance(i, bool) or not isinstance(i, int | str) for i in ids):
        raise ValueError("ids must be the ids of notifications")
    # An id that names none of the user's notifications is passed over, whatever it looks like.
    numbers = [i if isinstance(i, int) else _whole(i) for i in ids]
    return [n for n in numbers if n is not None and 0 < n <= ID_MAX]


@require_http_methods(["POST"])
@api_login_required
def notifications_read(request):
    try:
        ids = _ids(json_body(request))
    except ValueError as exc:
        return json_error(400, "bad_request", str(exc))
    count = notifications_mark_read(user=request.user, ids=ids)
    push_unread(request.user.pk, count)
    return JsonResponse({"unread": count})
