"""The JSON Schemas of the objects the HTTP API answers with (docs/protocol.md, "OpenAPI"), the
`components` of the OpenAPI document. Written from the views' own `*_json` functions; the shapes
that the server owns exactly are closed (`additionalProperties: false`) so that tests/doors/openapi/test_openapi.py
notices a field added to an answer and not here; the event frames and the trace stay open, as
the protocol promises new fields there, and so do the request bodies (REQUEST_BODIES)."""

from __future__ import annotations

from chat.accounts.tokens import EXPIRY_DAYS_MAX, NAME_MAX
from chat.conversations.services import FEEDBACK_COMMENT_MAX, TITLE_MAX
from chat.sharing.links import EXPIRY_DAYS_MAX as SHARE_EXPIRY_DAYS_MAX

TITLE_SOURCE = {
    "enum": ["default", "generated", "user"],
    "description": "Who titled it: nobody yet (its first message stands in), its model, or its owner.",
}


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


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


def _list_of(key: str, item: str) -> dict:
    return _object({key: {"type": "array", "items": ref(item)}})


STRING = {"type": "string"}
TIME = {"type": "string", "format": "date-time"}
TIME_OR_NULL = {"type": ["string", "null"], "format": "date-time"}
UUID = {"type": "string", "format": "uuid"}
COUNT = {"type": "integer", "minimum": 0}
NULLABLE_STRING = {"type": ["string", "null"]}
# A run in the trace: its parent run and call, how deep it nests (docs/protocol.md, "Sub-agents").
_LINEAGE = {"parentRunId": {**NULLABLE_STRING, "format": "uuid"}, "parentToolCallId": NULLABLE_STRING, "depth": COUNT}

_TOKEN_COUNTS = _object({"promptTokens": COUNT, "completionTokens": COUNT, "totalTokens": COUNT})
_TOKEN_FIELDS = {
    "id": {"type": "integer"},
    "name": {"type": "string", "minLength": 1, "maxLength": NAME_MAX},
    "hint": {"type": "string", "description": "The value's first 7 characters, to tell tokens apart."},
    "createdAt": TIME,
    "expiresAt": TIME_OR_NULL,
    "lastUsedAt": TIME_OR_NULL,
    "budget": {"oneOf": [ref("TokenBudget"), {"type": "null"}], "description": "Its budget (docs: Budgets)."},
}

