"""The OpenAPI descriptions of a conversation's queue (docs/protocol.md, "Queued messages" and
"Steering"): the waiting messages and pending steers listed, and one withdrawn. A module of its own, in the form of
chat.doors.openapi.openapi_routes (which is at its size)."""

from __future__ import annotations

from chat.doors.openapi.openapi_routes import READ, WRITE, answer, operation

QUEUE_ROUTES: dict[str, dict[str, dict]] = {
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
