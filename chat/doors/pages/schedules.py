"""`/schedules/`: the user's schedules on a page (docs/protocol.md, "Schedules"): listed with their
next and last runs, made, changed, paused, resumed and deleted through the same services as the
JSON API, whose field rules answer a refused form too."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils.translation import gettext
from django.views.decorators.http import require_http_methods, require_POST

from chat.agents.selectors import agent_profiles_for_user
from chat.models import DEFAULT_AGENT_SLUG, Schedule
from chat.scheduling.services import (
    FieldRefused,
    TooManySchedules,
    schedule_create,
    schedule_for_user,
    schedule_runs,
    schedule_status,
    schedule_update,
    schedules_for_user,
)

TIMINGS = ("cron", "every", "at")
RUNS_SHOWN = 5


def _body(post) -> dict:
    """The form as the API's body: one timing, the rest as typed."""
    kind = post.get("timing", "cron")
    value = post.get("timing_value", "").strip()
    body: dict = {
        "name": post.get("name", ""),
        "prompt": post.get("prompt", ""),
        "timezone": post.get("timezone", "").strip() or "UTC",
        "agent": post.get("agent", DEFAULT_AGENT_SLUG),
        "enabled": post.get("enabled") == "on",
    }
    if kind not in TIMINGS:
        kind = "cron"
    body[kind] = int(value) if kind == "every" and value.isdigit() else value
    if not body["name"].strip():
        body.pop("name")  # the prompt's first words
    return body


def _rows(user) -> list[dict]:
    return [
        {"schedule": s, "status": schedule_status(s), "runs": schedule_runs(schedule=s, limit=RUNS_SHOWN)}
        for s in schedules_for_user(user=user)
    ]


def _timing(schedule: Schedule) -> tuple[str, str]:
    if schedule.cron:
        return "cron", schedule.cron
    if schedule.every:
        return "every", str(schedule.every)
    return "at", schedule.at.isoformat() if schedule.at else ""


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def schedules_page(request):
    editing = None
    if edit_id := request.GET.get("edit") or request.POST.get("id"):
        try:
            editing = schedule_for_user(user=request.user, schedule_id=uuid.UUID(edit_id))
        except ValueError:  # not a UUID: nothing to edit
            editing = None
    status = 200
    if request.method == "POST":
        body = _body(request.POST)
        try:
            if editing is not None:
                schedule_update(schedule=editing, body=body)
                messages.success(request, gettext("The schedule is saved."))
            else:
                schedule_create(user=request.user, body=body)
                messages.success(request, gettext("The schedule is made."))
            return redirect("schedules")
        except FieldRefused as exc:
            messages.error(request, str(exc))
        except TooManySchedules:
            messages.error(request, gettext("You have as many schedules as you may; delete one first."))
        status = 400
    form = {"timing": "cron", "timing_value": "", "timezone": "UTC", "agent": DEFAULT_AGENT_SLUG, "enabled": True}
    if editing is not None:
        kind, value = _timing(editing)
        form.update(
            name=editing.name,
            prompt=editing.prompt,
            timing=kind,
            timing_value=value,
            timezone=editing.timezone,
            agent=editing.agent.slug if editing.agent_id else DEFAULT_AGENT_SLUG,
            enabled=editing.enabled,
        )
    if request.method == "POST":
        form.update(
            {key: request.POST.get(key, "") for key in ("name", "prompt", "timing", "timing_value", "timezone")}
        )
        form["enabled"] = request.POST.get("enabled") == "on"
    context = {
        "rows": _rows(request.user),
        "editing": editing,
        "form": form,
        "agents": [(DEFAULT_AGENT_SLUG, gettext("Default"))]
        + [(p.slug, p.name) for p in agent_profiles_for_user(user=request.user)],
    }
    return render(request, "schedules/index.html", context, status=status)


@login_required
@require_POST
def schedule_toggle(request, schedule_id):
    found = schedule_for_user(user=request.user, schedule_id=schedule_id)
    if found is not None:
        schedule_update(schedule=found, body={"enabled": not found.enabled})
    return redirect("schedules")


@login_required
@require_POST
def schedule_delete(request, schedule_id):
    found = schedule_for_user(user=request.user, schedule_id=schedule_id)
    if found is not None:
        found.delete()
        messages.success(request, gettext("The schedule is deleted; its conversations stay."))
    return redirect("schedules")
