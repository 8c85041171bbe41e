"""The OpenAPI descriptions of the whole account's routes (docs/protocol.md, "Accounts and HTTP"
and "Export and import"): every conversation exported at once, and the account deleted. A
module of its own, in the form of chat.doors.openapi.openapi_routes (which is at its size); chat.doors.openapi.openapi
reads both tables."""

from __future__ import annotations

from chat.doors.openapi.openapi_routes import BAD_REQUEST, JSON, SESSION_WRITE, answer, body, error, operation
from chat.doors.openapi.openapi_schemas import ref

ACCOUNT_ROUTES: dict[str, dict[str, dict]] = {
    "api/conversations/export/": {
        "get": operation(
            "Export every conversation of the user at once, as a download that the import takes back",
            {
                "200": {
                    "description": "The download (`Content-Disposition: attachment`): each conversation's "
                    "JSON export, oldest first, without a run still in progress; a conversation with "
                    "no finished run is left out.",
                    "content": {JSON: {"schema": ref("ExportAll")}},
                }
            },
            tags=["export"],
        )
    },
    "api/account/delete/": {
        "post": operation(
            "Delete the account and everything of it (a signed-in session only)",
            {
                "204": answer(
                    "Deleted: the user, their conversations, files, tokens, shares and sessions; "
                    "their sockets and streams close; this browser is signed out."
                ),
                "400": BAD_REQUEST,
                "403": error(
                    "`wrong_password` or `wrong_username` (nothing changed), `forbidden` (a bearer "
                    "token), or a session without CSRF (`csrf_failed`)."
                ),
            },
            security=SESSION_WRITE,
            requestBody=body("AccountDelete"),
            tags=["account"],
        )
    },
}
