"""chat.runtime.clock: one clock per window and loop flushes every sink whose window has ended at
its tick, their batches in one writer round; a sink whose window ends later waits for a later tick."""

from __future__ import annotations

import asyncio

from chat.eventlog.types import EventBatch
from chat.runtime import clock as clock_module
from chat.runtime.clock import FlushClock, get_clock


class Writer:
    def __init__(self):
        self.rounds: list[list[EventBatch]] = []
        self._round: list[EventBatch] = []

    def submit(self, batch: EventBatch) -> asyncio.Future:
        if not self._round:
            self.rounds.append(self._round)
            asyncio.get_running_loop().call_soon(self._close_round)
        self._round.append(batch)
        future = asyncio.get_running_loop().create_future()
        future.set_result([])
        return future

    def _close_round(self):
        self._round = []


class Sink:
    def __init__(self, name: str, due: float):
        self.name, self.due = name, due
        self.flushed_at: float | None = None

    async def claim_tick(self):
        return EventBatch(self.name, self.name, [{"type": "text", "content": self.name}])

    async def finish_tick(self, stored: asyncio.Future) -> None:
        await stored
        self.flushed_at = asyncio.get_running_loop().time()


async def test_the_sinks_due_at_a_tick_share_one_round_and_a_later_one_waits(monkeypatch):
    writer = Writer()
    monkeypatch.setattr(clock_module, "get_writer", lambda: writer)
    clock = FlushClock(0.05)
    now = asyncio.get_running_loop().time()
    early, also_early, later = Sink("a", now), Sink("b", now + 0.02), Sink("c", now + 0.2)
    for sink in (early, also_early, later):
        clock.mark(sink)
    while later.flushed_at is None:
        await asyncio.sleep(0.01)
    # a window ending before the middle of the next tick ends at this one
    assert [[batch.run_id for batch in round_] for round_ in writer.rounds] == [["a", "b"], ["c"]]
    assert max(early.flushed_at, also_early.flushed_at) < later.flushed_at
    assert later.flushed_at >= now + 0.2 - 0.025


async def test_one_clock_per_window_and_loop():
    assert get_clock(0.05) is get_clock(0.05)
    assert get_clock(0.05) is not get_clock(0.1)
