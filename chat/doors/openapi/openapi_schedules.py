"""The OpenAPI descriptions of `/api/schedules/` (docs/protocol.md, "Schedules"): the routes and
their schemas. A module of its own, in the form of chat.doors.openapi.openapi_routes and
chat.doors.openapi.openapi_schemas (which are at their size); chat.doors.openapi.openapi reads both tables."""

from __future__ import annotations

from chat.doors.openapi.openapi_routes import LIMIT, WRITE, answer, body, error, operation
from chat.doors.openapi.openapi_schemas import ref

_UUID = {"type": "string", "format": "uuid"}
_TIME = {"type": "string", "format": "date-time"}
_TIME_OR_NULL = {"type": ["string", "null"], "format": "date-time"}
_LAST_STATUS = {
    "enum": [
        None,
        "running",
        "succeeded",
        "failed",
        "cancelled",
        "interrupted",
        "skipped_running",
        "missed",
        "owner_inactive",
        "agent_unavailable",
        "rate_limited",
        "quota_exceeded",
        "run_in_progress",
        "not_found",
    ],
    "description": "What its newest slot did: its run's status, or why it started none.",
}
_FIELDS = {
    "prompt": {"type": "string", "minLength": 1, "description": "The user message of every run it starts."},
    "name": {"type": "string", "minLength": 1, "maxLength": 100},
    "cron": {"type": ["string", "null"], "description": "Five fields, read in `timezone`."},
    "every": {"type": ["integer", "null"], "minimum": 1, "maximum": 31622400, "description": "Seconds."},
    "at": {"type": ["string", "null"], "description": "An ISO 8601 time; read in `timezone` without an offset."},
    "timezone": {"type": "string", "description": "An IANA time zone name."},
    "agent": {"type": "string", "description": "The slug of an agent of `GET /api/agents/`."},
    "conversation": {"type": "string", "description": '`"new"` or the id of one of the user\'s conversations.'},
    "enabled": {"type": "boolean"},
    "webhookUrl": {"type": ["string", "null"], "maxLength": 2000, "description": "An http(s) URL of a public host."},
}


def _object(properties: dict, *, optional: tuple[str, ...] = (), closed: bool = True, **more) -> dict:
    out = {
        "type": "object",
        "properties": properties,
        "required": [name for name in properties if name not in optional],
        **more,
    }
    if closed:
        out["additionalProperties"] = False
    return out


SCHEDULE_SCHEMAS: dict[str, dict] = {
    "Schedule": _object(
        {
            "id": _UUID,
            **_FIELDS,
            "at": {**_TIME_OR_NULL, "description": "The one slot of an `at` schedule, in UTC."},
            "createdAt": _TIME,
            "updatedAt": _TIME,
            "nextRunAt": {**_TIME_OR_NULL, "description": "The next slot; null while disabled or once `at` is spent."},
            "lastRunAt": _TIME_OR_NULL,
            "lastRunId": {"type": ["string", "null"], "format": "uuid"},
            "lastStatus": _LAST_STATUS,
            "webhookSecret": {
                "type": "string",
                "pattern": "^whsec_[A-Za-z0-9_-]{43}$",
                "description": "In the answer that set a webhookUrl where there was none, only.",
            },
        },
        optional=("webhookSecret",),
        description="A schedule: a prompt run as its owner at set times.",
    ),
    "ScheduleList": _object({"schedules": {"type": "array", "items": ref("Schedule")}}),
    "ScheduleBody": _object(_FIELDS, optional=tuple(name for name in _FIELDS if name != "prompt"), closed=False),
    "ScheduleChange": _object(_FIELDS, optional=tuple(_FIELDS), closed=False, minProperties=1),
    "ScheduleRuns": _object(
        {
            "runs": {
                "type": "array",
                "items": _object(
                    {
                        "runId": _UUID,
                        "conversationId": _UUID,
                        "status": {"enum": ["running", "succeeded", "failed", "cancelled", "interrupted"]},
                        "startedAt": _TIME,
                        "finishedAt": _TIME_OR_NULL,
                    }
                ),
            }
        }
    ),
    "FieldError": _object(
        {
            "error": {"enum": ["bad_request"]},
            "message": {"type": "string", "description": "Text for people, naming the field."},
            "field": {"type": ["string", "null"], "description": "The body's field that was refused."},
        },
        description="A refused field: nothing of the body is stored.",
    ),
}

_REFUSED = answer("A refused field (`field` names it), or a body that is not a JSON object.", "FieldError")
_MISSING = error("No such schedule (someone else's, or an id that is not a UUID, answers the same).")
_BAD_BODY = {"oneOf": [ref("FieldError"), ref("Error")]}
_REFUSED["content"]["application/json"]["schema"] = _BAD_BODY

SCHEDULE_ROUTES: dict[str, dict[str, dict]] = {
    "api/schedules/": {
        "get": operation(
            "The user's schedules, newest first", {"200": answer("The schedules.", "ScheduleList")}, tags=["schedules"]
        ),
        "post": operation(
            "Make a schedule",
            {
                "201": answer("Made.", "Schedule"),
                "400": _REFUSED,
                "409": error("`too_many_schedules`: the user has `AGENT_MAX_SCHEDULES` schedules."),
            },
            security=WRITE,
            requestBody=body("ScheduleBody"),
            tags=["schedules"],
        ),
    },
    "api/schedules/<uuid:schedule_id>/": {
        "get": operation(
            "A schedule", {"200": answer("The schedule.", "Schedule"), "404": _MISSING}, tags=["schedules"]
        ),
        "patch": operation(
            "Change a schedule: any of its fields; a timing given replaces the timing",
            {"200": answer("Changed.", "Schedule"), "400": _REFUSED, "404": _MISSING},
            security=WRITE,
            requestBody=body("ScheduleChange"),
            tags=["schedules"],
        ),
        "delete": operation(
            "Delete a schedule; its runs and their conversations stay",
            {"204": answer("Deleted."), "404": _MISSING},
            security=WRITE,
            tags=["schedules"],
        ),
    },
    "api/schedules/<uuid:schedule_id>/runs/": {
        "get": operation(
            "The runs a schedule started, newest first",
            {"200": answer("The runs.", "ScheduleRuns"), "400": _REFUSED, "404": _MISSING},
            parameters=[LIMIT],
            tags=["schedules"],
        )
    },
}
