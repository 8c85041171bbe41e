"""Appending events, the hot path of every run.

Events get their `seq` from Conversation.last_seq, bumped by an UPDATE in the same
transaction that inserts them: the row lock serialises writers of one conversation across
processes, so seqs are gap-free and committed in order. Batches of many runs are written in
one transaction (events_append_many, the group commit of chat.runtime.writer), with the tool
records, model calls and outcome that go with them."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.db.models import F, Sum
from django.utils import timezone

from chat.agent.text import clean, clean_value
from chat.eventlog import followups, memory, search, steers
from chat.eventlog.frames import RUNLESS, EventFrame, event_frame, frame_time
from chat.eventlog.inserts import insert_rows
from chat.eventlog.types import EventBatch, RunOutcome, ToolRecordData
from chat.exceptions import ConversationGone
from chat.models import (
    Conversation,
    Event,
    ModelCall,
    Run,
    ToolRecord,
)
from chat.pricing import cost

# An Event row's fields as batches_append gives them (its id is the database's).
EVENT_COLUMNS = ("conversation_id", "run_id", "seq", "type", "payload", "created_at")


def events_append(
    *,
    conversation_id,
    run_id,
    payloads: list[dict[str, Any]],
    tool_records: list[ToolRecordData] = (),
    outcome: RunOutcome | None = None,
) -> list[EventFrame]:
    """Store one batch of a run's events in one transaction; returns the frames."""
    batch = EventBatch(conversation_id, run_id, payloads, list(tool_records), outcome)
    frames = events_append_many(batches=[batch])[0]
    if frames is None:
        raise ConversationGone(str(conversation_id))
    return frames


def events_append_many(*, batches: list[EventBatch]) -> list[list[EventFrame] | None]:
    """Store the batches of many runs in one transaction (group commit: one commit for every
    run of the process that has something to write, instead of one each). Returns each
    batch's frames, or None for a batch whose conversation was deleted (nothing stored).

    A handful of statements whatever the number of batches: the writer runs in a thread
    that must win the GIL back from a busy event loop after every statement.

    Raises CommitUnknown when the connection failed at COMMIT: the rows may or may not be
    stored, and only events_stored (on a new connection) can tell."""
    results = None
    mark = followups.mark()
    try:
        with transaction.atomic():
            results = batches_append(batches)
    except Exception as exc:
        followups.rollback(mark)
        if results is None:  # before COMMIT: rolled back, nothing of the round is stored
            raise
        raise CommitUnknown(results) from exc
    return results


class CommitUnknown(OperationalError):
    """The COMMIT of a round of events failed: `results` are its frames if it was stored."""

    def __init__(self, results: list[list[EventFrame] | None]) -> None:
        super().__init__("the connection failed at COMMIT; the round may be stored")
        self.results = results


def events_stored(*, results: list[list[EventFrame] | None]) -> bool:
    """Whether a round whose COMMIT failed is in the database: one of its events is (a round is
    one transaction, all or nothing), under the seq and run it was given."""
    frame = next((frames[0] for frames in results if frames), None)
    return frame is not None and Event.objects.filter(seq=frame["seq"], run_id=frame["runId"]).exists()


