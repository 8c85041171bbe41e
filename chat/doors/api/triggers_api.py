"""`/api/triggers/` (docs/protocol.md, "Triggers"): a user's triggers, owner-only (another user's
answers as a missing one). A refused field answers `400` with its name in `field`; the secret is
in the answer that made it only."""

from __future__ import annotations

from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_http_methods

from chat.doors.http.json_api import api_login_required, json_body, json_error
from chat.scheduling.services import RUNS_LIMIT_DEFAULT, RUNS_LIMIT_MAX, FieldRefused, schedule_run_json
from chat.scheduling.triggers import (
    TooManyTriggers,
    trigger_create,
    trigger_for_user,
    trigger_json,
    trigger_runs,
    trigger_update,
    triggers_for_user,
)


def _refused(exc: FieldRefused) -> JsonResponse:
    return JsonResponse({"error": "bad_request", "message": str(exc), "field": exc.field}, status=400)


def _missing() -> JsonResponse:
    return json_error(404, "not_found", "No such trigger.")


@require_http_methods(["GET", "POST"])
@api_login_required
def triggers(request):
    if request.method == "GET":
        return JsonResponse({"triggers": [trigger_json(t) for t in triggers_for_user(user=request.user)]})
    try:
        trigger, secret = trigger_create(user=request.user, body=json_body(request))
    except FieldRefused as exc:
        return _refused(exc)
    except TooManyTriggers as exc:
        return json_error(409, "too_many_triggers", f"You have too many triggers: {exc}.")
    except ValueError as exc:  # the body itself
        return json_error(400, "bad_request", str(exc))
    return JsonResponse({**trigger_json(trigger), "secret": secret}, status=201)


@require_http_methods(["GET", "PATCH", "DELETE"])
@api_login_required
def trigger(request, trigger_id):
    found = trigger_for_user(user=request.user, trigger_id=trigger_id)
    if found is None:
        return _missing()
    if request.method == "GET":
        return JsonResponse(trigger_json(found))
    if request.method == "DELETE":
        found.delete()
        return HttpResponse(status=204)
    try:
        found = trigger_update(trigger=found, body=json_body(request))
    except FieldRefused as exc:
        return _refused(exc)
    except ValueError as exc:
        return json_error(400, "bad_request", str(exc))
    return JsonResponse(trigger_json(found))


@require_http_methods(["GET"])
@api_login_required
def trigger_run_list(request, trigger_id):
    found = trigger_for_user(user=request.user, trigger_id=trigger_id)
    if found is None:
        return _missing()
    raw = request.GET.get("limit", str(RUNS_LIMIT_DEFAULT))
    if not raw.isascii() or not raw.isdigit() or int(raw) < 1:
        return JsonResponse(
            {"error": "bad_request", "message": "limit must be a whole number from 1", "field": "limit"}, status=400
        )
    limit = min(int(raw), RUNS_LIMIT_MAX)
    return JsonResponse({"runs": [schedule_run_json(run) for run in trigger_runs(trigger=found, limit=limit)]})
