"""The whole account over HTTP (docs/protocol.md, "Accounts and HTTP" and "Export and import"):
every conversation exported in one file, and the account deleted by its user."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser
from django.http import HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from chat.accounts.account import account_delete, account_delete_confirmed, confirms_with_username
from chat.conversations.selectors import conversations_to_export
from chat.doors.api.export_streams import account_body, export_response
from chat.doors.http.json_api import api_login_required, json_body, json_error

CONFIRMATION_MAX = 4096  # longer than any password or username: refused before it is hashed


@require_http_methods(["GET"])
@api_login_required
def conversations_export_all(request):
    """Every conversation of the user, oldest first, as one download that the import reads back.
    A run still in progress is left out (it has no end to import), and so is a conversation with
    nothing finished in it."""
    filename = f"agentsite-conversations-{timezone.now():%Y-%m-%d}.json"
    return export_response(account_body(conversations_to_export(user=request.user)), filename=filename)


def _confirmation(body: dict, name: str) -> str:
    value = body.get(name, "")
    if not isinstance(value, str) or len(value) > CONFIRMATION_MAX:
        raise ValueError(f"{name} must be a string")
    return value


@require_http_methods(["POST"])
@api_login_required
def account_delete_view(request):
    """`{"password"}` (or `{"username"}` for a user without a password to type) → 204, the user
    and all of theirs gone and this browser signed out; a wrong one → 403, nothing changed. Only a
    signed-in session may: a leaked API token must not take the account with it."""
    if getattr(request, "api_token", None) is not None:
        return json_error(403, "forbidden", "An account is deleted from a signed-in session, not with a token.")
    user = request.user
    try:
        body = json_body(request)
        field = "username" if confirms_with_username(user) else "password"
        given = _confirmation(body, field)
        if not given:
            raise ValueError(f"{field} is required to delete the account")
    except ValueError as exc:
        return json_error(400, "bad_request", str(exc))
    if not account_delete_confirmed(user=user, confirmation=given):
        wrong = "The username does not match" if field == "username" else "The password is wrong"
        return json_error(403, f"wrong_{field}", f"{wrong}; nothing was deleted.")
    account_delete(user=user)
    # This browser's cookie ends with the account. Not auth.logout: its signal would name a user
    # that no longer exists, whose sockets are closing already.
    request.session.flush()
    request.user = AnonymousUser()
    return HttpResponse(status=204)
