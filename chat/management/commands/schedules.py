"""`python manage.py schedules`: a process that fires due schedules and serves nothing
(docs/protocol.md, "Firing"). Every server process fires them already; this one is for a
deployment that wants the firing somewhere else too (any number of processes may poll: each slot
fires once). The runs it starts run in it, as a server process's do, and are taken over by another
process should it stop. `--once`: one pass, then wait for the runs it started to end."""

from __future__ import annotations

import asyncio

from django.core.management.base import BaseCommand

from chat.runtime.build import close_client
from chat.runtime.registry import get_registry
from chat.scheduling.poller import poll_forever, poll_once

# How long `--once` waits for the runs it started.
ONCE_WAIT_SECONDS = 600.0


class Command(BaseCommand):
    help = "Fire due schedules every AGENT_SCHEDULE_POLL_SECONDS, serving nothing (--once: one pass)."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="one pass, then wait for its runs to end")

    def handle(self, *args, once: bool = False, **options):
        started = asyncio.run(_fire(once=once))
        if once:
            self.stdout.write(f"{started} run(s) started")


async def _fire(*, once: bool) -> int:
    registry = get_registry()
    await registry.ensure_started()
    try:
        if not once:
            await poll_forever()
            return 0
        runs = await poll_once()
        await registry.wait_idle(timeout=ONCE_WAIT_SECONDS)
        return len(runs)
    finally:
        await close_client()
        await registry.close()
