"""`/api/tokens/` (docs/protocol.md, "API tokens"): a user's personal API tokens. Made only with a
signed-in session (a leaked token must not mint more), listed without their values, revoked at
once."""

from __future__ import annotations

from django.db import transaction
from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_http_methods

from chat.accounts.budget_writes import token_budget_json, token_budget_set
from chat.accounts.tokens import EXPIRY_DAYS_MAX, NAME_MAX, token_create, token_revoke, tokens_for_user
from chat.doors.http.json_api import api_login_required, expiry_days, iso_time, json_body, json_error, text_field
from chat.models import ApiToken


def token_json(token: ApiToken) -> dict:
    return {
        "budget": token_budget_json(token),
        "id": token.pk,
        "name": token.name,
        "hint": token.hint,
        "createdAt": iso_time(token.created_at),
        "expiresAt": iso_time(token.expires_at),
        "lastUsedAt": iso_time(token.last_used_at),
    }


@require_http_methods(["GET", "POST"])
@api_login_required
def tokens(request):
    if request.method == "GET":
        return JsonResponse({"tokens": [token_json(t) for t in tokens_for_user(user=request.user)]})
    if getattr(request, "api_token", None) is not None:
        return json_error(403, "forbidden", "A token is made by a signed-in session, not by another token.")
    try:
        body = json_body(request)
        name = text_field(body.get("name", ""), "name", NAME_MAX).strip()
        if not name:
            raise ValueError("name is required")
        days = expiry_days(body.get("expiresInDays"), EXPIRY_DAYS_MAX)
        with transaction.atomic():
            token, value = token_create(user=request.user, name=name, expires_in_days=days)
            if body.get("budget") is not None:
                token_budget_set(token=token, body=body["budget"])
    except ValueError as exc:  # BudgetRefused too: nothing is made
        return json_error(400, "bad_request", str(exc))
    return JsonResponse({**token_json(token), "token": value}, status=201)


@require_http_methods(["PATCH", "DELETE"])
@api_login_required
def token(request, token_id: int):
    if request.method == "PATCH":
        return _token_patch(request, token_id)
    if not token_revoke(user=request.user, token_id=token_id):
        return json_error(404, "not_found", "No such token.")
    return HttpResponse(status=204)


def _token_patch(request, token_id: int):
    """`{"budget": {...} | null}`: the owner's session sets their token's budget (docs/protocol.md,
    "Budgets"); a bearer token may set none, another user's token is 404."""
    if getattr(request, "api_token", None) is not None:
        return json_error(403, "forbidden", "A token's budget is set by a signed-in session, not by a token.")
    found = tokens_for_user(user=request.user).filter(pk=token_id).first()
    if found is None:
        return json_error(404, "not_found", "No such token.")
    try:
        body = json_body(request)
        if "budget" not in body:
            raise ValueError("budget is required (an object, or null for none)")
        token_budget_set(token=found, body=body["budget"])
    except ValueError as exc:
        return json_error(400, "bad_request", str(exc))
    return JsonResponse(token_json(found))
