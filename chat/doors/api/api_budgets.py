"""`/api/budgets/` (docs/protocol.md, "Budgets", "Managing budgets"): staff sessions list,
create, change and delete budgets. A token, even a staff user's, and a signed-in user who is
not staff get 403, and nothing is created or changed."""

from __future__ import annotations

from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_http_methods

from chat.accounts.budget_writes import (
    BudgetExists,
    BudgetRefused,
    budget_create,
    budget_json,
    budget_update,
)
from chat.doors.http.json_api import api_login_required, json_body, json_error
from chat.models import DEFAULT_AGENT_SLUG, Budget

FILTERS = {"scope": "scope", "user": "user__username", "group": "group__name", "agent": "agent__slug"}


def _refused(request) -> JsonResponse | None:
    if getattr(request, "api_token", None) is not None:
        return json_error(403, "forbidden", "Budgets are managed by a staff session, not with a token.")
    if not request.user.is_staff:
        return json_error(403, "forbidden", "Only staff manage budgets.")
    return None


@require_http_methods(["GET", "POST"])
@api_login_required
def budgets(request):
    if (refusal := _refused(request)) is not None:
        return refusal
    if request.method == "GET":
        found = Budget.objects.select_related("user", "group", "agent").order_by("id")
        for name, lookup in FILTERS.items():
            if value := request.GET.get(name):
                if name == "agent" and value == DEFAULT_AGENT_SLUG:
                    found = found.filter(scope="agent", agent__isnull=True)
                else:
                    found = found.filter(**{lookup: value})
        if token := request.GET.get("token"):
            found = found.filter(token_id=int(token)) if token.isdigit() else found.none()
        return JsonResponse({"budgets": [budget_json(b) for b in found]})
    try:
        budget = budget_create(body=json_body(request))
    except (BudgetRefused, ValueError) as exc:
        return json_error(400, "bad_request", str(exc))
    except BudgetExists as exc:
        return json_error(409, "budget_exists", str(exc))
    return JsonResponse(budget_json(budget), status=201)


@require_http_methods(["PATCH", "DELETE"])
@api_login_required
def budget(request, budget_id: int):
    if (refusal := _refused(request)) is not None:
        return refusal
    found = Budget.objects.filter(pk=budget_id).first()
    if found is None:
        return json_error(404, "not_found", "No such budget.")
    if request.method == "DELETE":
        found.delete()
        return HttpResponse(status=204)
    try:
        found = budget_update(budget=found, body=json_body(request))
    except (BudgetRefused, ValueError) as exc:
        return json_error(400, "bad_request", str(exc))
    return JsonResponse(budget_json(found))
