"""Reads of the run inspector's HTML pages (chat.inspector.views): the run list and the dashboard.

Staff only: these read every user's runs, so the views check first. Every query is bounded:
the list is paged, the dashboard is aggregates (GROUP BY, conditional counts) plus, for each
percentile, one count and one single-row ORDER BY ... OFFSET query, never a row loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, DurationField, Exists, ExpressionWrapper, F, OuterRef, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce, TruncDay, TruncHour

from chat.accounts.budgets import period_bounds
from chat.agent.approval import ERROR
from chat.agent.trace import CANCELLED
from chat.models import Conversation, ModelCall, Run, ToolRecord

RUN_PAGE = 50
SORTS = {
    "start": "started_at",
    "duration": "duration",
    "tokens": "total_tokens",
}

FEEDBACK_FILTERS = {
    "up": {"feedback__rating": 1},
    "down": {"feedback__rating": -1},
    "rated": {"feedback__isnull": False},
}


@dataclass(frozen=True)
class RunFilters:
    conversation: str = ""  # a conversation id: the chat page's link for staff
    user: str = ""
    status: str = ""
    model: str = ""
    since: datetime | None = None
    until: datetime | None = None
    errors: bool = False
    slower_than: float | None = None  # seconds
    feedback: str = ""  # "up", "down", "rated" (either) or "" (no filter)
    origin: str = ""  # "live" (runs of this server), "imported" (made by an import) or "" (both)
    source: str = ""  # a conversation source ("chat" for ""), or "" (any)
    sort: str = "start"
    descending: bool = True


def _duration(now: datetime) -> ExpressionWrapper:
    """A run's wall time; a running run's so far."""
    end = Coalesce(F("finished_at"), Value(now))
    return ExpressionWrapper(end - F("started_at"), output_field=DurationField())


def runs(filters: RunFilters, *, now: datetime) -> QuerySet[Run]:
    """Runs matching the filters, sorted, with `duration`, `retries` and `tool_errors` annotated."""
    # Top-level runs: a child run (docs/protocol.md, "Sub-agents") is shown in its parent's trace.
    rows = (
        Run.objects.filter(parent__isnull=True)
        .select_related("user", "feedback", "schedule", "trigger")
        .annotate(
            duration=_duration(now),
            # "api": started by the OpenAI-compatible endpoint; "schedule", "trigger": by one of those
            source=F("conversation__source"),
            retries=Count("model_calls", filter=Q(model_calls__attempt__gt=1), distinct=True),
            # Failures only: a call denied at approval, or expired, is not one (ToolRecord.outcome).
            tool_errors=Count("tool_records", filter=Q(tool_records__outcome=ERROR), distinct=True),
        )
    )
    if filters.conversation:
        rows = rows.filter(conversation_id=filters.conversation)
    if filters.user:
        rows = rows.filter(user__username=filters.user)
    if filters.status:
        rows = rows.filter(status=filters.status)
    if filters.model:
        rows = rows.filter(model=filters.model)
    if filters.since is not None:
        rows = rows.filter(started_at__gte=filters.since)
    if filters.until is not None:
        rows = rows.filter(started_at__lt=filters.until)
    if filters.errors:
        # A run "with errors": it failed, or a tool call or a model call attempt of it did.
        tool_failed = ToolRecord.objects.filter(run=OuterRef("pk"), outcome=ERROR)
        call_failed = ModelCall.objects.filter(run=OuterRef("pk")).exclude(error="").exclude(error=CANCELLED)
        rows = rows.filter(Q(status=Run.Status.FAILED) | ~Q(error="") | Q(Exists(tool_failed)) | Q(Exists(call_failed)))
    if filters.feedback:
        rows = rows.filter(**FEEDBACK_FILTERS[filters.feedback])
    if filters.origin:
        rows = rows.filter(imported=filters.origin == "imported")
    if filters.source:
        rows = rows.filter(conversation__source="" if filters.source == "chat" else filters.source)
    if filters.slower_than is not None:
        rows = rows.filter(duration__gt=timedelta(seconds=filters.slower_than))
    field = SORTS[filters.sort]
    order = F(field).desc(nulls_last=True) if filters.descending else F(field).asc(nulls_first=True)
    return rows.order_by(order, "-pk")


def model_names() -> list[str]:
    """The models runs used, for the list's filter (a GROUP BY: a handful of rows)."""
    return list(Run.objects.exclude(model="").values_list("model", flat=True).distinct().order_by("model"))


# -- a run's events -------------------------------------------------------------------------------
# Streamed a few words at a time: hundreds of rows of one kind in a row, unreadable one by one.
FOLDED_TYPES = ("text", "thinking")


