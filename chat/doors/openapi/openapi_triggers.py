"""The OpenAPI descriptions of `/api/triggers/` and `POST /hooks/<id>/` (docs/protocol.md,
"Triggers"): the routes and their schemas, in the form of chat.doors.openapi.openapi_schedules
(whose FieldError and ScheduleRuns they share)."""

from __future__ import annotations

from chat.doors.openapi.openapi_routes import LIMIT, OPEN, WRITE, answer, body, error, operation
from chat.doors.openapi.openapi_schemas import ref

_UUID = {"type": "string", "format": "uuid"}
_TIME = {"type": "string", "format": "date-time"}
_TIME_OR_NULL = {"type": ["string", "null"], "format": "date-time"}
_FIELDS = {
    "prompt": {
        "type": "string",
        "minLength": 1,
        "description": "The user message's template: every `{{payload}}` (at least one) is replaced by the call's body.",
    },
    "name": {"type": "string", "minLength": 1, "maxLength": 100},
    "agent": {"type": "string", "description": "The slug of an agent of `GET /api/agents/`."},
    "conversation": {"type": "string", "description": '`"new"` or the id of one of the user\'s conversations.'},
    "enabled": {"type": "boolean"},
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


TRIGGER_SCHEMAS: dict[str, dict] = {
    "Trigger": _object(
        {
            "id": _UUID,
            **_FIELDS,
            "url": {"type": "string", "description": "`/hooks/<id>/`: where a program posts to start a run."},
            "createdAt": _TIME,
            "updatedAt": _TIME,
            "lastRunAt": _TIME_OR_NULL,
            "lastRunId": {"type": ["string", "null"], "format": "uuid"},
            "lastStatus": {
                "type": ["string", "null"],
                "description": "What its newest call did: its run's status, or the refusal's code in lower case.",
            },
            "secret": {
                "type": "string",
                "pattern": "^hk_[A-Za-z0-9_-]{43}$",
                "description": "In the answer that made it only.",
            },
        },
        optional=("secret",),
        description="A trigger: a prompt run as its owner when a program posts to its URL.",
    ),
    "TriggerList": _object({"triggers": {"type": "array", "items": ref("Trigger")}}),
    "TriggerBody": _object(_FIELDS, optional=tuple(name for name in _FIELDS if name != "prompt"), closed=False),
    "TriggerChange": _object(_FIELDS, optional=tuple(_FIELDS), closed=False, minProperties=1),
    "HookStarted": _object({"runId": _UUID, "conversationId": _UUID, "seq": {"type": "integer", "minimum": 1}}),
}

_REFUSED = answer("A refused field (`field` names it), or a body that is not a JSON object.", "FieldError")
_REFUSED["content"]["application/json"]["schema"] = {"oneOf": [ref("FieldError"), ref("Error")]}
_MISSING = error("No such trigger (someone else's, or an id that is not a UUID, answers the same).")


def _run_error(description: str) -> dict:
    return answer(description, "RunError")


TRIGGER_ROUTES: dict[str, dict[str, dict]] = {
    "api/triggers/": {
        "get": operation(
            "The user's triggers, newest first", {"200": answer("The triggers.", "TriggerList")}, tags=["triggers"]
        ),
        "post": operation(
            "Make a trigger; its secret is in this answer only",
            {
                "201": answer("Made.", "Trigger"),
                "400": _REFUSED,
                "409": error("`too_many_triggers`: the user has `AGENT_MAX_TRIGGERS` triggers."),
            },
            security=WRITE,
            requestBody=body("TriggerBody"),
            tags=["triggers"],
        ),
    },
    "api/triggers/<uuid:trigger_id>/": {
        "get": operation("A trigger", {"200": answer("The trigger.", "Trigger"), "404": _MISSING}, tags=["triggers"]),
        "patch": operation(
            "Change a trigger: any of its fields",
            {"200": answer("Changed.", "Trigger"), "400": _REFUSED, "404": _MISSING},
            security=WRITE,
            requestBody=body("TriggerChange"),
            tags=["triggers"],
        ),
        "delete": operation(
            "Delete a trigger: its URL answers 404 at once; its runs and their conversations stay",
            {"204": answer("Deleted."), "404": _MISSING},
            security=WRITE,
            tags=["triggers"],
        ),
    },
    "api/triggers/<uuid:trigger_id>/runs/": {
        "get": operation(
            "The runs a trigger started, newest first",
            {"200": answer("The runs.", "ScheduleRuns"), "400": _REFUSED, "404": _MISSING},
            parameters=[LIMIT],
            tags=["triggers"],
        )
    },
    "hooks/<uuid:trigger_id>/": {
        "post": operation(
            "Start the trigger's run: the body is the payload; `Authorization: Bearer <secret>` or "
            "`X-Agentsite-Signature: sha256=<hex>` (the HMAC-SHA256 of the body keyed with the secret)",
            {
                "202": answer("Started.", "HookStarted"),
                "400": _run_error("`BAD_REQUEST`: a body that is not UTF-8."),
                "401": _run_error("`NOT_AUTHENTICATED`: no secret, a wrong one, or a signature that does not match."),
                "404": _run_error("`NOT_FOUND`: no such trigger, or it is disabled or its owner deactivated."),
                "409": _run_error("`RUN_IN_PROGRESS` or `AGENT_UNAVAILABLE`, as for a message."),
                "413": _run_error("`TOO_LARGE`: the body, or the filled prompt, is over its limit."),
                "429": _run_error(
                    "`RATE_LIMITED` (the trigger's `AGENT_TRIGGER_RATE_LIMIT`, failed secrets from this address, "
                    "the owner's messages per minute) or `QUOTA_EXCEEDED`."
                ),
            },
            security=OPEN,
            requestBody={"required": False, "content": {"*/*": {"schema": {}}}},
            tags=["triggers"],
        )
    },
}
