"""The OpenAPI descriptions of `/api/notifications/` (docs/protocol.md, "Notifications"): the
routes and their schemas, in the form of chat.doors.openapi.openapi_schedules."""

from __future__ import annotations

from chat.doors.openapi.openapi_routes import BEFORE, LIMIT, WRITE, answer, body, error, operation, query
from chat.doors.openapi.openapi_schemas import ref

_ID_OR_NULL = {"type": ["string", "null"], "format": "uuid"}

NOTIFICATION_SCHEMAS: dict[str, dict] = {
    "Notification": {
        "type": "object",
        "properties": {
            "id": {"type": "integer", "description": "Opaque: the `ids` of `POST /api/notifications/read/`."},
            "kind": {"enum": ["run_finished", "approval_waiting", "schedule_failed"]},
            "title": {"type": "string", "description": "The conversation's title (the schedule's name when failed)."},
            "body": {"type": "string", "description": "The first 200 characters of the answer, for `run_finished`."},
            "conversationId": _ID_OR_NULL,
            "runId": _ID_OR_NULL,
            "scheduleId": _ID_OR_NULL,
            "triggerId": _ID_OR_NULL,
            "status": {"type": ["string", "null"], "description": "`run_finished`: the run's final status."},
            "createdAt": {"type": "string", "format": "date-time"},
            "read": {"type": "boolean"},
            "toolCallId": {"type": "string", "description": "`approval_waiting` only."},
            "toolName": {"type": "string", "description": "`approval_waiting` only."},
            "code": {
                "enum": ["AGENT_UNAVAILABLE", "RATE_LIMITED", "QUOTA_EXCEEDED", "RUN_IN_PROGRESS", "NOT_FOUND"]
                + ["WEBHOOK_FAILED"],
                "description": "`schedule_failed` only: the refusal's code, or a webhook that was not delivered.",
            },
        },
        "required": [
            "id",
            "kind",
            "title",
            "body",
            "conversationId",
            "runId",
            "scheduleId",
            "triggerId",
            "status",
            "createdAt",
            "read",
        ],
        "additionalProperties": False,
        "description": "What happened while nobody watched.",
    },
    "NotificationList": {
        "type": "object",
        "properties": {
            "notifications": {"type": "array", "items": ref("Notification")},
            "unread": {"type": "integer", "minimum": 0, "description": "All the user's unread notifications."},
            "next": {"type": ["string", "null"], "description": "The `before` of the next page; null: the last."},
        },
        "required": ["notifications", "unread", "next"],
        "additionalProperties": False,
    },
    "NotificationsRead": {
        "oneOf": [
            {
                "type": "object",
                "properties": {"ids": {"type": "array", "items": {"type": ["integer", "string"]}}},
                "required": ["ids"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "properties": {"all": {"const": True}},
                "required": ["all"],
                "additionalProperties": False,
            },
        ],
        "description": "The ids to mark read (ids that are not the user's are passed over), or all of them.",
    },
    "UnreadCount": {
        "type": "object",
        "properties": {"unread": {"type": "integer", "minimum": 0}},
        "required": ["unread"],
        "additionalProperties": False,
    },
}

_UNREAD = query("unread", "`1`: only the unread ones.", {"enum": ["0", "1"]})

NOTIFICATION_ROUTES: dict[str, dict[str, dict]] = {
    "api/notifications/": {
        "get": operation(
            "The user's notifications, newest first",
            {
                "200": answer("A page of them, and the unread count.", "NotificationList"),
                "400": answer("A refused `limit` or `before` (`field` names it).", "FieldError"),
            },
            parameters=[_UNREAD, LIMIT, BEFORE],
            tags=["notifications"],
        )
    },
    "api/notifications/read/": {
        "post": operation(
            "Mark notifications read",
            {"200": answer("The unread count after.", "UnreadCount"), "400": error("Another body.")},
            security=WRITE,
            requestBody=body("NotificationsRead"),
            tags=["notifications"],
        )
    },
}