def batches_append(batches: list[EventBatch]) -> list[list[EventFrame] | None]:
    """events_append_many inside the caller's transaction (a run start's, a take-over's): the
    one place where payloads become Event rows (every other write of events goes through it)."""
    results: list[list[EventFrame] | None] = [None] * len(batches)
    batches = _with_steers_left(batches)
    events: list[tuple] = []  # EVENT_COLUMNS
    now = timezone.now()
    ts = frame_time(now)  # every event of the round shares `now`: formatted once
    counts: dict[Any, int] = {}
    for batch in batches:
        key = conversation_key(batch.conversation_id)
        counts[key] = counts.get(key, 0) + len(batch.payloads)
    next_seq = {key: last - counts[key] + 1 for key, last in _allocate_seqs(counts, now).items()}
    live = [batch for batch in batches if conversation_key(batch.conversation_id) in next_seq]
    calls = [ModelCall(run_id=b.run_id, **clean_value(vars(call))) for b in live for call in b.model_calls]
    if calls and settings.AGENT_MODEL_PRICES:
        _priced(calls)
    if calls:
        ModelCall.objects.bulk_create(calls)
    completions = _completions([b.run_id for b in live if b.payloads and b.payloads[-1]["type"] == "complete"], now)
    for index, batch in enumerate(batches):
        key = conversation_key(batch.conversation_id)
        if key not in next_seq:
            continue  # the conversation is gone
        first = next_seq[key]
        next_seq[key] += len(batch.payloads)
        # The one place every event and tool record becomes a row (and so a frame): text the
        # database, orjson or msgpack would refuse (NUL, lone surrogates) is cleaned here.
        payloads = [clean_value(p) for p in batch.payloads]
        completion = completions.get(str(batch.run_id)) if payloads and payloads[-1]["type"] == "complete" else None
        if completion is not None:
            payloads[-1] = {**payloads[-1], **completion.fields()}
        run_ids = [None if p["type"] in RUNLESS else batch.run_id for p in payloads]
        events += ((key, run_ids[i], first + i, p["type"], p, now) for i, p in enumerate(payloads))
        results[index] = [event_frame(p, seq=first + i, run_id=run_ids[i], ts=ts) for i, p in enumerate(payloads)]
        if batch.tool_records:
            ToolRecord.objects.bulk_create(
                ToolRecord(run_id=batch.run_id, **clean_value(vars(record))) for record in batch.tool_records
            )
        run_fields: dict[str, Any] = {}
        if completion is not None:  # the run's totals: every attempt, over resumes too
            run_fields.update(finished_at=now, **completion.own)
        if batch.outcome is not None:
            outcome = batch.outcome
            run_fields.update(status=outcome.status, iterations=outcome.iterations, error=clean(outcome.error))
            run_fields.setdefault("finished_at", now)
        if run_fields:
            Run.objects.filter(pk=batch.run_id).update(**run_fields)
    insert_rows(Event, EVENT_COLUMNS, events)
    # A run is indexed for search once, with the batch that completes it (`complete` is a
    # run's last event): no work per delta.
    finished = [
        batch.run_id
        for batch, frames in zip(batches, results)
        if frames is not None and batch.payloads and batch.payloads[-1]["type"] == "complete"
    ]
    for start in range(0, len(finished), memory.CHUNK):
        runs = memory.events_of(finished[start : start + memory.CHUNK])  # read once for both
        search.documents_store(runs=runs)
        memory.checkpoints_write(runs=runs)
    if finished:
        # The first waiting message of each conversation starts now, its user_message right
        # after the `complete` (docs/protocol.md, "Queued messages").
        ended = {conversation_key(b.conversation_id): None for b, f in zip(batches, results) if f and _completes(b)}
        followups.after_completes(list(ended))
    return results


def _with_steers_left(batches: list[EventBatch]) -> list[EventBatch]:
    """The batches, each that completes a run with the steers it did not take in now waiting
    (their `queued`, runless, right before its `complete`: docs/protocol.md, "Steering")."""
    left = steers.steers_left(b.run_id for b in batches if _completes(b))
    if not left:
        return batches
    return [
        replace(b, payloads=[*b.payloads[:-1], *left[str(b.run_id)], b.payloads[-1]])
        if _completes(b) and str(b.run_id) in left
        else b
        for b in batches
    ]


def _completes(batch: EventBatch) -> bool:
    return bool(batch.payloads) and batch.payloads[-1]["type"] == "complete"


@dataclass(frozen=True)
class _Completion:
    duration_ms: int
    usage: dict[str, int]  # prompt_tokens, completion_tokens, total_tokens: its own and its child runs'
    own: dict[str, int]  # its own model calls' alone (the Run row's: /metrics sums them)

    def fields(self) -> dict[str, Any]:
        """What `complete` carries (docs/protocol.md, "Events")."""
        u = self.usage
        return {
            "durationMs": self.duration_ms,
            "usage": {
                "promptTokens": u["prompt_tokens"],
                "completionTokens": u["completion_tokens"],
                "totalTokens": u["total_tokens"],
            },
        }


