"""The run inspector's HTML pages (/inspect/...): the run list, a run, the dashboard.

Staff only, and for anyone else (signed in or not) a 404, as the trace API answers: the
pages do not admit they exist. Server-rendered with Django's autoescape; tool arguments and
results are pretty-printed JSON (chat.nesting, which shows JSON too deep to indent as its
text) and then escaped like any text.
"""

from __future__ import annotations

import json
from datetime import date, datetime, time, timedelta
from functools import wraps

from django import forms
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_safe

from chat import nesting
from chat.accounts.budgets import every_budget_state
from chat.eventlog.reads import run_door
from chat.inspector import reads
from chat.inspector.charts import horizontal_bars, stacked_columns, waterfall
from chat.inspector.images import shown_images
from chat.inspector.run_tree import attach_children, call_spans, offset_ms
from chat.inspector.trace import run_trace
from chat.models import Run
from chat.script_strings import js_strings


def staff_only(view):
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        user = request.user
        if not (user.is_authenticated and user.is_active and user.is_staff):
            raise Http404("no such page")
        return view(request, *args, **kwargs)

    return wrapped


# -- the run list ----------------------------------------------------------------------------------
MAX_USAGE_DAYS = 366
MAX_SECONDS = 30 * 86400  # "slower than": a month is plenty, and larger numbers overflow a timedelta


class RunFilterForm(forms.Form):
    conversation = forms.UUIDField(required=False)
    user = forms.CharField(required=False, max_length=150)
    status = forms.ChoiceField(required=False, choices=[("", "any")] + list(Run.Status.choices))
    model = forms.CharField(required=False, max_length=200)
    since = forms.DateField(required=False, label="from", widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, label="to (inclusive)", widget=forms.DateInput(attrs={"type": "date"}))
    errors = forms.BooleanField(required=False, label="with errors")
    slower_than = forms.FloatField(required=False, min_value=0, max_value=MAX_SECONDS, label="slower than (s)")
    feedback = forms.ChoiceField(
        required=False,
        choices=[("", "any"), ("rated", "rated"), ("up", "thumbs up"), ("down", "thumbs down")],
    )
    origin = forms.ChoiceField(required=False, choices=[("", "any"), ("live", "run here"), ("imported", "imported")])
    source = forms.ChoiceField(
        required=False,
        label="started by",
        choices=[("", "any"), ("chat", "the chat"), ("api", "the API"), ("agui", "AG-UI"), ("a2a", "A2A"), ("mcp", "MCP"),
                 ("schedule", "a schedule"), ("trigger", "a trigger")],
    )  # fmt: skip
    sort = forms.ChoiceField(
        required=False,
        choices=[("-start", "newest"), ("start", "oldest"), ("-duration", "slowest"), ("duration", "fastest"),
                 ("-tokens", "most tokens"), ("tokens", "fewest tokens")],
    )  # fmt: skip

    def clean_until(self):
        until = self.cleaned_data.get("until")
        if until is not None and until >= date.max:
            raise forms.ValidationError("Too far in the future.")  # the day after it has no datetime
        return until

    def filters(self) -> reads.RunFilters:
        data = self.cleaned_data
        sort = data.get("sort") or "-start"
        day = timezone.get_current_timezone()
        since, until = data.get("since"), data.get("until")
        return reads.RunFilters(
            conversation=str(data["conversation"]) if data.get("conversation") else "",
            user=data.get("user") or "",
            status=data.get("status") or "",
            model=data.get("model") or "",
            since=datetime.combine(since, time.min, tzinfo=day) if since else None,
            until=datetime.combine(until, time.min, tzinfo=day) + timedelta(days=1) if until else None,
            errors=bool(data.get("errors")),
            slower_than=data.get("slower_than"),
            feedback=data.get("feedback") or "",
            origin=data.get("origin") or "",
            source=data.get("source") or "",
            sort=sort.lstrip("-"),
            descending=sort.startswith("-"),
        )


@require_safe
@staff_only
def run_list(request):
    form = RunFilterForm(request.GET or None)
    if form.is_bound and not form.is_valid():
        # Bad input is shown next to its field; the list is not filtered by half a form.
        return render(request, "inspect/runs.html", {"form": form, "page": None, "models": reads.model_names()})
    filters = form.filters() if form.is_bound else reads.RunFilters()
    paginator = Paginator(reads.runs(filters, now=timezone.now()), reads.RUN_PAGE)
    page = paginator.get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "form": form,
        "page": page,
        "query": query.urlencode(),
        "models": reads.model_names(),
        "conversation": reads.conversation_shown(filters.conversation) if filters.conversation else None,
    }
    return render(request, "inspect/runs.html", context)


# -- one run ------------------------------------------------------------------------------------
EVENTS_SHOWN = 2_000