SCHEMAS: dict[str, dict] = {
    "Error": _object(
        {
            "error": {"type": "string", "description": "A stable code to branch on (`not_found`, `bad_request`, ...)."},
            "message": {"type": "string", "description": "Text for people."},
        },
        description='Every error body: `{"error": "<code>", "message": "<text>"}`.',
    ),
    "Conversation": _object(
        {
            "id": UUID,
            "title": {"type": "string", "maxLength": TITLE_MAX},
            "titleSource": TITLE_SOURCE,
            "pinned": {"type": "boolean", "description": "Listed first."},
            "archived": {"type": "boolean", "description": "Left out of the list unless `archived=1`."},
            "agent": {"type": "string", "description": "The slug of the agent its next run uses."},
            "created_at": TIME,
            "updated_at": TIME,
            "running": {"type": "boolean"},
            "viewed_seq": {"type": ["integer", "null"], "description": "The version its owner views; null: newest."},
            "snippet": {"type": "string", "description": "A search hit only: plain text around the match."},
            "source": {
                "enum": ["api", "schedule", "trigger"],
                "description": "Started by the OpenAI-compatible endpoint, a schedule or a trigger.",
            },
            "scheduleId": {**UUID, "description": "The schedule that started it, while it exists."},
            "triggerId": {**UUID, "description": "The trigger that started it, while it exists."},
        },
        optional=("snippet", "source", "scheduleId", "triggerId"),
    ),
    "ConversationPage": _object(
        {
            "conversations": {"type": "array", "items": ref("Conversation")},
            "next": {"type": ["string", "null"], "description": "The cursor for `before`; null on the last page."},
        }
    ),
    "ConversationCreate": _object(
        {"title": {"type": "string", "maxLength": TITLE_MAX}, "agent": STRING}, optional=("title", "agent")
    ),
    "ConversationChange": _object(
        {
            "title": {"type": "string", "maxLength": TITLE_MAX},
            "agent": STRING,
            "viewed_seq": {"type": ["integer", "null"], "minimum": 1},
            "pinned": {"type": "boolean"},
            "archived": {"type": "boolean"},
        },
        optional=("title", "agent", "viewed_seq", "pinned", "archived"),
        minProperties=1,
    ),
    # Loose on purpose: each event type has its own fields (docs/protocol.md, "Events").
    "EventFrame": _object(
        {
            "type": STRING,
            "seq": {"type": "integer", "minimum": 1},
            "runId": UUID,
            "ts": TIME,
            "parentRunId": {**UUID, "description": "A child run's event: the run whose delegate call started it."},
            "parentToolCallId": {**STRING, "description": "A child run's event: the toolCallId of that call."},
        },
        optional=("runId", "ts", "parentRunId", "parentToolCallId"),
        closed=False,
        description="An event frame exactly as the WebSocket sends it, plus `ts` when stored "
        '(docs/protocol.md, "Sub-agents" for parentRunId and parentToolCallId).',
    ),
    "EventList": _list_of("events", "EventFrame"),
    "Export": _object(
        {
            "conversation": _object(
                {
                    "id": UUID,
                    "title": STRING,
                    "titleSource": TITLE_SOURCE,
                    "pinned": {"type": "boolean"},
                    "archived": {"type": "boolean"},
                    "created_at": TIME,
                    "updated_at": TIME,
                },
                optional=("titleSource", "pinned", "archived"),  # an older export has none
            ),
            "events": {"type": "array", "items": ref("EventFrame")},
        }
    ),
    "ExportAll": _object(
        {"conversations": {"type": "array", "items": ref("Export")}},
        description="Every conversation of a user (GET /api/conversations/export/).",
    ),
    "ImportFile": {"oneOf": [ref("Export"), ref("ExportAll")], "description": "One export, or an export of all."},
    "Imported": {
        "oneOf": [ref("Conversation"), _list_of("conversations", "Conversation")],
        "description": "The new conversation; for an export of all, every new one, in the file's order.",
    },
    "AccountDelete": _object(
        {
            "password": {"type": "string", "description": "The account's password."},
            "username": {"type": "string", "description": "Instead, for an account without a password to type."},
        },
        optional=("password", "username"),
        minProperties=1,
    ),
    "StoredFile": _object(
        {
            "path": STRING,
            "size": COUNT,
            "textPath": STRING,
            "image": _object(
                {"format": STRING, "width": COUNT, "height": COUNT, "animated": {"type": "boolean"}},
                optional=("animated",),
                description="The file is an image, known by its content (docs/protocol.md, Images).",
            ),
        },
        optional=("textPath", "image"),
        description="An uploaded file.",
    ),
    "WorkspaceFile": _object({"path": STRING, "size": COUNT, "modified": TIME}),
    "FileList": _list_of("files", "WorkspaceFile"),
    "Upload": _object(
        {"file": {"type": "string", "contentMediaType": "application/octet-stream"}, "path": STRING},
        optional=("path",),
    ),
    "Feedback": _object({"runId": UUID, "rating": {"enum": [1, -1]}, "comment": STRING, "updatedAt": TIME}),
    "FeedbackSet": _object(
        {"rating": {"enum": [1, -1]}, "comment": {"type": ["string", "null"], "maxLength": FEEDBACK_COMMENT_MAX}},
        optional=("comment",),
    ),
    "FeedbackList": _list_of("feedback", "Feedback"),
    "Agent": _object(
        {
            "slug": STRING,
            "name": STRING,
            "description": STRING,
            "model": STRING,
            "vision": {"type": "boolean", "description": "Its model accepts images (docs/protocol.md, Images)."},
            "delegates": {
                "type": "array",
                "items": STRING,
                "description": "The slugs of its delegates the requesting user may use (docs/protocol.md, Sub-agents).",
            },
        }
    ),
    "AgentList": _list_of("agents", "Agent"),
    "TokenCounts": _TOKEN_COUNTS,
    "Token": _object(_TOKEN_FIELDS, description="A personal API token, without its value."),
    "NewToken": _object(
        {**_TOKEN_FIELDS, "token": {"type": "string", "pattern": "^as_[A-Za-z0-9_-]{43}$"}},
        description="A token just made: its value `token` is in this answer only.",
    ),
    "TokenCreate": _object(
        {
            "name": {"type": "string", "minLength": 1, "maxLength": NAME_MAX},
            "expiresInDays": {"type": ["integer", "null"], "minimum": 1, "maximum": EXPIRY_DAYS_MAX},
            "budget": {"oneOf": [ref("TokenBudgetSet"), {"type": "null"}]},
        },
        optional=("expiresInDays", "budget"),
    ),
    "TokenList": _list_of("tokens", "Token"),
    "Share": _object(
        {
            "id": {"type": "integer"},
            "url": {"type": ["string", "null"], "pattern": "^/s/sh_[A-Za-z0-9_-]{43}/$"},
            "hint": STRING,
            "createdAt": TIME,
            "expiresAt": TIME_OR_NULL,
            "upToSeq": COUNT,
            "leafSeq": {"type": "integer", "description": "The last turn of the branch shared (a user_message's seq)."},
            "title": {"type": "string", "description": "The conversation's title when the link was made."},
            "active": {"type": "boolean"},
        },
        description="A shared link; `url` only in the answer that made it (its token is not stored).",
    ),
    "ShareCreate": _object(
        {
            "expiresInDays": {"type": ["integer", "null"], "minimum": 1, "maximum": SHARE_EXPIRY_DAYS_MAX},
            "leafSeq": {
                "type": ["integer", "null"],
                "minimum": 1,
                "description": "The last turn of the branch the owner looks at; absent: the one the chat page shows.",
            },
        },
        optional=("expiresInDays", "leafSeq"),
    ),
    "ShareList": _list_of("shares", "Share"),
    # Runs over HTTP (docs/protocol.md, "Runs over HTTP"): the frames' bodies and codes.
    "RunError": _object(
        {
            "error": _object(
                {
                    "code": {"type": "string", "description": "The error frame's code (`RUN_IN_PROGRESS`, ...)."},
                    "message": {"type": "string", "description": "Text for people."},
                    "detail": {"type": "string", "description": "A short technical reason."},
                    "retryAfter": {"type": "integer", "minimum": 1, "description": "`QUOTA_EXCEEDED`: seconds."},
                    "resetsAt": {"type": "string", "format": "date-time"},
                    "budget": {**ref("Budget"), "description": "`QUOTA_EXCEEDED`: the refusing budget."},
                },
                optional=("detail", "retryAfter", "resetsAt", "budget"),
            )
        },
        description='The run endpoints\' refusals: `{"error": {"code", "message", "detail"?}}`.',
    ),
    "MessageBody": _object(
        {
            "content": {
                "type": "string",
                "description": "The message; empty only when `attachments` names a file (files alone are a message).",
            },
            "parentSeq": {"type": ["integer", "null"], "minimum": 1},
            "attachments": {"type": ["array", "null"], "items": {"type": "string"}},
            "whileRunning": {
                "enum": ["queue", "steer", None],
                "description": '`"queue"`: while the conversation\'s run works, the message waits and starts '
                'by itself after it; `"steer"`: the run takes it in before its next model call (text only).',
            },
        },
        optional=("parentSeq", "attachments", "whileRunning"),
        description="The body of a `message` frame, without its `type`.",
    ),
    "RunStarted": {
        "oneOf": [
            _object({"status": {"const": "started"}, "runId": UUID, "seq": {"type": "integer", "minimum": 1}}),
            _object({"status": {"const": "queued"}, "queueId": UUID, "seq": {"type": "integer", "minimum": 1}}),
            _object(
                {
                    "status": {"const": "steered"},
                    "queueId": UUID,
                    "runId": UUID,
                    "seq": {"type": "integer", "minimum": 1},
                }
            ),
        ]
    },
    "CancelBody": _object({"clearQueue": {"type": ["boolean", "null"]}}, optional=("clearQueue",)),
    "CompactBody": _object({"seq": {"type": ["integer", "null"], "minimum": 1}}, optional=("seq",)),
    "CompactAnswer": _object({"runId": UUID}),
    "CancelAnswer": _object({"cancelled": {"type": "boolean"}, "cleared": {"type": "integer", "minimum": 0}}),
    "Queue": _object(
        {
            "queue": {
                "type": "array",
                "items": _object(
                    {
                        "queueId": UUID,
                        "content": STRING,
                        "attachments": {"type": "array", "items": {"type": "object"}},
                        "steered": {"type": "boolean"},
                        "createdAt": {"type": "string", "format": "date-time"},
                    }
                ),
            },
            "steers": {
                "type": "array",
                "items": _object(
                    {
                        "queueId": UUID,
                        "content": STRING,
                        "runId": UUID,
                        "createdAt": {"type": "string", "format": "date-time"},
                    }
                ),
            },
        }
    ),
    "ApprovalBody": _object(
        {
            "toolCallId": {"type": "string", "minLength": 1},
            "decision": {"enum": ["approve", "deny"]},
            "reason": {"type": ["string", "null"], "maxLength": 1000},
        },
        optional=("reason",),
    ),
    "ApprovalAnswer": _object({"toolCallId": STRING, "decision": {"enum": ["approved", "denied"]}}),
    # Loose: the inspector's data grows with it (docs/protocol.md, "Run trace").
    "Trace": _object(
        {
            "run": {"type": "object", "properties": {"id": UUID, "conversationId": UUID, "status": STRING, **_LINEAGE}},
            "modelCalls": {"type": "array", "items": {"type": "object"}},
            "toolCalls": {"type": "array", "items": {"type": "object"}},
            "events": {"type": "array", "items": ref("EventFrame")},
            "children": {"type": "array", "items": ref("TraceChild"), "description": "Its child runs (Sub-agents)."},
        },
        optional=("children",),
        closed=False,
    ),
    "TraceChild": _object(
        {"id": UUID, "agent": NULLABLE_STRING, "status": STRING, "parentToolCallId": STRING, "startedAt": TIME}
        | {"durationMs": {"type": ["integer", "null"], "minimum": 0}, "usage": _TOKEN_COUNTS}
    ),
    "Health": _object(
        {"status": {"enum": ["ok", "error"]}, "database": STRING, "event_writer": STRING, "channel_layer": STRING},
        description='Each check is `"ok"` or `"error: <exception class>"`.',
    ),
    "OpenAIError": _object(
        {
            "error": _object(
                {"message": STRING, "type": STRING, "param": {"type": ["string", "null"]}, "code": STRING},
                optional=("param",),
            )
        },
        description="An error of /v1/ in OpenAI's shape.",
    ),
    "ModelList": _object(
        {
            "object": {"const": "list"},
            "data": {
                "type": "array",
                "items": _object(
                    {"id": STRING, "object": {"const": "model"}, "created": {"type": "integer"}, "owned_by": STRING}
                ),
            },
        }
    ),
    # OpenAI's request: fields this endpoint does not read are accepted and ignored.
    "ChatCompletionRequest": _object(
        {
            "model": STRING,
            "messages": {
                "type": "array",
                "minItems": 1,
                "items": {"type": "object"},
                "description": "OpenAI's messages; a user's `content` may hold `image_url` parts with base64 "
                "`data:` URLs (docs/protocol.md, OpenAI-compatible endpoint).",
            },
            "stream": {"type": "boolean"},
            "stream_options": {"type": "object", "properties": {"include_usage": {"type": "boolean"}}},
            "temperature": {"type": "number"},
            "max_tokens": {"type": "integer"},
        },
        optional=("stream", "stream_options", "temperature", "max_tokens"),
        closed=False,
    ),
    "ChatCompletion": _object(
        {
            "id": STRING,
            "object": {"enum": ["chat.completion", "chat.completion.chunk"]},
            "created": {"type": "integer"},
            "model": STRING,
            "choices": {"type": "array", "items": {"type": "object"}},
            "usage": _object({"prompt_tokens": COUNT, "completion_tokens": COUNT, "total_tokens": COUNT}),
        },
        optional=("usage",),
        closed=False,
        description="A `chat.completion` (or, streamed, each `chat.completion.chunk`).",
    ),
    "OpenAPI": {"type": "object", "description": "This document.", "required": ["openapi", "paths"]},
}

# The request bodies are open: the server reads the fields it knows and ignores the others (a
# client newer than the server must still work), so a body with extra fields is valid input.
REQUEST_BODIES = (
    "ConversationCreate",
    "ConversationChange",
    "Export",
    "Upload",
    "FeedbackSet",
    "MessageBody",
    "CancelBody",
    "CompactBody",
    "ApprovalBody",
    "TokenCreate",
    "ShareCreate",
    "ChatCompletionRequest",
    "ExportAll",
    "AccountDelete",
)
for _name in REQUEST_BODIES:
    SCHEMAS[_name].pop("additionalProperties", None)

SECURITY_SCHEMES = {
    "sessionCookie": {
        "type": "apiKey",
        "in": "cookie",
        "name": "sessionid",
        "description": "A signed-in browser session (docs/protocol.md, the accounts table).",
    },
    "csrfToken": {
        "type": "apiKey",
        "in": "header",
        "name": "X-CSRFToken",
        "description": "With the session, on POST, PATCH and DELETE: the value of the `csrftoken` cookie.",
    },
    "bearerAuth": {
        "type": "http",
        "scheme": "bearer",
        "description": "A personal API token (`as_...`, made by POST /api/tokens/); no CSRF header needed.",
    },
}
