"""`/schedules/triggers/`: the user's triggers on a page (docs/protocol.md, "Triggers"), beside the
schedules: listed with their URL and past runs, made, changed, disabled, enabled and deleted
through the same services as `/api/triggers/`, whose field rules answer a refused form too. A new
trigger's secret is shown once, in the very answer that made it (as a new API token is)."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext
from django.views.decorators.http import require_http_methods, require_POST

from chat.agents.selectors import agent_profiles_for_user
from chat.models import DEFAULT_AGENT_SLUG, Trigger
from chat.scheduling.services import FieldRefused
from chat.scheduling.triggers import (
    PLACEHOLDER,
    TooManyTriggers,
    trigger_create,
    trigger_for_user,
    trigger_json,
    trigger_runs,
    trigger_update,
    triggers_for_user,
)

RUNS_SHOWN = 5


def _body(post) -> dict:
    """The form as the API's body."""
    body: dict = {
        "name": post.get("name", ""),
        "prompt": post.get("prompt", ""),
        "agent": post.get("agent", DEFAULT_AGENT_SLUG),
        "enabled": post.get("enabled") == "on",
    }
    if not body["name"].strip():
        body.pop("name")  # the prompt's first words
    return body


def _editing(request) -> Trigger | None:
    if edit_id := request.GET.get("edit") or request.POST.get("id"):
        try:
            return trigger_for_user(user=request.user, trigger_id=uuid.UUID(edit_id))
        except ValueError:  # not a UUID: nothing to edit
            return None
    return None


def _render(request, *, editing: Trigger | None, form: dict, status: int, new: tuple[Trigger, str] | None = None):
    rows = [
        {
            "trigger": t,
            "status": trigger_json(t)["lastStatus"],
            "url": request.build_absolute_uri(reverse("hook", args=[t.pk])),
            "runs": trigger_runs(trigger=t, limit=RUNS_SHOWN),
        }
        for t in triggers_for_user(user=request.user)
    ]
    context = {
        "rows": rows,
        "editing": editing,
        "form": form,
        "placeholder": PLACEHOLDER,
        "agents": [(DEFAULT_AGENT_SLUG, gettext("Default"))]
        + [(p.slug, p.name) for p in agent_profiles_for_user(user=request.user)],
        "new_trigger": new[0] if new else None,
        "new_secret": new[1] if new else None,
        "new_url": request.build_absolute_uri(reverse("hook", args=[new[0].pk])) if new else None,
    }
    response = render(request, "schedules/triggers.html", context, status=status)
    if new:
        response["Cache-Control"] = "no-store"  # the secret stays out of the browser's cache too
    return response


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def triggers_page(request):
    editing = _editing(request)
    form = {"name": "", "prompt": PLACEHOLDER, "agent": DEFAULT_AGENT_SLUG, "enabled": True}
    if editing is not None:
        form.update(
            name=editing.name,
            prompt=editing.prompt,
            agent=editing.agent.slug if editing.agent_id else DEFAULT_AGENT_SLUG,
            enabled=editing.enabled,
        )
    if request.method != "POST":
        return _render(request, editing=editing, form=form, status=200)
    body = _body(request.POST)
    try:
        if editing is not None:
            trigger_update(trigger=editing, body=body)
            messages.success(request, gettext("The trigger is saved."))
            return redirect("triggers")
        # Not kept to be shown by a later page (a session row would hold it until then): the
        # page's script puts /schedules/triggers/ in the address bar, so a reload makes no second.
        created = trigger_create(user=request.user, body=body)
        messages.success(request, gettext("The trigger is made."))
        return _render(request, editing=None, form=form, status=201, new=created)
    except FieldRefused as exc:
        messages.error(request, str(exc))
    except TooManyTriggers:
        messages.error(request, gettext("You have as many triggers as you may; delete one first."))
    form.update({key: request.POST.get(key, "") for key in ("name", "prompt", "agent")})
    form["enabled"] = request.POST.get("enabled") == "on"
    return _render(request, editing=editing, form=form, status=400)


@login_required
@require_POST
def trigger_toggle(request, trigger_id):
    found = trigger_for_user(user=request.user, trigger_id=trigger_id)
    if found is not None:
        trigger_update(trigger=found, body={"enabled": not found.enabled})
    return redirect("triggers")


@login_required
@require_POST
def trigger_delete(request, trigger_id):
    found = trigger_for_user(user=request.user, trigger_id=trigger_id)
    if found is not None:
        found.delete()
        messages.success(request, gettext("The trigger is deleted; its conversations stay."))
    return redirect("triggers")
