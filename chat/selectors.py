"""Reads. Every selector that takes a user returns only that user's data."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db.models import BooleanField, Exists, ExpressionWrapper, F, OuterRef, Q, QuerySet, Sum, TextField
from django.db.models.functions import Cast

from . import history, search
from .agent.approval import open_requests
from .frames import EventFrame, event_frame, frame_time
from .models import RAW_PAYLOAD, AgentProfile, Conversation, Event, Feedback, ModelCall, Run, ToolRecord, payload_of
from .paging import page_of
from .pricing import cost

EVENT_PAGE = 5_000
CONVERSATION_PAGE = 50
CONVERSATION_PAGE_MAX = 200


def conversations_for_user(*, user) -> QuerySet[Conversation]:
    running = Run.objects.filter(conversation=OuterRef("pk"), status=Run.Status.RUNNING)
    return (
        Conversation.objects.filter(owner=user)
        .select_related("agent")
        .annotate(running=Exists(running))
        .order_by("-updated_at")
    )


def agent_profiles_for_user(*, user) -> QuerySet[AgentProfile]:
    """The enabled profiles the user may pick: open to everyone, or naming the user or one of
    the user's groups."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return AgentProfile.objects.none()
    allowed = Q(everyone=True) | Q(users=user) | Q(groups__in=user.groups.all())
    # pk IN (...) rather than .distinct(): the M2M joins repeat a profile once per matching row.
    return AgentProfile.objects.filter(enabled=True, pk__in=AgentProfile.objects.filter(allowed).values("pk")).order_by(
        "name", "slug"
    )


def agent_profile_for_user(*, user, slug: str) -> AgentProfile | None:
    # A NUL is never in a stored slug; PostgreSQL would refuse the lookup (DataError), not miss.
    if "\x00" in slug:
        return None
    return agent_profiles_for_user(user=user).filter(slug=slug).first()


def conversations_page(
    *, user, limit: int = CONVERSATION_PAGE, before: str | None = None, q: str = ""
) -> tuple[list, str | None]:
    """One page of the user's conversations, newest first, and the cursor of the next page (None on
    the last); BadCursor (a ValueError) for a `before` this list did not hand out. With a query `q`,
    only the conversations that match it (chat.search), ranked, each with a `snippet` attribute."""
    rows = conversations_for_user(user=user)
    if q.strip():
        rows = search.conversations_matching(rows, q=q, owner=user)
    page, cursor = page_of(rows, limit=min(limit, CONVERSATION_PAGE_MAX), before=before, ranked=bool(q.strip()))
    if q.strip():
        found = search.snippets(conversations=page, q=q)
        for conversation in page:
            conversation.snippet = found.get(conversation.pk, "")
    return page, cursor


def events_for_export(*, conversation_id) -> list[EventFrame]:
    """Every event frame of a conversation, in order, as sent (with `ts`, when it was stored)."""
    return _frames(Event.objects.filter(conversation_id=conversation_id).order_by("seq"))


def conversation_for_user(*, user, conversation_id) -> Conversation | None:
    """The conversation if it exists and is the user's; None otherwise (callers answer 404 alike)."""
    if not getattr(user, "is_authenticated", False):
        return None
    return conversations_for_user(user=user).filter(pk=conversation_id).first()


def is_user_message(*, conversation_id, seq: int) -> bool:
    return Event.objects.filter(conversation_id=conversation_id, seq=seq, type="user_message").exists()


def run_for_user(*, user, run_id) -> Run | None:
    """The run if it belongs to one of the user's conversations; None otherwise (404 alike)."""
    if not getattr(user, "is_authenticated", False):
        return None
    return Run.objects.filter(pk=run_id, conversation__owner=user).first()


def feedback_of_conversation(*, conversation_id) -> list[Feedback]:
    return list(Feedback.objects.filter(run__conversation_id=conversation_id).order_by("updated_at"))


def events_after(
    *, conversation_id, after: int = 0, until: int | None = None, limit: int | None = None
) -> list[EventFrame]:
    """Protocol frames of the persisted events with after < seq (<= until), in order."""
    rows = Event.objects.filter(conversation_id=conversation_id, seq__gt=after)
    if until is not None:
        rows = rows.filter(seq__lte=until)
    rows = rows.order_by("seq")
    if limit is not None:
        rows = rows[:limit]
    return _frames(rows)


# The columns of a frame, read as the database driver gives them and decoded in _frames rather
# than by the fields' converters, row by row: the payload as JSON text (models.RAW_PAYLOAD);
# `created_at` as text, shared by a whole batch and parsed once for it (on PostgreSQL Django's
# time zone loader runs in Python for each row); on SQLite `run_id` is text shared by a whole
# run. The converters took 25-30% of the CPU of a 10,000-event replay.
_RAW_FRAME_COLUMNS = {
    "raw_run": ExpressionWrapper(F("run_id"), output_field=TextField()),
    "raw_payload": RAW_PAYLOAD,
    "raw_created": Cast("created_at", TextField()),
}


