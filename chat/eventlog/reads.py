"""Reads of the event log: events after a seq (the resume and catch-up of every socket), the
run in progress with its open approvals, the events a run's memory is built from, the runs
whose process died."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from django.db import connection
from django.db.models import BooleanField, ExpressionWrapper, F, Q, QuerySet, TextField
from django.db.models.functions import Cast

from chat.agent.approval import open_requests
from chat.eventlog import history
from chat.eventlog.frames import CHILD_KEY, EventFrame, event_frame, frame_time
from chat.models import RAW_PAYLOAD, Conversation, Event, QueuedMessage, Run, payload_of

EVENT_PAGE = 5_000


def events_for_export(*, conversation_id) -> list[EventFrame]:
    """Every event frame of a conversation, in order, as sent (with `ts`, when it was stored)."""
    return frames_of(Event.objects.filter(conversation_id=conversation_id).order_by("seq"))


def is_user_message(*, conversation_id, seq: int) -> bool:
    return Event.objects.filter(conversation_id=conversation_id, seq=seq, type="user_message").exists()


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
    return frames_of(rows)


def run_door(*, run_id) -> dict[str, Any]:
    """The user_message of a run as its door recorded it: `via` and `request` ({} when none)."""
    payload = Event.objects.filter(run_id=run_id, type="user_message").order_by("seq").values_list("payload", flat=True)
    first = payload.first() or {}
    return {"via": first.get("via"), "request": first.get("request") or {}}


def run_events(*, conversation_id, run_id) -> list[EventFrame]:
    """Every event of one run, in order."""
    return frames_of(Event.objects.filter(conversation_id=conversation_id, run_id=run_id).order_by("seq"))


# The columns of a frame, read as the database driver gives them and decoded in frames_of rather
# than by the fields' converters, row by row: the payload as JSON text (models.RAW_PAYLOAD);
# `created_at` as text, shared by a whole batch and parsed once for it (on PostgreSQL Django's
# time zone loader runs in Python for each row); on SQLite `run_id` is text shared by a whole
# run. The converters took 25-30% of the CPU of a 10,000-event replay.
_RAW_FRAME_COLUMNS = {
    "raw_run": ExpressionWrapper(F("run_id"), output_field=TextField()),
    "raw_payload": RAW_PAYLOAD,
    "raw_created": Cast("created_at", TextField()),
}


def frames_of(events: QuerySet[Event]) -> list[EventFrame]:
    """The frames of the events, in the queryset's order."""
    rows = events.annotate(**_RAW_FRAME_COLUMNS).values_list("seq", *_RAW_FRAME_COLUMNS)
    frames: list[EventFrame] = []
    last_run, run_id, last_time, ts = None, None, None, ""
    for seq, raw_run, raw_payload, raw_created in rows:
        if raw_run is None:  # `queued`, `unqueued`: the conversation's
            last_run, run_id = None, None
        elif raw_run != last_run:
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
    return Run.objects.filter(conversation_id=conversation_id, status=Run.Status.RUNNING, parent__isnull=True).first()


def run_in_progress(*, conversation_id) -> tuple[Run | None, list[str]]:
    """The conversation's running (top-level) run, if any, and the toolCallIds of the approval
    requests still waiting for an answer, its child runs' too (`sync.pendingApprovals`,
    docs/protocol.md, "Approvals" and "Sub-agents")."""
    run = running_run(conversation_id=conversation_id)
    if run is None:
        return None, []
    runs = [run, *_running_children(conversation_id=conversation_id)]
    return run, [request["toolCallId"] for r in runs for request in open_requests(_approval_events(run_id=r.pk))]


def _running_children(*, conversation_id) -> list[Run]:
    """The conversation's running child runs, in start order."""
    rows = Run.objects.filter(conversation_id=conversation_id, status=Run.Status.RUNNING, parent__isnull=False)
    return list(rows.order_by("started_at"))


def _approval_events(*, run_id) -> list[dict[str, Any]]:
    rows = Event.objects.filter(run_id=run_id, type__in=("approval_request", "approval_result")).order_by("seq")
    return list(rows.values_list("payload", flat=True))


