"""The OpenAPI descriptions of the Responses API door (docs/protocol.md, "Responses API"): create,
retrieve (whole or as its events), cancel and the input items, with their objects. A module of
its own, in the form of chat.doors.openapi.openapi_routes (which is at its size)."""

from __future__ import annotations

from chat.doors.openapi.openapi_routes import (
    JSON,
    READ,
    RUN_HEADERS,
    STRING_SCHEMA,
    WRITE,
    answer,
    body,
    openai_error,
    operation,
    query,
)
from chat.doors.openapi.openapi_schemas import ref

NOT_FOUND = openai_error("`response_not_found`: no such response (another user's answers the same).")
SCHEMA_OF_RESPONSE = {
    "type": "object",
    "properties": {
        "id": STRING_SCHEMA,
        "object": {"const": "response"},
        "status": {"enum": ["in_progress", "completed", "incomplete", "failed", "cancelled"]},
        "model": STRING_SCHEMA,
        "output": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["id", "object", "created_at", "status", "model", "output", "usage", "error", "conversation"],
}
RESPONSES_SCHEMAS: dict[str, dict] = {
    "Response": {**SCHEMA_OF_RESPONSE, "description": "OpenAI's Response object, rendered from the run's events."},
    "ResponseRequest": {
        "type": "object",
        "properties": {
            "model": {**STRING_SCHEMA, "description": "An agent slug (GET /v1/models)."},
            "input": {"anyOf": [STRING_SCHEMA, {"type": "array", "items": {"type": "object"}}]},
            "stream": {"type": "boolean"},
            "background": {"type": "boolean"},
            "previous_response_id": STRING_SCHEMA,
            "instructions": STRING_SCHEMA,
            "metadata": {"type": "object", "additionalProperties": STRING_SCHEMA},
            "temperature": {"type": "number", "minimum": 0, "maximum": 2},
            "max_output_tokens": {"type": "integer", "minimum": 1, "maximum": 1000000},
        },
        "required": ["model", "input"],
    },
    "ResponseDeleted": {
        "type": "object",
        "properties": {"id": STRING_SCHEMA, "object": {"const": "response.deleted"}, "deleted": {"const": True}},
        "required": ["id", "object", "deleted"],
    },
    "ResponseInputItems": {
        "type": "object",
        "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": {"type": "object"}},
            "first_id": {"type": ["string", "null"]},
            "last_id": {"type": ["string", "null"]},
            "has_more": {"type": "boolean"},
        },
        "required": ["object", "data", "first_id", "last_id", "has_more"],
    },
}
RESPONSE_OR_EVENTS = {
    "description": "The Response, or with `stream` a `text/event-stream` of its events.",
    "content": {JSON: {"schema": ref("Response")}, "text/event-stream": {"schema": STRING_SCHEMA}},
}

RESPONSES_ROUTES: dict[str, dict[str, dict]] = {
    "v1/responses": {
        "post": operation(
            "Responses API: run an agent; a new conversation, or one continued by `previous_response_id`",
            {
                "200": {
                    **RESPONSE_OR_EVENTS,
                    "headers": {k: {"schema": STRING_SCHEMA, "description": v} for k, v in RUN_HEADERS.items()},
                },
                "400": openai_error(
                    "`invalid_request`, `invalid_input`, `previous_response_not_found`, `model_mismatch`, "
                    "`tools_not_supported`, `unsupported_parameter`, `context_length_exceeded`; `param` names it."
                ),
                "404": openai_error("`model_not_found` or `conversation_not_found`."),
                "409": openai_error("`run_in_progress`: the conversation's run works."),
                "413": openai_error("`request_too_large`."),
                "429": openai_error("`rate_limit_exceeded` or `insufficient_quota`."),
                "503": openai_error("`service_unavailable`: no database."),
            },
            security=WRITE,
            openai=True,
            requestBody=body("ResponseRequest"),
            tags=["openai"],
        )
    },
    "v1/responses/<str:response_id>": {
        "get": operation(
            "Responses API: a response as the log has it now, or its events (from `starting_after`)",
            {"200": RESPONSE_OR_EVENTS, "404": NOT_FOUND},
            security=READ,
            openai=True,
            parameters=[
                query("stream", "`true`: its events from the log, then live.", {"enum": ["true", "false"]}),
                query("starting_after", "Only the events after this sequence_number.", {"type": "integer"}),
            ],
            tags=["openai"],
        ),
        "delete": operation(
            "Responses API: delete the conversation that holds the response, every response of it with it",
            {"200": answer("Deleted.", "ResponseDeleted"), "404": NOT_FOUND},
            security=WRITE,
            openai=True,
            tags=["openai"],
        ),
    },
    "v1/responses/<str:response_id>/cancel": {
        "post": operation(
            "Responses API: cancel a response in progress (waits up to 10 s for its end)",
            {
                "200": answer("The Response.", "Response"),
                "400": openai_error("`not_cancellable`: it ended otherwise."),
                "404": NOT_FOUND,
            },
            security=WRITE,
            openai=True,
            tags=["openai"],
        )
    },
    "v1/responses/<str:response_id>/input_items": {
        "get": operation(
            "Responses API: the input of a response, as recorded",
            {
                "200": answer("A page of input items.", "ResponseInputItems"),
                "400": openai_error("`invalid_request`: a bad `order` or `limit`."),
                "404": NOT_FOUND,
            },
            security=READ,
            openai=True,
            parameters=[
                query("order", "`asc` or `desc` (the default).", {"enum": ["asc", "desc"]}),
                query("limit", "1 to 100 (default 20).", {"type": "integer", "minimum": 1, "maximum": 100}),
                query("after", "An item id: the items after it.", STRING_SCHEMA),
            ],
            tags=["openai"],
        )
    },
}
