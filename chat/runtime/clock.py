"""FlushClock: the coalescing window of every EventSink of one event loop.

It ticks every AGENT_STREAM_FLUSH_MS while a sink waits. On each tick it flushes
every sink whose window has ended (its `due` time, rounded to the nearest tick),
their batches submitted together so that they share one writer round; the others
wait for a later tick. No timer or task per run and window (at 200 streams that
was 4,000 of each a second).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from chat.agent.batching import Batcher
from chat.agent.perloop import PerLoop
from chat.eventlog.types import EventBatch
from chat.runtime.writer import get_writer


class FlushedSink(Protocol):
    """What the clock uses of a sink (chat.runtime.sink.EventSink, which marks itself here)."""

    due: float  # loop time at which its waiting deltas are to be flushed

    async def claim_tick(self) -> EventBatch | None: ...

    async def finish_tick(self, stored: asyncio.Future) -> None: ...


class FlushClock:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._ticks: Batcher[FlushedSink, None] = Batcher(self._tick, name="event-flush-clock", pause=seconds)
        self._flushes: set[asyncio.Task] = set()

    def mark(self, sink: FlushedSink) -> None:
        """Flush the sink at the first tick at or after its `due` time (the sink marks itself
        once per window)."""
        self._ticks.add(sink)

    async def _tick(self, sinks: list[FlushedSink]) -> None:
        # A window ending before the middle of the next tick ends now rather than a tick late.
        now = asyncio.get_running_loop().time() + self.seconds / 2
        due = []
        for sink in sinks:
            if sink.due <= now:
                due.append(sink)
            else:
                self._ticks.add(sink)  # a later tick
        if not due:
            return
        # Not awaited: the clock keeps time while a round commits (group commit).
        flush = asyncio.create_task(self._flush(due))
        self._flushes.add(flush)
        flush.add_done_callback(self._flushes.discard)

    @staticmethod
    async def _flush(sinks: list[FlushedSink]) -> None:
        writer = get_writer()
        claimed = []
        for sink in sinks:  # no await suspends between the claims: the batches share a round
            batch = await sink.claim_tick()
            if batch is not None:
                claimed.append((sink, writer.submit(batch)))
        for sink, stored in claimed:
            await sink.finish_tick(stored)


_clocks: PerLoop[dict[float, FlushClock]] = PerLoop(dict)


def get_clock(seconds: float) -> FlushClock:
    """The running loop's clock of that window."""
    clocks = _clocks.get()
    clock = clocks.get(seconds)
    if clock is None:
        clock = clocks[seconds] = FlushClock(seconds)
    return clock
