"""`/api/schedules/` (docs/protocol.md, "Schedules"): a user's schedules, owner-only (another
user's answers as a missing one). A refused field answers `400` with its name in `field`."""

from __future__ import annotations

from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_http_methods

from chat.doors.http.json_api import api_login_required, json_body, json_error
from chat.scheduling.services import (
    RUNS_LIMIT_DEFAULT,
    RUNS_LIMIT_MAX,
    FieldRefused,
    TooManySchedules,
    schedule_create,
    schedule_for_user,
    schedule_json,
    schedule_run_json,
    schedule_runs,
    schedule_update,
    schedules_for_user,
)


def field_refused(exc: FieldRefused) -> JsonResponse:
    """A refused field of a schedule or a trigger (triggers_api too): `400` naming it."""
    return JsonResponse({"error": "bad_request", "message": str(exc), "field": exc.field}, status=400)


def runs_limit(request) -> int | JsonResponse:
    """`?limit=` of a schedule's or a trigger's past runs: a whole number from 1, capped; or the
    `400` that names it."""
    raw = request.GET.get("limit", str(RUNS_LIMIT_DEFAULT))
    if not raw.isascii() or not raw.isdigit() or int(raw) < 1:
        return JsonResponse(
            {"error": "bad_request", "message": "limit must be a whole number from 1", "field": "limit"}, status=400
        )
    return min(int(raw), RUNS_LIMIT_MAX)


def _with_secret(body: dict, secret: str | None) -> dict:
    """The webhook's secret, in the answer that made it only."""
    return {**body, "webhookSecret": secret} if secret is not None else body


def _missing() -> JsonResponse:
    return json_error(404, "not_found", "No such schedule.")


@require_http_methods(["GET", "POST"])
@api_login_required
def schedules(request):
    if request.method == "GET":
        return JsonResponse({"schedules": [schedule_json(s) for s in schedules_for_user(user=request.user)]})
    try:
        schedule, secret = schedule_create(user=request.user, body=json_body(request))
    except FieldRefused as exc:
        return field_refused(exc)
    except TooManySchedules as exc:
        return json_error(409, "too_many_schedules", f"You have too many schedules: {exc}.")
    except ValueError as exc:  # the body itself
        return json_error(400, "bad_request", str(exc))
    return JsonResponse(_with_secret(schedule_json(schedule), secret), status=201)


@require_http_methods(["GET", "PATCH", "DELETE"])
@api_login_required
def schedule(request, schedule_id):
    found = schedule_for_user(user=request.user, schedule_id=schedule_id)
    if found is None:
        return _missing()
    if request.method == "GET":
        return JsonResponse(schedule_json(found))
    if request.method == "DELETE":
        found.delete()
        return HttpResponse(status=204)
    try:
        found, secret = schedule_update(schedule=found, body=json_body(request))
    except FieldRefused as exc:
        return field_refused(exc)
    except ValueError as exc:
        return json_error(400, "bad_request", str(exc))
    return JsonResponse(_with_secret(schedule_json(found), secret))


@require_http_methods(["GET"])
@api_login_required
def schedule_run_list(request, schedule_id):
    found = schedule_for_user(user=request.user, schedule_id=schedule_id)
    if found is None:
        return _missing()
    limit = runs_limit(request)
    if isinstance(limit, JsonResponse):
        return limit
    return JsonResponse({"runs": [schedule_run_json(run) for run in schedule_runs(schedule=found, limit=limit)]})
