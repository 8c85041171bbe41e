"""A running run's life on the database: the heartbeat of its process, a cancel asked from
anywhere, its release by a stopping process, and its take-over when its process died
(run_interrupt: the open tool calls and approvals closed, then the run resumed or closed
`interrupted`, docs/protocol.md, "Run lifecycle")."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from chat.agent.answer import Answer
from chat.agent.approval import EXPIRED, call_outcome, open_requests
from chat.agent.events import (
    ApprovalResultEvent,
    CompleteEvent,
    ErrorCode,
    ErrorEvent,
    RunStatus,
    ToolEndEvent,
)
from chat.agent.tools import error_result
from chat.eventlog.append import batches_append
from chat.eventlog.frames import CHILD_KEY
from chat.eventlog.steers import steers_retake
from chat.eventlog.types import EventBatch, Interruption, ToolRecordData
from chat.exceptions import ConversationGone
from chat.models import (
    Conversation,
    Event,
    Run,
)

logger = logging.getLogger(__name__)


def runs_heartbeat(*, run_ids: list, worker: str) -> tuple[set, set]:
    """Mark the worker's runs alive. Returns (to_cancel, lost): the runs with a cancel requested,
    and those the worker no longer holds (finished by someone else, or resumed by another
    process after this one was taken for dead), which it must drop without a word."""
    held = Run.objects.filter(pk__in=run_ids, status=Run.Status.RUNNING, worker=worker)
    held.update(heartbeat_at=timezone.now())
    # Keyed by str: callers pass ids as str (the registry's keys) or UUID, the ORM returns UUIDs.
    flags = {str(pk): flag for pk, flag in held.values_list("pk", "cancel_requested")}
    to_cancel = {run_id for run_id in run_ids if flags.get(str(run_id))}
    lost = {run_id for run_id in run_ids if str(run_id) not in flags}
    return to_cancel, lost


def run_request_cancel(*, run_id) -> None:
    Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(cancel_requested=True)


def runs_cancel_deleted(*, conversation_id) -> list[tuple[Any, str]]:
    """Close `cancelled` the running run of a conversation being deleted, in the deletion's
    transaction: its own closing events could no longer be stored once the conversation is gone,
    and what /metrics keeps of it (chat.ops.metrics.retire) is this status. The (id, worker) of
    each, for its process to be asked to stop it once the deletion commits.

    The conversation's row is locked first, as the run's writes lock it first (their seqs): a
    deletion that took its events' and runs' rows before it deadlocked with a write under way
    (PostgreSQL aborted the deletion: a 503). The write now waits, then finds it gone."""
    list(Conversation.objects.select_for_update().filter(pk=conversation_id).values_list("pk"))
    runs = Run.objects.filter(conversation_id=conversation_id, status=Run.Status.RUNNING)
    found = list(runs.values_list("pk", "worker"))
    if found:
        runs.update(
            status=Run.Status.CANCELLED,
            finished_at=timezone.now(),
            error=f"{ErrorCode.CANCELLED}: The conversation was deleted.",
            cancel_requested=True,
        )
    return found


# A released run's heartbeat: stale for every reaper, whatever its timeout.
RELEASED_HEARTBEAT = datetime(2000, 1, 1, tzinfo=UTC)


def runs_release(*, run_ids: list, worker: str, resumes: int | None = None) -> int:
    """A stopping process hands its runs over: still running, but with a stale heartbeat and no
    worker, so that the next reaper pass of any process continues them. With `resumes`, only the
    attempt that many resumes in (a run lost to a database outage): the worker's own reaper may
    have resumed it meanwhile, and that later attempt, running here, is not to be released."""
    runs = Run.objects.filter(pk__in=run_ids, status=Run.Status.RUNNING, worker=worker)
    if resumes is not None:
        runs = runs.filter(resumes=resumes)
    return runs.update(heartbeat_at=RELEASED_HEARTBEAT, worker="")


def run_interrupt(
    *,
    run_id,
    message: str,
    stale_before: datetime | None = None,
    worker: str = "",
    max_resumes: int = 0,
    keep_open: Collection[str] = (),
    settled: Mapping[str, tuple[str, bool]] | None = None,
) -> Interruption | None:
    """Close the interrupted attempt of a run whose process is gone: a tool_end error for each
    open tool call, an expired approval_result and a tool_end error for each approval request
    still waiting, then error INTERRUPTED. While it has resumes left (fewer than max_resumes)
    the run is handed to `worker` to continue (the error says `resumed: true`); past that it
    completes `interrupted`. None when the run is not (or no longer) a stale running run, so
    that only one process takes it and a live one never is. `keep_open`: delegate calls left
    open, their child runs resumed with it (chat.eventlog.families); `settled`: {toolCallId:
    (result, is_error)} of delegate calls whose child runs had ended, which end so."""
    with transaction.atomic():
        runs = Run.objects.filter(pk=run_id, status=Run.Status.RUNNING)
        if stale_before is not None:
            runs = runs.filter(heartbeat_at__lt=stale_before)
        run = runs.select_for_update().first()
        if run is None:
            return None
        # Whole payloads: SQLite would decode an `arguments` string that holds JSON.
        logged = [
            {**payload, "seq": seq}
            for seq, payload in Event.objects.filter(run_id=run_id).order_by("seq").values_list("seq", "payload")
        ]
        ended = {e["toolCallId"] for e in logged if e["type"] == "tool_end"}
        open_calls = [
            (e["toolCallId"], e["toolName"], e["arguments"])
            for e in logged
            if e["type"] == "tool_start" and e["toolCallId"] not in ended and e["toolCallId"] not in keep_open
        ]
        now, ends = timezone.now(), settled or {}
        closing = [(*call, *ends.get(call[0], (error_result("interrupted"), True))) for call in open_calls]
        payloads = [
            ToolEndEvent(name, call_id, result, failed, 0).to_dict() for call_id, name, _, result, failed in closing
        ]
        records = [
            ToolRecordData(call_id, name, arguments, result, failed, now, 0, call_outcome(is_error=failed))
            for call_id, name, arguments, result, failed in closing
        ]
        # A request nobody answered before the process went: it expires (the user's answer could
        # not reach a run that is no more); a resumed model reads why and may ask again.
        for request in open_requests(logged):
            call_id, name = request["toolCallId"], request["toolName"]
            unasked = error_result(
                "interrupted: the server stopped before the user answered; call the tool again to ask again"
            )
            payloads += [
                ApprovalResultEvent(call_id, EXPIRED, "the server stopped before an answer came").to_dict(),
                ToolEndEvent(name, call_id, unasked, True, 0).to_dict(),
            ]
            outcome = call_outcome(is_error=True, decision=EXPIRED)
            records.append(ToolRecordData(call_id, name, request["arguments"], unasked, True, now, 0, outcome))
        # The dead worker's channel name is for operators (the log), not for the user's timeline.
        logger.info("run %s interrupted: its worker %s is gone", run_id, run.worker or "(released)")
        error = ErrorEvent(ErrorCode.INTERRUPTED, message).to_dict()
        # A compaction run (no user_message, docs/protocol.md "Compaction") is closed, never resumed.
        resumed = run.resumes < max_resumes and any(e["type"] == "user_message" for e in logged)
        if resumed:
            error["resumed"] = True
            answer = Answer()
            for event in logged:
                answer.add(event)
            if discarded := answer.attempt:
                error["discards"] = discarded[0]["seq"]
            payloads.append(error)
            steers_retake(run_id=run_id, logged=logged)
            run.resumes += 1
            run.worker, run.heartbeat_at = worker, timezone.now()
            run.save(update_fields=["resumes", "worker", "heartbeat_at"])
        else:
            payloads += [error, CompleteEvent(RunStatus.INTERRUPTED).to_dict()]
            run.status, run.finished_at, run.error = Run.Status.INTERRUPTED, timezone.now(), f"INTERRUPTED: {message}"
            run.save(update_fields=["status", "finished_at", "error"])
        if run.parent_id is not None:  # a child run's events name its parent (docs/protocol.md, "Sub-agents")
            lineage = {CHILD_KEY: str(run.parent_id), "parentToolCallId": run.parent_tool_call_id}
            payloads = [{**payload, **lineage} for payload in payloads]
        (frames,) = batches_append([EventBatch(run.conversation_id, run_id, payloads, records)])
        if frames is None:
            raise ConversationGone(str(run.conversation_id))
    return Interruption(run, frames, resumed)
