"""`/api/triggers/` (docs/protocol.md, "Triggers"): a user's triggers, owner-only (another user's
answers as a missing one). A refused field answers `400` with its name in `field`; the secret is
in the answer that made it only."""

from __future__ import annotations

from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_http_methods

from chat.doors.api.schedules_api import field_refused, runs_limit
from chat.doors.http.json_api import api_login_required, json_body, json_error
from chat.scheduling.services import FieldRefused, schedule_run_json
from chat.scheduling.triggers import (
    TooManyTriggers,
    trigger_create,
    trigger_for_user,
    trigger_json,
    trigger_runs,
    trigger_update,
    triggers_for_user,
)


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
        return field_refused(exc)
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
        return field_refused(exc)
    except ValueError as exc:
        return json_error(400, "bad_request", str(exc))
    return JsonResponse(trigger_json(found))


@require_http_methods(["GET"])
@api_login_required
def trigger_run_list(request, trigger_id):
    found = trigger_for_user(user=request.user, trigger_id=trigger_id)
    if found is None:
        return _missing()
    limit = runs_limit(request)
    if isinstance(limit, JsonResponse):
        return limit
    return JsonResponse({"runs": [schedule_run_json(run) for run in trigger_runs(trigger=found, limit=limit)]})