def _frames(events: QuerySet[Event]) -> list[EventFrame]:
    """The frames of the events, in the queryset's order."""
    rows = events.annotate(**_RAW_FRAME_COLUMNS).values_list("seq", *_RAW_FRAME_COLUMNS)
    frames: list[EventFrame] = []
    last_run, run_id, last_time, ts = None, "", None, ""
    for seq, raw_run, raw_payload, raw_created in rows:
        if raw_run != last_run:
            last_run, run_id = raw_run, str(raw_run if isinstance(raw_run, uuid.UUID) else uuid.UUID(raw_run))
        if raw_created != last_time:
            last_time, ts = raw_created, frame_time(_stored_time(raw_created))
        frames.append(event_frame(payload_of(raw_payload), seq=seq, run_id=run_id, ts=ts))
    return frames


def _stored_time(text: str) -> datetime:
    """A DateTimeField read as text: PostgreSQL's ISO form with its offset, or on SQLite the UTC
    time Django wrote, without one."""
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def running_run(*, conversation_id) -> Run | None:
    return Run.objects.filter(conversation_id=conversation_id, status=Run.Status.RUNNING).first()


def run_in_progress(*, conversation_id) -> tuple[Run | None, list[str]]:
    """The conversation's running run, if any, and the toolCallIds of its approval requests
    still waiting for an answer (`sync.pendingApprovals`, PROTOCOL section 7)."""
    run = running_run(conversation_id=conversation_id)
    if run is None:
        return None, []
    return run, [request["toolCallId"] for request in open_requests(_approval_events(run_id=run.pk))]


def _approval_events(*, run_id) -> list[dict[str, Any]]:
    rows = Event.objects.filter(run_id=run_id, type__in=("approval_request", "approval_result")).order_by("seq")
    return list(rows.values_list("payload", flat=True))


def approval_state(*, conversation_id, tool_call_id: str) -> tuple[str, Run | None]:
    """Whether a request of the conversation can still be answered: ("open", its run) while it
    waits; ("closed", None) once answered, expired or its run ended; ("unknown", None) when the
    conversation never had it."""
    run = running_run(conversation_id=conversation_id)
    if run is not None and any(r["toolCallId"] == tool_call_id for r in open_requests(_approval_events(run_id=run.pk))):
        return "open", run
    asked = Event.objects.filter(
        conversation_id=conversation_id, type="approval_request", payload__toolCallId=tool_call_id
    ).exists()
    return ("closed" if asked else "unknown"), None


def runs_memory_events(*, runs: dict) -> dict[object, list[EventFrame]]:
    """For running runs, {conversation_id: run_id}: the events each one's memory is made of, the
    runs of the branch that leads to it (PROTOCOL section 6) and its own events so far
    (chat.history makes the model's messages of them). Two queries for them all: the
    user_messages (seq and parentSeq only, through their own index) to walk the branches, then
    the events of the runs on them; never the turns of other branches."""
    branches: dict = {key: [] for key in runs}
    rows = user_message_rows(conversation_ids=list(runs))
    for conversation_id, run_id in runs.items():
        branches[conversation_id] = history.branch_run_ids(rows.get(conversation_id, []), run_id=run_id)
        if not branches[conversation_id]:
            branches[conversation_id] = [run_id]  # its user_message is not stored (cannot be): its own events
    wanted = [run_id for run_ids in branches.values() for run_id in run_ids]
    out: dict = {key: [] for key in runs}
    events = (
        Event.objects.filter(run_id__in=wanted)
        .order_by("conversation_id", "seq")
        .values_list("conversation_id", "seq", "run_id", "payload", "created_at")
    )
    for conversation_id, seq, run_id, payload, created_at in events:
        if conversation_id in out:
            out[conversation_id].append(event_frame(payload, seq=seq, run_id=run_id, ts=frame_time(created_at)))
    return out


def user_message_rows(*, conversation_ids: list) -> dict[object, list[history.UserMessageRow]]:
    """Each conversation's user_messages as (seq, runId, parentSeq, has parentSeq), in seq order."""
    rows = (
        Event.objects.filter(conversation_id__in=conversation_ids, type="user_message")
        .annotate(has_parent=ExpressionWrapper(Q(payload__has_key="parentSeq"), output_field=BooleanField()))
        .order_by("conversation_id", "seq")
        .values_list("conversation_id", "seq", "run_id", "payload__parentSeq", "has_parent")
    )
    out: dict[object, list[history.UserMessageRow]] = {}
    for conversation_id, seq, run_id, parent, has_parent in rows:
        out.setdefault(conversation_id, []).append((seq, run_id, parent, bool(has_parent)))
    return out


