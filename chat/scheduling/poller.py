"""Each server process fires due schedules (docs/protocol.md, "Firing"): a loop that looks every
AGENT_SCHEDULE_POLL_SECONDS, or sooner when a slot falls due before that, started with the process's first HTTP request or socket, as the run
registry's loops are (chat.runtime.lifecycle; daphne sends no ASGI lifespan events). Any number
of processes may poll: the claim lets one fire each slot (chat.scheduling.firing)."""

from __future__ import annotations

import asyncio
import logging
import weakref

from asgiref.sync import markcoroutinefunction
from channels.db import database_sync_to_async
from django.conf import settings
from django.db.models import Min
from django.utils import timezone

from chat.agent.batching import server_task
from chat.models import Run, Schedule
from chat.runtime.registry import get_registry
from chat.scheduling.firing import schedule_fire, schedules_claim

logger = logging.getLogger(__name__)

_polling: weakref.WeakSet = weakref.WeakSet()  # the event loops whose poller runs


async def poll_once(*, now=None) -> list[Run]:
    """One pass: claim the due slots and start their runs (the runs started)."""
    claimed = await database_sync_to_async(schedules_claim)(now=now or timezone.now())
    started = [await schedule_fire(schedule) for schedule in claimed]
    return [run for run in started if run is not None]


def poll_wait(*, now=None) -> float:
    """Seconds to the next pass: to the soonest slot of an enabled schedule, at most
    AGENT_SCHEDULE_POLL_SECONDS (a schedule made or edited on any process is seen by then). A slot
    fired on its time, not up to a whole poll late (bench --only costs: due -> run 3.0 s p50, 4.8 s
    p95 with two processes polling every 5 s). A slot still due after a pass (more than a claim's
    batch, one that could not be read) waits a second at least, not a busy loop."""
    poll = settings.AGENT_SCHEDULE_POLL_SECONDS
    soonest = Schedule.objects.filter(enabled=True).aggregate(soonest=Min("next_run_at"))["soonest"]
    if soonest is None:
        return poll
    return min(poll, max((soonest - (now or timezone.now())).total_seconds(), min(1.0, poll)))


async def poll_forever() -> None:
    """A pass AGENT_SCHEDULE_POLL_SECONDS after the process's first connection, then at each
    poll_wait; none once the process is stopping (its runs are handed over, a new one would be too)."""
    wait = settings.AGENT_SCHEDULE_POLL_SECONDS
    while True:
        await asyncio.sleep(wait)
        if get_registry().stopping:
            return
        try:
            await poll_once()
            wait = await database_sync_to_async(poll_wait)()
        except asyncio.CancelledError:
            raise
        except Exception:  # the database away: the next pass tries again
            logger.warning("schedule poll failed", exc_info=True)
            wait = settings.AGENT_SCHEDULE_POLL_SECONDS


class SchedulePollerStarter:
    """An ASGI wrapper that starts the event loop's poller with its first HTTP request or socket."""

    _asgi_single_callable = True

    def __init__(self, app):
        self.app = app

    @markcoroutinefunction
    def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket"):
            loop = asyncio.get_running_loop()
            if loop not in _polling:
                _polling.add(loop)
                server_task(poll_forever(), name="schedules-poller")
        return self.app(scope, receive, send)
