"""The channel layer as a doorbell: group names, and publishing stored frames.

Delivery is at most once; a socket that sees a seq gap reads the database. When
the layer fails (Redis restarting, or down), what it did not deliver is caught up
as soon as it answers again (supervision probes it), not at each socket's next
ping: the conversations whose publish failed are rung again, and every socket of
the process reads what it missed (those of other processes missed rings too).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from channels.layers import get_channel_layer

from chat.agent.perloop import PerLoop
from chat.eventlog.frames import EventFrame

logger = logging.getLogger(__name__)


class Missed:
    """One event loop's undelivered doorbells: each conversation's last frames whose publish
    failed (a ring again with them lets each socket find what it lacks by its seq gap), and the
    sockets to tell when the layer is back."""

    def __init__(self) -> None:
        self.frames: dict[str, list[EventFrame]] = {}
        self.watchers: set[Callable[[], None]] = set()


_missed: PerLoop[Missed] = PerLoop(Missed)

# What looks at stored frames as they are first published: notifications (chat.notifications.runs)
# and schedules' webhooks (chat.scheduling.deliveries), above the runtime, which must not import
# them: they register here at start-up (chat.apps). Each is called on the event loop, once per
# publish (never for a ring again), and must only start its own work (a server task), never wait.
Observer = Callable[[Any, list[EventFrame]], None]
_observers: list[Observer] = []


def observe(observer: Observer) -> None:
    if observer not in _observers:
        _observers.append(observer)


def watch(callback: Callable[[], None]) -> None:
    """`callback` (a socket's catch-up) is called when the layer comes back."""
    _missed.get().watchers.add(callback)


def unwatch(callback: Callable[[], None]) -> None:
    _missed.get().watchers.discard(callback)


def has_missed() -> bool:
    return bool(_missed.get().frames)


async def layer_back(*, was_down: bool) -> None:
    """The layer answers again: ring the conversations whose publish failed, and, after an
    outage (when this process's subscriptions were down too), have every socket catch up."""
    missed = _missed.get()
    for conversation_id, frames in list(missed.frames.items()):
        await _ring(conversation_id, frames)
    if was_down:
        for callback in list(missed.watchers):
            callback()


# Every server process's run channel belongs to it: a process that stops rings it so that
# the others take over its runs at once (supervision).
PROCESSES_GROUP = "runs.processes"
# Sent to the run channel of the process that runs a run: its supervisor stops it, cancelled.
CANCEL_MESSAGE = "run.cancel"


def conversation_group(conversation_id) -> str:
    return f"conversation.{conversation_id}"


async def publish(conversation_id, frames: list[EventFrame]) -> None:
    """Ring the doorbell of every socket of the conversation; the frames ride along so that
    a socket that has seen everything before them needs no query."""
    if not frames:
        return
    for observer in _observers:
        try:
            observer(conversation_id, frames)
        except Exception:  # an observer's fault never holds up the sockets
            logger.exception("an observer of published frames failed")
    await _ring(conversation_id, frames)


async def _ring(conversation_id, frames: list[EventFrame]) -> None:
    key, group = str(conversation_id), conversation_group(conversation_id)
    try:
        # The group named: a process's sockets share one channel (chat.realtime.hub).
        await get_channel_layer().group_send(group, {"type": "chat.events", "events": frames, "group": group})
    except Exception:  # the layer is best effort; rung again once it answers (layer_back)
        logger.warning("group_send failed for conversation %s", conversation_id, exc_info=True)
        missed = _missed.get().frames
        if key not in missed or missed[key][-1]["seq"] < frames[-1]["seq"]:
            missed[key] = frames
    else:
        _missed.get().frames.pop(key, None)


async def ring_cancel(*, run_id, worker: str) -> None:
    """Ask the process whose run channel is `worker` to cancel the run (a cancel from another
    process, or the deletion of its conversation). Best effort: a lost message is found by the
    run's heartbeat, through the cancel flag or the run's row gone."""
    try:
        await get_channel_layer().send(worker, {"type": CANCEL_MESSAGE, "run_id": str(run_id)})
    except Exception:
        logger.warning("could not reach the process of run %s; its heartbeat will see the flag", run_id)


async def publish_title(conversation_id, title: str) -> None:
    """A generated title, to every socket and stream of the conversation (a `title` frame: not
    persisted, no seq). Best effort: a page that misses it reads the title with its list."""
    group = conversation_group(conversation_id)
    try:
        await get_channel_layer().group_send(group, {"type": "chat.title", "title": title, "group": group})
    except Exception:
        logger.warning("could not send the title of conversation %s", conversation_id, exc_info=True)


async def ring_processes(message: dict) -> None:
    try:
        await get_channel_layer().group_send(PROCESSES_GROUP, message)
    except Exception:  # the others' reapers find the runs at their next pass anyway
        logger.warning("could not ring the other server processes", exc_info=True)