def approval_state(*, conversation_id, tool_call_id: str) -> tuple[str, Run | None]:
    """Whether a request of the conversation can still be answered: ("open", its run) while it
    waits; ("closed", None) once answered, expired or its run ended; ("unknown", None) when the
    conversation never had it."""
    run = running_run(conversation_id=conversation_id)
    runs = [*reversed(_running_children(conversation_id=conversation_id)), run] if run is not None else []
    for asking in runs:  # the newest child first: a delegate's request waits while its parent's call does
        if any(r["toolCallId"] == tool_call_id for r in open_requests(_approval_events(run_id=asking.pk))):
            return "open", asking
    asked = Event.objects.filter(
        conversation_id=conversation_id, type="approval_request", payload__toolCallId=tool_call_id
    ).exists()
    return ("closed" if asked else "unknown"), None


def run_asked(*, run_id, tool_call_id: str) -> bool:
    """Whether this run made the approval request (ids such as `call_0` recur from run to run)."""
    return Event.objects.filter(run_id=run_id, type="approval_request", payload__toolCallId=tool_call_id).exists()


def runs_memory_events(*, runs: dict) -> dict[object, list[EventFrame]]:
    """For running runs, {conversation_id: run_id}: the events each one's memory is made of, the
    runs of the branch that leads to it (docs/protocol.md, "Versions: edits, regenerated answers and branches") and its own events so far
    (chat.eventlog.history makes the model's messages of them). Two queries for them all: the
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
        .exclude(payload__has_key=CHILD_KEY)  # a child run's task is no turn of the conversation
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


def queue_waiting(*, conversation_id) -> tuple[list[str], list[str]]:
    """The queueIds of the conversation's waiting messages, in the order they will start, and of
    the steers its run has not taken in yet (`sync.queue` and `sync.pendingSteers`,
    docs/protocol.md, "Queued messages"). One query."""
    rows = QueuedMessage.objects.filter(conversation_id=conversation_id).withdrawable().order_by("-steered", "seq")
    waiting, steers = [], []
    for pk, steer_run in rows.values_list("pk", "steer_run_id"):
        (waiting if steer_run is None else steers).append(str(pk))
    return waiting, steers


def sync_state(*, conversation_id) -> tuple[Run | None, list[str], list[str], list[str]]:
    """What `sync` says after the history (chat.eventlog.frames.sync_frame): the run under way,
    its approval requests still open, the messages waiting for it and its pending steers."""
    run, pending = run_in_progress(conversation_id=conversation_id)
    return run, pending, *queue_waiting(conversation_id=conversation_id)


def history_page(
    *, conversation_id, after: int
) -> tuple[list[dict[str, Any]], tuple[Run | None, list[str], list[str], list[str]] | None]:
    """A page of the history after `after` and, once it is the last page, what `sync` says
    (sync_state), read in one trip to the database's thread; None while more pages follow."""
    frames = events_after(conversation_id=conversation_id, after=after, limit=EVENT_PAGE)
    if len(frames) == EVENT_PAGE:
        return frames, None
    return frames, sync_state(conversation_id=conversation_id)


def last_seqs(*, conversation_ids: list) -> dict[Any, int]:
    """The last seq handed out in each of these conversations (a deleted one is left out): one
    query, or one per max_query_params ids on a database that bounds them (SQLite's 999)."""
    ids = list(conversation_ids)
    size = connection.features.max_query_params or len(ids) or 1
    out: dict[Any, int] = {}
    for start in range(0, len(ids), size):
        rows = Conversation.objects.filter(pk__in=ids[start : start + size]).values_list("pk", "last_seq")
        out.update(rows)
    return out


def sync_states(*, conversation_ids: list) -> dict[Any, tuple[Run | None, list[str], list[str], list[str]]]:
    """sync_state of many conversations: two queries find the few with a run under way or a message
    waiting, which are read one by one (sync_state); the rest have nothing to say."""
    ids = list(conversation_ids)
    busy = set(
        Run.objects.filter(conversation_id__in=ids, status=Run.Status.RUNNING, parent__isnull=True).values_list(
            "conversation_id", flat=True
        )
    )
    busy.update(
        QueuedMessage.objects.filter(conversation_id__in=ids).withdrawable().values_list("conversation_id", flat=True)
    )
    return {cid: sync_state(conversation_id=cid) if cid in busy else (None, [], [], []) for cid in ids}
