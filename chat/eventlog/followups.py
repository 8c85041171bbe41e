"""What follows a run's `complete` in the same transaction: the conversation's first waiting
message starts the next run (docs/protocol.md, "Queued messages"). The front door (chat.runs)
knows how a run starts; the event log stores every `complete`; so the front door registers the
start here (register) at start-up rather than the event log importing it.

The process that stores a `complete` (the runtime's writer, a take-over) collects the runs so
started (collecting) and hands them to its registry once the transaction has committed. A
`complete` stored where nobody collects starts nothing: its waiting messages wait on, and the
next message of the conversation starts them (chat.runs.queue)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef

from chat.agents.profiles import AgentConfig
from chat.eventlog.compactions import Memory
from chat.eventlog.frames import EventFrame
from chat.models import Conversation, QueuedMessage, Run


@dataclass
class FollowUp:
    """What a `complete` set off in a conversation: the `unqueued` events of messages whose start
    was refused, then the run the first admitted one started (None when none was)."""

    conversation_id: Any
    frames: list[EventFrame] = field(default_factory=list)  # stored, in seq order: publish them
    run: Run | None = None
    memory: Memory | None = None
    config: AgentConfig | None = None


# (conversation ids whose top-level run completed, the worker that is to run what starts) -> follow-ups
Starter = Callable[[list[Any], str], list[FollowUp]]

logger = logging.getLogger(__name__)

_starter: list[Starter] = []
_local = threading.local()


def register(starter: Starter) -> None:
    _starter[:] = [starter]


@contextmanager
def collecting(worker: str) -> Iterator[list[FollowUp]]:
    """Collect, on this thread, the follow-ups of the `complete`s stored meanwhile, for `worker`
    to run. The caller must use them only once the transaction that stored them has committed."""
    previous = getattr(_local, "collected", None)
    _local.collected, _local.worker = [], worker
    try:
        yield _local.collected
    finally:
        _local.collected = previous


def mark() -> int:
    collected = getattr(_local, "collected", None)
    return len(collected) if collected is not None else 0


def rollback(to: int) -> None:
    """A transaction that stored follow-ups was rolled back: they never happened."""
    collected = getattr(_local, "collected", None)
    if collected is not None:
        del collected[to:]


def after_completes(conversation_ids: list[Any]) -> None:
    """Called by chat.eventlog.append inside the transaction that stored these conversations'
    `complete`s, after them."""
    collected = getattr(_local, "collected", None)
    if collected is None or not _starter or not conversation_ids:
        return
    try:
        # A savepoint: a start that fails for a reason of its own must not take the `complete`s
        # with it; what waits is then started by the next reaper pass (start_stranded).
        with transaction.atomic():
            started = _starter[0](conversation_ids, _local.worker)
    except Exception:  # a connection that broke fails the round's COMMIT all the same
        logger.exception("the waiting messages of %d conversation(s) could not start", len(conversation_ids))
        return
    collected.extend(started)


def start_stranded(worker: str) -> list[FollowUp]:
    """Start the first waiting message of each conversation where messages wait and no run is in
    progress (their run's `complete` was stored by a process that was stopping, or where nobody
    collected), for `worker` to run: the reaper's pass, so that a restart loses none."""
    if not _starter:
        return []
    running = Run.objects.filter(
        conversation_id=OuterRef("conversation_id"), status=Run.Status.RUNNING, parent__isnull=True
    )
    # Ordered by the column itself: the model's ordering would follow the conversation's (a join)
    # and put its columns in the DISTINCT, one row per message instead of per conversation.
    waiting = QueuedMessage.objects.filter(~Exists(running)).order_by("conversation_id")
    keys = list(waiting.values_list("conversation_id", flat=True).distinct()[:100])
    out: list[FollowUp] = []
    for key in keys:
        with collecting(worker) as started, transaction.atomic():
            # Locked, then looked at again: a run may have started or a message left meanwhile.
            if not Conversation.objects.select_for_update().filter(pk=key).values_list("pk").exists():
                continue
            if Run.objects.filter(conversation_id=key, status=Run.Status.RUNNING, parent__isnull=True).exists():
                continue
            started.extend(_starter[0]([key], worker))
            out += started
    return out