def stale_runs(*, older_than) -> list[Run]:
    return list(Run.objects.filter(status=Run.Status.RUNNING, heartbeat_at__lt=older_than))


def _ms(start: datetime | None, end: datetime | None) -> int | None:
    return None if start is None or end is None else int((end - start).total_seconds() * 1000)


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else frame_time(moment)


def _usage(prompt: int, completion: int, total: int) -> dict[str, int]:
    return {"promptTokens": prompt, "completionTokens": completion, "totalTokens": total}


def run_trace(*, run_id) -> dict[str, Any] | None:
    """Everything the run inspector shows of one run (PROTOCOL.md section 8), or None when there
    is no such run. Staff only: the caller checks (this reads any user's run)."""
    run = Run.objects.filter(pk=run_id).select_related("user", "feedback").first()
    if run is None:
        return None
    feedback = getattr(run, "feedback", None)  # absent: Django raises an AttributeError subclass
    model_calls = [
        {
            "iteration": call.iteration,
            "attempt": call.attempt,
            "startedAt": frame_time(call.started_at),
            "firstTokenMs": call.first_token_ms,
            "durationMs": call.duration_ms,
            "promptTokens": call.prompt_tokens,
            "completionTokens": call.completion_tokens,
            "finishReason": call.finish_reason or None,
            "error": call.error or None,
            "estimated": call.usage_estimated,
            "messageCount": call.message_count,
            **({"requestMessages": call.request_messages} if call.request_messages is not None else {}),
        }
        for call in ModelCall.objects.filter(run=run).order_by("started_at", "id")
    ]
    tool_calls = [
        {
            "toolCallId": record.tool_call_id,
            "toolName": record.tool_name,
            "arguments": record.arguments,
            "result": record.result,
            "isError": record.is_error,
            "outcome": record.outcome,
            "startedAt": frame_time(record.started_at),
            "durationMs": record.duration_ms,
        }
        for record in ToolRecord.objects.filter(run=run).order_by("started_at", "id")
    ]
    events = _frames(Event.objects.filter(run=run).order_by("seq"))
    return {
        "run": {
            "id": str(run.pk),
            "conversationId": str(run.conversation_id),
            "user": run.user.get_username(),
            "status": run.status,
            "imported": run.imported,
            "model": run.model,
            "startedAt": frame_time(run.started_at),
            "finishedAt": _time(run.finished_at),
            "durationMs": _ms(run.started_at, run.finished_at),
            "usage": _usage(run.prompt_tokens, run.completion_tokens, run.total_tokens),
            "iterations": run.iterations,
            "error": run.error or None,
            "cost": cost(
                settings.AGENT_MODEL_PRICES,
                model=run.model,
                prompt_tokens=run.prompt_tokens,
                completion_tokens=run.completion_tokens,
            ),
            "feedback": None
            if feedback is None
            else {"rating": feedback.rating, "comment": feedback.comment, "updatedAt": frame_time(feedback.updated_at)},
        },
        "modelCalls": model_calls,
        "toolCalls": tool_calls,
        "events": events,
    }


def usage_for_user(*, user, now: datetime) -> dict[str, Any]:
    """The user's tokens today and this month (UTC), in all and per model, from their model calls."""
    today = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    month = today.replace(day=1)
    rows = (
        ModelCall.objects.filter(run__user=user, started_at__gte=month)
        .values("run__model")
        .annotate(
            p=Sum("prompt_tokens"),
            c=Sum("completion_tokens"),
            t=Sum("total_tokens"),
            pd=Sum("prompt_tokens", filter=Q(started_at__gte=today)),
            cd=Sum("completion_tokens", filter=Q(started_at__gte=today)),
            td=Sum("total_tokens", filter=Q(started_at__gte=today)),
        )
        .order_by("run__model")
        .values_list("run__model", "p", "c", "t", "pd", "cd", "td")
    )
    zero = (0, 0, 0)
    day_total, month_total = list(zero), list(zero)
    models = []
    for model, *sums in rows:
        month_sums, day_sums = [n or 0 for n in sums[:3]], [n or 0 for n in sums[3:]]
        day_total = [a + b for a, b in zip(day_total, day_sums)]
        month_total = [a + b for a, b in zip(month_total, month_sums)]
        models.append({"model": model, "today": _usage(*day_sums), "month": _usage(*month_sums)})
    return {
        "today": _usage(*day_total),
        "month": _usage(*month_total),
        "models": models,
        "dailyTokenQuota": settings.AGENT_DAILY_TOKEN_QUOTA or None,
    }
