"""The OpenAPI descriptions of a conversation's queue (docs/protocol.md, "Queued messages" and
"Steering"): the waiting messages and pending steers listed, and one withdrawn; and a compaction
run started on demand ("Compaction"). A module of its own, in the form of
chat.doors.openapi.openapi_routes (which is at its size)."""

from __future__ import annotations

from chat.doors.openapi.openapi_routes import READ, WRITE, answer, body, operation

QUEUE_ROUTES: dict[str, dict[str, dict]] = {
    "api/conversations/<uuid:conversation_id>/compact/": {
        "post": operation(
            "Start a compaction run of the branch ending at the user_message `seq` (default the newest), "
            "as the WebSocket's `compact` frame does",
            {
                "202": answer("The compaction run started: its events follow in the conversation.", "CompactAnswer"),
                "400": answer("`BAD_REQUEST`: a `seq` that is not the seq of a user_message here.", "RunError"),
                "404": answer("`NOT_FOUND`: no such conversation (someone else's answers the same).", "RunError"),
                "409": answer(
                    "`RUN_IN_PROGRESS` (decided first), `NOTHING_TO_COMPACT` or `AGENT_UNAVAILABLE`.", "RunError"
                ),
                "429": answer("`RATE_LIMITED` or `QUOTA_EXCEEDED`.", "RunError"),
                "503": answer("`UNAVAILABLE`: the database did not answer.", "RunError"),
            },
            security=WRITE,
            requestBody=body("CompactBody", required=False),
            tags=["runs"],
        )
    },
    "api/conversations/<uuid:conversation_id>/queue/": {
        "get": operation(
            "The conversation's waiting messages, in the order they will start, and its pending steers",
            {
                "200": answer(
                    "`queue`: the waiting messages; `steers`: the steers the run has not taken in yet.", "Queue"
                ),
                "404": answer("`NOT_FOUND`: no such conversation (someone else's answers the same).", "RunError"),
                "503": answer("`UNAVAILABLE`.", "RunError"),
            },
            security=READ,
            tags=["runs"],
        )
    },
    "api/conversations/<uuid:conversation_id>/queue/<str:queue_id>/": {
        "delete": operation(
            "Withdraw a waiting message or a pending steer, as the `unqueue` frame does",
            {
                "204": {"description": "Withdrawn: its `unqueued` event (reason `withdrawn`) is stored."},
                "404": answer(
                    "`NOT_FOUND` (no such conversation) or `NOT_QUEUED` (nothing waits with that id).",
                    "RunError",
                ),
                "503": answer("`UNAVAILABLE`.", "RunError"),
            },
            security=WRITE,
            tags=["runs"],
        )
    },
}