def fold_deltas(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A run's event frames as the rows of its events table: each run of consecutive deltas of
    one kind (FOLDED_TYPES) is one row with their joined text and their count, the frames kept
    (`frames`) for the row to expand; any other event is a row of its own (count 1)."""
    rows: list[dict[str, Any]] = []
    for event in events:
        last = rows[-1] if rows else None
        if last is not None and event["type"] in FOLDED_TYPES and last["type"] == event["type"]:
            last["frames"].append(event)
            last["text"] += event.get("content", "")
            last["lastSeq"] = event["seq"]
            last["count"] += 1
            continue
        rows.append(
            {
                "type": event["type"],
                "seq": event["seq"],
                "lastSeq": event["seq"],
                "ts": event["ts"],
                "frames": [event],
                "count": 1,
                "text": event.get("content", "") if event["type"] in FOLDED_TYPES else "",
            }
        )
    return rows


def conversation_source(conversation_id: str) -> str:
    """Where a run's conversation was started ("api": the OpenAI-compatible endpoint, "schedule",
    "trigger": by one of those; "" the chat)."""
    return Conversation.objects.filter(pk=conversation_id).values_list("source", flat=True).first() or ""


def conversation_shown(conversation_id: str) -> Conversation | None:
    """The conversation the run list is filtered to, with what started it, for its heading."""
    return Conversation.objects.filter(pk=conversation_id).select_related("owner", "schedule", "trigger").first()


def run_starters(run_id: str) -> dict[str, Any]:
    """The schedule and the trigger that started a run (None: none did, or it is deleted), for the
    run page to name them."""
    run = Run.objects.filter(pk=run_id).select_related("schedule__owner", "trigger__owner").first()
    return {"schedule": run.schedule if run else None, "trigger": run.trigger if run else None}


def conversation_title(conversation_id: str) -> str:
    """The title of a run's conversation, for its page ("" when untitled or gone)."""
    return Conversation.objects.filter(pk=conversation_id).values_list("title", flat=True).first() or ""


# -- the dashboard -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Window:
    key: str
    span: timedelta
    bucket: timedelta
    label: str


WINDOWS = {
    "24h": Window("24h", timedelta(hours=24), timedelta(hours=1), "last 24 hours, per hour"),
    "7d": Window("7d", timedelta(days=7), timedelta(days=1), "last 7 days, per day"),
    "30d": Window("30d", timedelta(days=30), timedelta(days=1), "last 30 days, per day"),
}


def _percentile(rows: QuerySet, field: str, fraction: float) -> Any:
    """The value at `fraction` of the rows sorted by `field` (nearest rank); None without rows."""
    n = rows.count()
    if n == 0:
        return None
    index = min(n - 1, max(0, int(fraction * n + 0.5) - 1))
    return rows.order_by(field).values_list(field, flat=True)[index]


def _bucket_start(moment: datetime, bucket: timedelta) -> datetime:
    moment = moment.replace(minute=0, second=0, microsecond=0)
    return moment.replace(hour=0) if bucket >= timedelta(days=1) else moment


def dashboard(window: Window, *, now: datetime) -> dict[str, Any]:
    """The figures of the window's activity: imported runs (history a user wrote) left out."""
    since = _bucket_start(now - window.span, window.bucket) + window.bucket
    recent = Run.objects.filter(started_at__gte=since, imported=False)
    trunc = TruncDay if window.bucket >= timedelta(days=1) else TruncHour

    counts: dict[datetime, dict[str, int]] = {}
    moment = since
    while moment <= now:
        counts[moment] = {}
        moment += window.bucket
    by_bucket = (
        recent.annotate(bucket=trunc("started_at"))
        .values("bucket", "status")
        .annotate(n=Count("pk"))
        .order_by("bucket", "status")
    )
    for row in by_bucket:
        counts.setdefault(row["bucket"], {})[row["status"]] = row["n"]

    outcome = recent.exclude(status=Run.Status.RUNNING).aggregate(
        finished=Count("pk"), failed=Count("pk", filter=Q(status=Run.Status.FAILED))
    )
    finished = recent.exclude(status=Run.Status.RUNNING).filter(finished_at__isnull=False)
    timed = finished.annotate(duration=ExpressionWrapper(F("finished_at") - F("started_at"), DurationField()))
    calls = ModelCall.objects.filter(started_at__gte=since, run__imported=False)
    first_tokens = calls.filter(first_token_ms__isnull=False)

    return {
        "since": since,
        "runs_by_bucket": sorted(counts.items()),
        "total": sum(sum(c.values()) for c in counts.values()),
        "finished": outcome["finished"],
        "failed": outcome["failed"],
        "failure_rate": outcome["failed"] / outcome["finished"] if outcome["finished"] else None,
        "duration_p50": _percentile(timed, "duration", 0.50),
        "duration_p95": _percentile(timed, "duration", 0.95),
        "first_token_p50": _percentile(first_tokens, "first_token_ms", 0.50),
        "first_token_p95": _percentile(first_tokens, "first_token_ms", 0.95),
        "tokens_by_model": list(
            calls.values("run__model").annotate(tokens=Sum("total_tokens")).order_by("-tokens", "run__model")[:10]
        ),
        "tokens_by_user": list(
            calls.values("run__user__username")
            .annotate(tokens=Sum("total_tokens"))
            .order_by("-tokens", "run__user__username")[:10]
        ),
        "failing_tools": list(
            ToolRecord.objects.filter(started_at__gte=since, run__imported=False)
            .values("tool_name")
            .annotate(calls=Count("pk"), errors=Count("pk", filter=Q(outcome=ERROR)))
            .filter(errors__gt=0)
            .order_by("-errors", "tool_name")[:10]
        ),
    }


def usage_by_user(*, days: int, now: datetime) -> list[dict[str, Any]]:
    """Every user's tokens and cost over the last `days` calendar days of TIME_ZONE (imported runs
    never), most tokens first; `cost` None when none of their calls was priced."""
    today, _ = period_bounds("day", now)
    return list(
        ModelCall.objects.filter(started_at__gte=today - timedelta(days=days - 1), run__imported=False)
        .values("run__user__username")
        .annotate(
            prompt=Sum("prompt_tokens"),
            completion=Sum("completion_tokens"),
            tokens=Sum("total_tokens"),
            cost=Sum("cost"),
        )
        .order_by("-tokens", "run__user__username")
    )
