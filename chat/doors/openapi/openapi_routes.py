"""What each HTTP route does, in OpenAPI terms (docs/protocol.md, "OpenAPI"): keyed by the route
exactly as chat/urls.py writes it, then by method. The paths and their parameters come from the
route table itself (chat.doors.openapi.openapi); this table says only what the table cannot: methods,
bodies, answers. A route of the table with no entry here, or an entry with no route, is an error
of the document, not a route left out."""

from __future__ import annotations

from chat.doors.openapi.openapi_schemas import ref

JSON = "application/json"
STRING_SCHEMA = {"type": "string"}

# Who may call: the session (with CSRF on unsafe methods) or a bearer token; none for open routes.
READ = [{"sessionCookie": []}, {"bearerAuth": []}]
WRITE = [{"sessionCookie": [], "csrfToken": []}, {"bearerAuth": []}]
SESSION_WRITE = [{"sessionCookie": [], "csrfToken": []}]
OPEN: list = []


def answer(description: str, schema: str | None = None, *, media: str = JSON, headers: dict | None = None) -> dict:
    out: dict = {"description": description}
    if schema is not None:
        out["content"] = {media: {"schema": ref(schema)}}
    if headers:
        out["headers"] = {name: {"schema": {"type": "string"}, "description": text} for name, text in headers.items()}
    return out


def error(description: str) -> dict:
    return answer(description, "Error")


def query(name: str, description: str, schema: dict | None = None) -> dict:
    return {"name": name, "in": "query", "required": False, "description": description, "schema": schema or {}}


def body(schema: str, *, media: str = JSON, required: bool = True) -> dict:
    return {"required": required, "content": {media: {"schema": ref(schema)}}}


def openai_error(description: str) -> dict:
    return answer(description, "OpenAIError")


RUN_HEADERS = {"X-Agentsite-Conversation": "The call's conversation.", "X-Agentsite-Run": "The call's run."}
UNAUTHENTICATED = error("Not signed in (or a bad bearer token, with `WWW-Authenticate`).")
CSRF_REFUSED = error("`csrf_failed`: a session request without its `X-CSRFToken` header.")
OPENAI_CSRF_REFUSED = answer("`csrf_failed`: a session request without its `X-CSRFToken` header.", "OpenAIError")
THROTTLED = error("`rate_limited`: too many failed token attempts lately, from this address or at this token.")
OPENAI_UNAUTHENTICATED = answer("`invalid_api_key`: no token, or a bad one.", "OpenAIError")
OPENAI_THROTTLED = answer(
    "`rate_limit_exceeded`: too many failed token attempts, from this address or at this token.", "OpenAIError"
)
BAD_REQUEST = error("The body or a query parameter is refused; `message` says why.")
NO_CONVERSATION = error("No such conversation (someone else's answers the same).")
NO_RUN = error("No such run.")
TOO_LARGE = error("Over the size limit; nothing is stored.")
LIMIT = query(
    "limit", "At most this many (default 50; more than 200 is cut to 200).", {"type": "integer", "minimum": 1}
)
BEFORE = query("before", "The `next` cursor of the previous page.", {"type": "string"})


def operation(summary: str, responses: dict, *, security: list = READ, openai: bool = False, **more) -> dict:
    """One method of a route. Every route that takes credentials may answer 401 (signed out, a bad
    token) and 429 (too many failed token attempts), so they are added here
    rather than repeated, in OpenAI's shape on `/v1/`; open routes (security OPEN) get neither.
    A route's own 429 (its rate limit) describes both."""
    if security is not OPEN:
        shared = (OPENAI_UNAUTHENTICATED, OPENAI_THROTTLED) if openai else (UNAUTHENTICATED, THROTTLED)
        responses = {"401": shared[0], "429": shared[1], **responses}
    if any("csrfToken" in scheme for scheme in security):
        responses = {"403": OPENAI_CSRF_REFUSED if openai else CSRF_REFUSED, **responses}
    return {"summary": summary, "security": security, "responses": _or_plain_error(responses), **more}


def _or_plain_error(responses: dict) -> dict:
    """The run endpoints answer their own refusals as RunError, but a 404 of a path no route
    matches (an id that is not a UUID) and a 429 of the token throttle come before the view, in
    the plain Error shape (chat.doors.errors, chat.accounts.bearer): those answers may be either."""
    out = dict(responses)
    for status in ("404", "429"):
        content = out.get(status, {}).get("content", {}).get(JSON)
        if content is not None and content["schema"] == ref("RunError"):
            either = {"anyOf": [ref("RunError"), ref("Error")]}
            out[status] = {**out[status], "content": {JSON: {"schema": either}}}
    return out


