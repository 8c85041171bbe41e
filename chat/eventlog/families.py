"""A dead process's run taken over with its running child runs (docs/protocol.md, "Sub-agents"),
together, by one process, in one transaction: each closed as section 9 says (run_interrupt) and
resumed while it has resumes left, its ancestors too. A delegate call whose child run is resumed
stays open: the resumed parent ends it with that child's outcome before its next model call."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from chat.eventlog.children import ended_children
from chat.eventlog.takeover import run_interrupt
from chat.eventlog.types import Interruption
from chat.models import Run


@dataclass(frozen=True)
class Waiting:
    """A delegate call of a resumed run, left open for its resumed child run."""

    tool_call_id: str
    tool_name: str
    child_run_id: str
    slug: str


@dataclass
class Taken:
    interruption: Interruption
    waits: list[Waiting] = field(default_factory=list)


def family_interrupt(*, run_id, stale_before: datetime, worker: str, message: str, max_resumes: int) -> list[Taken]:
    """Take the stale top-level run `run_id` and its running descendants, in the caller's
    transaction: the deepest first, the top-level run last. [] when the run is not (or no
    longer) a stale running run: another process was quicker."""
    top = (
        Run.objects.select_for_update()
        .filter(pk=run_id, status=Run.Status.RUNNING, heartbeat_at__lt=stale_before, parent__isnull=True)
        .first()
    )
    if top is None:
        return []
    levels: list[list[Run]] = []
    frontier = [top.pk]
    while frontier:
        level = list(
            Run.objects.filter(parent_id__in=frontier, status=Run.Status.RUNNING)
            .select_related("agent")
            .order_by("started_at")
        )
        if level:
            levels.append(level)
        frontier = [run.pk for run in level]
    # A run goes on only while it and every ancestor have resumes left: a child nobody waits for
    # would work in vain.
    goes_on = {top.pk: top.resumes < max_resumes}
    for level in levels:
        for run in level:
            goes_on[run.pk] = goes_on.get(run.parent_id, False) and run.resumes < max_resumes
    # A call whose child run had ended before its own tool_end was stored ends with its outcome.
    settled = ended_children([top.pk, *(run.pk for level in levels for run in level)])
    waits: dict = {}
    taken: list[Taken] = []
    for level in reversed(levels):
        for run in level:
            interruption = _interrupt(run, waits, settled, worker=worker, message=message, goes_on=goes_on[run.pk])
            if interruption is None:
                continue
            taken.append(Taken(interruption, waits.get(run.pk, [])))
            if interruption.resumed:
                slug = run.agent.slug if run.agent is not None else ""
                waits.setdefault(run.parent_id, []).append(
                    Waiting(run.parent_tool_call_id, f"agent__{slug}", str(run.pk), slug)
                )
    interruption = _interrupt(top, waits, settled, worker=worker, message=message, goes_on=goes_on[top.pk])
    if interruption is not None:
        taken.append(Taken(interruption, waits.get(top.pk, [])))
    return taken


def _interrupt(
    run: Run, waits: dict, settled: dict, *, worker: str, message: str, goes_on: bool
) -> Interruption | None:
    keep = [wait.tool_call_id for wait in waits.get(run.pk, [])] if goes_on else []
    return run_interrupt(
        run_id=run.pk,
        message=message,
        worker=worker,
        max_resumes=run.resumes + 1 if goes_on else 0,
        keep_open=keep,
        settled=settled.get(run.pk),
    )
