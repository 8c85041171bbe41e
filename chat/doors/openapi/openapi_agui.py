"""The OpenAPI descriptions of the AG-UI door (docs/protocol.md, "AG-UI"): the agent's
capabilities, a run (a message or a `resume`) and `connect`, both answered with AG-UI 1.0's
event stream. A module of its own, in the form of chat.doors.openapi.openapi_responses."""

from __future__ import annotations

from chat.doors.openapi.openapi_routes import JSON, READ, RUN_HEADERS, STRING_SCHEMA, WRITE, answer, body, operation
from chat.doors.openapi.openapi_schemas import ref

ID_SCHEMA = {"type": "string", "minLength": 1, "maxLength": 200}
AGUI_SCHEMAS: dict[str, dict] = {
    "AgentCapabilities": {
        "type": "object",
        "description": "AG-UI 1.0's AgentCapabilities of the agent (camelCase).",
        "properties": {
            "identity": {"type": "object"},
            "transport": {"type": "object"},
            "tools": {"type": "object"},
            "reasoning": {"type": "object"},
            "humanInTheLoop": {"type": "object"},
            "multimodal": {"type": "object"},
            "execution": {"type": "object"},
            "state": {"type": "object"},
        },
        "required": ["identity", "transport", "tools", "humanInTheLoop"],
    },
    "RunAgentInput": {
        "type": "object",
        "description": "AG-UI 1.0's RunAgentInput, as @ag-ui/client's HttpAgent posts it.",
        "properties": {
            "threadId": {**ID_SCHEMA, "description": "A conversation id of the user, or an id the client made up."},
            "runId": ID_SCHEMA,
            "messages": {"type": "array", "items": {"type": "object"}},
            "context": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"description": STRING_SCHEMA, "value": STRING_SCHEMA},
                    "required": ["description", "value"],
                },
            },
            "resume": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "interruptId": STRING_SCHEMA,
                        "status": {"enum": ["resolved", "cancelled"]},
                        "payload": {},
                    },
                    "required": ["interruptId", "status"],
                },
            },
            "tools": {"type": "array", "description": "Ignored: the agent runs its own tools."},
            "state": {},
            "forwardedProps": {},
            "parentRunId": STRING_SCHEMA,
            "protocolVersion": STRING_SCHEMA,
        },
        "required": ["threadId", "runId", "messages"],
    },
}
EVENTS = {
    "description": "AG-UI 1.0 events as server-sent events (`data: <json>`), RUN_STARTED first, RUN_FINISHED "
    "(with its outcome: success, interrupt or cancelled) or RUN_ERROR last.",
    "content": {"text/event-stream": {"schema": STRING_SCHEMA}},
    "headers": {k: {"schema": STRING_SCHEMA, "description": v} for k, v in RUN_HEADERS.items()},
}
# No token is answered here in section 10's shape; a bad token by the bearer check before the view.
UNAUTHENTICATED = {
    "description": "`NOT_AUTHENTICATED`: no session and no bearer token, or a bad token (`WWW-Authenticate`).",
    "content": {JSON: {"schema": {"anyOf": [ref("RunError"), ref("Error")]}}},
}


def _refusals(not_found: str) -> dict:
    return {
        "401": UNAUTHENTICATED,
        "400": answer(
            "`BAD_REQUEST`: not a RunAgentInput, no user message last, a resume that matches nothing.", "RunError"
        ),
        "404": answer(not_found, "RunError"),
        "409": answer("`RUN_IN_PROGRESS`, `AGENT_MISMATCH`, `AGENT_UNAVAILABLE` or `ALREADY_ANSWERED`.", "RunError"),
        "413": answer("`TOO_LARGE`.", "RunError"),
        "429": answer("`RATE_LIMITED` (also too many open streams) or `QUOTA_EXCEEDED`.", "RunError"),
        "503": answer("`UNAVAILABLE`: the database did not answer.", "RunError"),
    }


AGUI_ROUTES: dict[str, dict[str, dict]] = {
    "api/agui/<str:slug>/": {
        "get": operation(
            "AG-UI: the agent's capabilities",
            {
                "200": answer("AgentCapabilities.", "AgentCapabilities"),
                "401": UNAUTHENTICATED,
                "404": answer("`NOT_FOUND`: no such agent, or not one open to the user.", "RunError"),
            },
            security=READ,
            tags=["agui"],
        ),
        "post": operation(
            "AG-UI: run the agent on a thread (a message), or answer its interrupts (`resume`)",
            {"200": EVENTS, **_refusals("`NOT_FOUND`: no such agent, or another user's conversation as threadId.")},
            security=WRITE,
            requestBody=body("RunAgentInput"),
            tags=["agui"],
        ),
    },
    "api/agui/<str:slug>/connect/": {
        "post": operation(
            "AG-UI: reconnect to a thread: a snapshot of it, then the live rest of its running run",
            {"200": EVENTS, **_refusals("`NOT_FOUND`: no such thread of the user.")},
            security=WRITE,
            requestBody=body("RunAgentInput"),
            tags=["agui"],
        )
    },
}