@require_safe
@staff_only
def run_page(request, run_id):
    trace = run_trace(run_id=run_id)
    if trace is None:
        raise Http404("no such run")
    run = trace["run"]
    start = datetime.fromisoformat(run["startedAt"])
    spans = call_spans(trace, start)
    for call in trace["modelCalls"]:
        # What the model saw, when AGENT_TRACE_REQUESTS recorded it.
        messages = call.get("requestMessages")
        call["prettyRequest"] = json.dumps(messages, indent=2, ensure_ascii=False) if messages else ""
        call["images"] = shown_images(run["conversationId"], messages)
    for tool in trace["toolCalls"]:
        tool["prettyArguments"] = nesting.pretty(tool["arguments"])
        tool["prettyResult"] = nesting.pretty(tool["result"])
    # The run tree (docs/protocol.md, "Sub-agents"): each child run under the delegate call that
    # started it, its bars in this waterfall, its events in the replay.
    descendants, descendant_events = attach_children(trace, start)
    spans += descendants
    spans.sort(key=lambda span: span.start_ms)
    # A long answer is thousands of text deltas: the page shows the first EVENTS_SHOWN, the trace JSON has all.
    shown = trace["events"][:EVENTS_SHOWN]
    events = reads.fold_deltas(shown)
    for row in events:
        row["json"] = [json.dumps(frame, indent=2, ensure_ascii=False) for frame in row.pop("frames")]
    total_ms = run["durationMs"] if run["durationMs"] is not None else offset_ms(timezone.now().isoformat(), start)
    context = {
        "run": run,
        "resumes": Run.objects.filter(pk=run_id).values_list("resumes", flat=True).first(),
        "retries": sum(1 for call in trace["modelCalls"] if call["retry"]),
        "estimated": any(call["estimated"] for call in trace["modelCalls"]),
        "model_calls": trace["modelCalls"],
        "tool_calls": trace["toolCalls"],
        "children": trace["children"],
        "events": events,
        "events_hidden": len(trace["events"]) - len(shown),
        "conversation_title": reads.conversation_title(run["conversationId"]),
        "conversation_source": reads.conversation_source(run["conversationId"]),
        **reads.run_starters(run["id"]),
        # The door that started it (its user_message's `via`: docs/protocol.md, "A2A agent"); none: the chat page.
        "door": run_door(run_id=run_id)["via"],
        # All of them: the replay draws the whole answer (the trace JSON would send them all too).
        "replay_events": sorted(trace["events"] + descendant_events, key=lambda event: event["seq"]),
        "js_strings": js_strings(),
        "waterfall": waterfall(spans, total_ms=total_ms, label="model and tool calls over time"),
    }
    return render(request, "inspect/run.html", context)


# -- the dashboard ----------------------------------------------------------------------------
STATUS_KEYS = [status.value for status in Run.Status]


def _seconds(value) -> str:
    return "–" if value is None else f"{value.total_seconds():.2f} s"


def _ms(value) -> str:
    return "–" if value is None else f"{value / 1000:.2f} s"


@require_safe
@staff_only
def dashboard(request):
    window = reads.WINDOWS.get(request.GET.get("window", ""), reads.WINDOWS["24h"])
    data = reads.dashboard(window, now=timezone.now())
    hourly = window.bucket < timedelta(days=1)
    buckets = [(moment.strftime("%H:00" if hourly else "%m-%d"), counts) for moment, counts in data["runs_by_bucket"]]
    context = {
        "window": window,
        "windows": reads.WINDOWS.values(),
        "data": data,
        "status_keys": STATUS_KEYS,
        "failure_rate": "–" if data["failure_rate"] is None else f"{data['failure_rate']:.1%}",
        "duration": (_seconds(data["duration_p50"]), _seconds(data["duration_p95"])),
        "first_token": (_ms(data["first_token_p50"]), _ms(data["first_token_p95"])),
        "runs_chart": stacked_columns(buckets, STATUS_KEYS, label="runs by status"),
        "model_chart": horizontal_bars(
            [
                (row["run__model"] or "(none)", row["tokens"] or 0, f"{row['tokens'] or 0:,}")
                for row in data["tokens_by_model"]
            ],
            label="tokens by model",
        ),
        "user_chart": horizontal_bars(
            [
                (row["run__user__username"], row["tokens"] or 0, f"{row['tokens'] or 0:,}")
                for row in data["tokens_by_user"]
            ],
            label="tokens by user",
        ),
        "tool_chart": horizontal_bars(
            [(row["tool_name"], row["errors"], f"{row['errors']} of {row['calls']}") for row in data["failing_tools"]],
            label="tools that fail most",
            kind="failed",
        ),
    }
    return render(request, "inspect/dashboard.html", context)


# -- usage -------------------------------------------------------------------------------------
@require_safe
@staff_only
def usage(request):
    """Every user's use over the last `?days=N` days (1 to 366, default 30) with cost, and the
    state of every budget (docs/protocol.md, "Budgets")."""
    raw = request.GET.get("days", "30")
    days = int(raw) if raw.isdigit() and 1 <= int(raw) <= MAX_USAGE_DAYS else 30
    now = timezone.now()
    context = {"days": days, "users": reads.usage_by_user(days=days, now=now), "budgets": every_budget_state(now=now)}
    return render(request, "inspect/usage.html", context)