def _completions(run_ids: list, now: datetime) -> dict[str, _Completion]:
    """For the runs completing in this round, keyed by str(run id): their duration from start to
    `now` and their tokens summed over their model calls. Two queries for the whole round."""
    if not run_ids:
        return {}
    started = dict(Run.objects.filter(pk__in=run_ids).values_list("pk", "started_at"))
    root = _tree_roots(list(started))
    sums: dict[Any, dict[str, int]] = {}
    own: dict[Any, dict[str, int]] = {}
    for run, p, c, t in (
        ModelCall.objects.filter(run_id__in=root)
        .values("run")
        .annotate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"), t=Sum("total_tokens"))
        .values_list("run", "p", "c", "t")
    ):
        total = sums.setdefault(root[run], {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
        total["prompt_tokens"] += p or 0
        total["completion_tokens"] += c or 0
        total["total_tokens"] += t or 0
        if run in started:
            own[run] = {"prompt_tokens": p or 0, "completion_tokens": c or 0, "total_tokens": t or 0}
    zero = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    return {
        str(pk): _Completion(max(0, int((now - start).total_seconds() * 1000)), sums.get(pk, zero), own.get(pk, zero))
        for pk, start in started.items()
    }


def _tree_roots(run_ids: list) -> dict[Any, Any]:
    """{run id: the run among `run_ids` whose tree holds it}: each run and its descendants (child
    runs, docs/protocol.md, "Sub-agents"), so that a run's usage is its own and its children's. A
    query per level, one when no run has children."""
    root = {pk: pk for pk in run_ids}
    frontier = list(run_ids)
    while frontier:
        children = list(Run.objects.filter(parent_id__in=frontier).values_list("pk", "parent_id"))
        frontier = [pk for pk, _ in children if pk not in root]
        root.update((pk, root[parent]) for pk, parent in children if pk in frontier)
    return root


def conversation_key(conversation_id):
    """A conversation id as its column holds it (a str from a frame, a UUID from a row)."""
    return Conversation._meta.pk.to_python(conversation_id)


def _allocate_seqs(counts: dict[Any, int], now: datetime) -> dict[Any, int]:
    """Bump each conversation's last_seq by its count; returns the new last_seq of each one that
    exists. One UPDATE ... RETURNING for all of them where the database has it."""
    if connection.vendor == "sqlite" and sqlite3.sqlite_version_info < (3, 35):
        out = {}
        for key, count in counts.items():
            rows = Conversation.objects.filter(pk=key)
            if rows.update(last_seq=F("last_seq") + count, updated_at=now):
                out[key] = rows.values_list("last_seq", flat=True).get()
        return out
    meta, quote = Conversation._meta, connection.ops.quote_name
    pk, last, updated = quote(meta.pk.column), quote("last_seq"), quote("updated_at")
    ids = {key: meta.pk.get_db_prep_value(key, connection) for key in counts}
    sql = (
        f"UPDATE {quote(meta.db_table)} SET {last} = {last} + CASE {pk} "
        + " ".join(["WHEN %s THEN %s"] * len(counts))
        + f" END, {updated} = %s WHERE {pk} IN ({', '.join(['%s'] * len(counts))}) RETURNING {pk}, {last}"
    )
    params = [x for key, count in counts.items() for x in (ids[key], count)]
    params += [meta.get_field("updated_at").get_db_prep_value(now, connection), *ids.values()]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {meta.pk.to_python(key): value for key, value in cursor.fetchall()}


def _priced(calls: list[ModelCall]) -> None:
    """Each call's cost at the prices in force now (docs/protocol.md, "Budgets"): fixed when it
    is recorded; None for a model without a price."""
    models = dict(Run.objects.filter(pk__in={call.run_id for call in calls}).values_list("pk", "model"))
    for call in calls:
        call.cost = cost(
            settings.AGENT_MODEL_PRICES,
            model=models.get(call.run_id, ""),
            prompt_tokens=call.prompt_tokens,
            completion_tokens=call.completion_tokens,
        )