# A new route: an entry keyed by its route exactly as chat/urls.py writes it, converters and all
# (an included one with its prefix: `v1/models`), one operation per method its view takes (lower
# case), and any new object in openapi_schemas.SCHEMAS.
ROUTES: dict[str, dict[str, dict]] = {
    "healthz": {
        "get": operation(
            "Health: the database, the event writer and the channel layer",
            {"200": answer("Every check passed.", "Health"), "503": answer("A check failed.", "Health")},
            security=OPEN,
            tags=["health"],
        )
    },
    "api/schema/": {
        "get": operation(
            "This OpenAPI 3.1 document",
            {"200": answer("The document.", "OpenAPI")},
            security=OPEN,
            tags=["meta"],
        )
    },
    "api/conversations/": {
        "get": operation(
            "The user's conversations, pinned first, then most recently updated first, paged; with `q`, a search",
            {"200": answer("A page.", "ConversationPage"), "400": BAD_REQUEST},
            parameters=[
                LIMIT,
                BEFORE,
                query("q", "Search words (at most 200 characters).", {"type": "string"}),
                query(
                    "archived",
                    "1: the archived conversations alone; 0 (the default): every other one.",
                    {"enum": ["0", "1", "false", "true"]},
                ),
            ],
            tags=["conversations"],
        ),
        "post": operation(
            "Create a conversation",
            {"201": answer("Created.", "Conversation"), "400": BAD_REQUEST, "404": error("No such agent.")},
            security=WRITE,
            requestBody=body("ConversationCreate", required=False),
            tags=["conversations"],
        ),
    },
    "api/conversations/import/": {
        "post": operation(
            "Import an export's JSON as a new conversation (an export of all: as many, all or none)",
            {"201": answer("Created.", "Imported"), "400": BAD_REQUEST, "413": TOO_LARGE},
            security=WRITE,
            requestBody=body("ImportFile"),
            tags=["export"],
        )
    },
    "api/conversations/<uuid:conversation_id>/": {
        "get": operation(
            "One conversation",
            {"200": answer("The conversation.", "Conversation"), "404": NO_CONVERSATION},
            tags=["conversations"],
        ),
        "patch": operation(
            "Rename it, change its agent or the version viewed, pin or archive it",
            {
                "200": answer("Changed.", "Conversation"),
                "400": BAD_REQUEST,
                "404": error("No such conversation, or no such agent."),
            },
            security=WRITE,
            requestBody=body("ConversationChange"),
            tags=["conversations"],
        ),
        "delete": operation(
            "Delete it, with its runs, events and files",
            {"204": answer("Deleted."), "404": NO_CONVERSATION},
            security=WRITE,
            tags=["conversations"],
        ),
    },
    "api/conversations/<uuid:conversation_id>/events/": {
        "get": operation(
            "Every stored event after `after`, in seq order",
            {"200": answer("The events.", "EventList"), "400": BAD_REQUEST, "404": NO_CONVERSATION},
            parameters=[query("after", "Only events with a greater seq (default 0).", {"type": "integer"})],
            tags=["conversations"],
        )
    },
    "api/conversations/<uuid:conversation_id>/files/": {
        "get": operation(
            "The files of the conversation's workspace",
            {"200": answer("The files.", "FileList"), "404": NO_CONVERSATION},
            tags=["files"],
        ),
        "post": operation(
            "Upload a file into the workspace (replacing one of the same path)",
            {
                "201": answer("Stored.", "StoredFile"),
                "400": BAD_REQUEST,
                "404": NO_CONVERSATION,
                "413": TOO_LARGE,
            },
            security=WRITE,
            requestBody=body("Upload", media="multipart/form-data"),
            tags=["files"],
        ),
    },
    "api/conversations/<uuid:conversation_id>/files/<path:path>": {
        "get": operation(
            "Download a file (always an attachment, never rendered)",
            {
                "200": {
                    "description": "The file.",
                    "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
                },
                "400": BAD_REQUEST,
                "404": error("No such conversation or file."),
            },
            tags=["files"],
        ),
        "delete": operation(
            "Delete a file (a PDF's extracted text with it)",
            {"204": answer("Deleted."), "400": BAD_REQUEST, "404": error("No such conversation or file.")},
            security=WRITE,
            tags=["files"],
        ),
    },
    "api/conversations/<uuid:conversation_id>/export/": {
        "get": operation(
            "Export the conversation: lossless JSON or a Markdown transcript, as a download",
            {
                "200": {
                    "description": "The download (`Content-Disposition: attachment`).",
                    "content": {
                        JSON: {"schema": ref("Export")},
                        "text/markdown": {"schema": {"type": "string"}},
                    },
                },
                "400": BAD_REQUEST,
                "404": NO_CONVERSATION,
            },
            parameters=[query("format", "`json` (the default) or `markdown`.", {"enum": ["json", "markdown"]})],
            tags=["export"],
        )
    },
    "api/conversations/<uuid:conversation_id>/feedback/": {
        "get": operation(
            "The ratings given in the conversation",
            {"200": answer("The ratings.", "FeedbackList"), "404": NO_CONVERSATION},
            tags=["feedback"],
        )
    },
    "api/runs/<uuid:run_id>/feedback/": {
        "post": operation(
            "Rate a finished run's answer (posting again replaces it)",
            {
                "200": answer("Stored.", "Feedback"),
                "400": BAD_REQUEST,
                "404": NO_RUN,
                "409": error("The run is still in progress (`run_in_progress`)."),
            },
            security=WRITE,
            requestBody=body("FeedbackSet"),
            tags=["feedback"],
        )
    },
    "api/runs/<uuid:run_id>/trace/": {
        "get": operation(
            "A run's trace, for the run inspector (staff only)",
            {"200": answer("The trace.", "Trace"), "404": error("No such run, or not staff.")},
            tags=["inspector"],
        )
    },
    "api/agents/": {
        "get": operation(
            "The agents the user may pick, `default` first",
            {"200": answer("The agents.", "AgentList")},
            tags=["agents"],
        )
    },
    "api/conversations/<uuid:conversation_id>/messages/": {
        "post": operation(
            "Start a run with a message, as the WebSocket's `message` frame does",
            {
                "202": answer(
                    "`started`: the run and the seq of its `user_message`; `queued`: the queueId and the seq "
                    "of its `queued` event; `steered`: the queueId, the run it steers and the seq of its "
                    "`steer` event.",
                    "RunStarted",
                ),
                "400": answer("`BAD_REQUEST`.", "RunError"),
                "404": answer("`NOT_FOUND`: no such conversation (someone else's answers the same).", "RunError"),
                "409": answer("`RUN_IN_PROGRESS`, `AGENT_UNAVAILABLE` or `QUEUE_FULL`.", "RunError"),
                "413": answer("`TOO_LARGE`.", "RunError"),
                "429": answer("`RATE_LIMITED` or `QUOTA_EXCEEDED`.", "RunError"),
                "503": answer("`UNAVAILABLE`: the database did not answer.", "RunError"),
            },
            security=WRITE,
            requestBody=body("MessageBody"),
            tags=["runs"],
        )
    },
    "api/conversations/<uuid:conversation_id>/cancel/": {
        "post": operation(
            "Cancel the conversation's run in progress",
            {
                "202": answer(
                    "Asked; `cancelled` says whether a run was in progress, `cleared` how many waiting "
                    "messages `clearQueue` withdrew.",
                    "CancelAnswer",
                ),
                "400": answer("`BAD_REQUEST`: a clearQueue that is not a boolean.", "RunError"),
                "404": answer("`NOT_FOUND`.", "RunError"),
                "503": answer("`UNAVAILABLE`.", "RunError"),
            },
            security=WRITE,
            requestBody=body("CancelBody", required=False),
            tags=["runs"],
        )
    },
    "api/conversations/<uuid:conversation_id>/stream/": {
        "get": operation(
            "The conversation's events as server-sent events: the stored ones after `after`, `sync`, then live",
            {
                "200": {
                    "description": "`id: <seq>`, `event: <type>`, `data: <frame JSON>` per event; one `sync` event.",
                    "content": {"text/event-stream": {"schema": {"type": "string"}}},
                },
                "404": answer("`NOT_FOUND`.", "RunError"),
            },
            parameters=[
                query(
                    "after", "Only events with a greater seq (default 0; `Last-Event-ID` wins).", {"type": "integer"}
                ),
                query(
                    "until", "`complete`: end after the first `complete` event past `after`.", {"enum": ["complete"]}
                ),
            ],
            tags=["runs"],
        )
    },
    "api/runs/<uuid:run_id>/approval/": {
        "post": operation(
            "Answer one of the run's approval requests, as the `approve` frame does",
            {
                "202": answer("Answered.", "ApprovalAnswer"),
                "400": answer("`BAD_REQUEST` (also a toolCallId this run never asked).", "RunError"),
                "404": answer("`NOT_FOUND`: no such run.", "RunError"),
                "409": answer("`ALREADY_ANSWERED`: answered, expired, or the run ended.", "RunError"),
                "413": answer("`TOO_LARGE`: a reason over 1000 characters.", "RunError"),
                "503": answer("`UNAVAILABLE`.", "RunError"),
            },
            security=WRITE,
            requestBody=body("ApprovalBody"),
            tags=["runs"],
        )
    },
    "api/tokens/": {
        "get": operation(
            "The user's API tokens, newest first, without their values",
            {"200": answer("The tokens.", "TokenList")},
            tags=["tokens"],
        ),
        "post": operation(
            "Make a personal API token (a signed-in session only: a token cannot make tokens)",
            {
                "201": answer("Made; `token` is shown this once.", "NewToken"),
                "400": BAD_REQUEST,
                "403": error("Asked with a bearer token (`forbidden`), or a session without CSRF (`csrf_failed`)."),
            },
            security=SESSION_WRITE,
            requestBody=body("TokenCreate"),
            tags=["tokens"],
        ),
    },
    "api/conversations/<uuid:conversation_id>/shares/": {
        "get": operation(
            "The conversation's shared links that are not revoked, newest first, without their tokens",
            {"200": answer("The links.", "ShareList"), "404": NO_CONVERSATION},
            tags=["shares"],
        ),
        "post": operation(
            "Share a read-only snapshot of the conversation up to its last finished answer",
            {
                "201": answer("Made; `url` (`/s/<token>/`) is in this answer only.", "Share"),
                "400": BAD_REQUEST,
                "404": error("No such conversation, or sharing is turned off (`AGENT_SHARING`)."),
                "409": error("`nothing_to_share` (no finished answer yet) or `too_many_shares` (20 open links)."),
            },
            security=WRITE,
            requestBody=body("ShareCreate", required=False),
            tags=["shares"],
        ),
    },
    "api/shares/<int:share_id>/": {
        "delete": operation(
            "Revoke a shared link: it answers 404 at once",
            {"204": answer("Revoked."), "404": error("No such link (someone else's answers the same).")},
            security=WRITE,
            tags=["shares"],
        )
    },
    "v1/models": {
        "get": operation(
            "OpenAI-compatible: the agents the user may pick as models, `default` first",
            {"200": answer("The models.", "ModelList")},
            openai=True,
            tags=["openai"],
        )
    },
    "v1/chat/completions": {
        "post": operation(
            "OpenAI-compatible: run an agent on a new conversation; the answer whole or streamed",
            {
                "200": {
                    "description": "A `chat.completion`, or with `stream` `text/event-stream` chunks then `[DONE]`.",
                    "content": {
                        JSON: {"schema": ref("ChatCompletion")},
                        "text/event-stream": {"schema": STRING_SCHEMA},
                    },
                    "headers": {k: {"schema": STRING_SCHEMA, "description": v} for k, v in RUN_HEADERS.items()},
                },
                "400": openai_error(
                    "Bad messages, client `tools`, a message over the size limit, or a refused image: not a "
                    "base64 `data:` URL (`http(s)://` URLs are not fetched), not a PNG, JPEG, GIF or WebP, over "
                    "the upload limit or the workspace quota, or more than 20."
                ),
                "404": openai_error("`model_not_found`: no such agent, or not open to the user."),
                "413": openai_error("`request_too_large`: the body is over its messages' limit plus one image."),
                "409": openai_error("`run_cancelled`: the run was cancelled."),
                "429": openai_error(
                    "`rate_limit_exceeded` (the messages-per-minute limit, or too many failed token attempts) "
                    "or `insufficient_quota`."
                ),
                "502": openai_error("`model_call_failed` or `run_failed`: the run ended without an answer."),
                "503": openai_error("`service_unavailable`: no database."),
            },
            security=WRITE,
            openai=True,
            requestBody=body("ChatCompletionRequest"),
            tags=["openai"],
        )
    },
}
