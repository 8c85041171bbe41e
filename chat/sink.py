"""EventSink: a run's events -> coalesced batches -> rows -> doorbell.

Model chunks arrive 50-300 a second. Text and thinking deltas are merged for
AGENT_STREAM_FLUSH_MS, so rows, group_send calls and frames grow with time,
not with tokens; any other event flushes at once, keeping the order. A batch
is published only after its transaction commits: a frame a client received is
always in the database.

The coalescing windows of all the process's runs share one FlushClock: on each
tick it takes every waiting batch at once, so they reach the writer in the same
round, with no timer or task per run and window (at 200 streams that was 4,000
of each a second).

The batches of all the process's runs go through one GroupWriter, which stores
whatever is waiting in a single transaction (group commit): while one
transaction runs, the next round's batches gather. Hundreds of streams then
cost a few commits a second instead of twenty each. The writer has a thread
(and so a database connection) of its own: streaming runs' batches never queue
behind the connects and run starts that share sync_to_async's single thread.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from channels.layers import get_channel_layer
from django import db
from django.utils import timezone

from . import services
from .loops import PerLoop

logger = logging.getLogger(__name__)

DELTA_TYPES = frozenset({"text", "thinking"})


def conversation_group(conversation_id) -> str:
    return f"conversation.{conversation_id}"


async def publish(conversation_id, frames: list[dict[str, Any]]) -> None:
    """Ring the doorbell of every socket of the conversation; the frames ride along so that
    a socket that has seen everything before them needs no query."""
    if not frames:
        return
    try:
        await get_channel_layer().group_send(
            conversation_group(conversation_id), {"type": "chat.events", "events": frames}
        )
    except Exception:  # the layer is best effort; sockets fill gaps from the database
        logger.warning("group_send failed for conversation %s", conversation_id, exc_info=True)


class GroupWriter:
    """Stores the batches of every run of one event loop, all waiting batches in one transaction."""

    def __init__(self) -> None:
        self._waiting: list[tuple[services.EventBatch, asyncio.Future]] = []
        self._task: asyncio.Task | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="event-writer")

    def submit(self, batch: services.EventBatch) -> asyncio.Future:
        """A future of the batch's frames once committed (ConversationGone when its conversation is
        gone). Batches submitted one after another without an await between them share a round."""
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((batch, future))
        if self._task is None:
            self._task = asyncio.create_task(self._drain(), name="event-group-writer")
        return future

    async def _drain(self) -> None:
        try:
            while self._waiting:
                round_, self._waiting = self._waiting, []
                try:
                    results = await asyncio.get_running_loop().run_in_executor(
                        self._thread, _store, [b for b, _ in round_]
                    )
                except Exception as exc:
                    for _, future in round_:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for (batch, future), frames in zip(round_, results):
                    if future.done():
                        continue
                    if isinstance(frames, Exception):
                        future.set_exception(frames)
                    elif frames is None:
                        future.set_exception(services.ConversationGone(str(batch.conversation_id)))
                    else:
                        future.set_result(frames)
        finally:
            self._task = None


def _store(batches: list[services.EventBatch]) -> list:
    """Each batch's frames, None (conversation gone) or the exception that kept it out."""
    try:
        return services.events_append_many(batches=batches)
    except Exception as exc:
        db.connection.close()  # the writer's connection lives on: never reuse a broken one
        if len(batches) == 1:
            return [exc]
    results = []  # one bad batch must not fail the others: store them one by one
    for batch in batches:
        try:
            results += services.events_append_many(batches=[batch])
        except Exception as exc:
            db.connection.close()
            results.append(exc)
    return results


_writers: PerLoop[GroupWriter] = PerLoop(GroupWriter)
get_writer = _writers.get


class FlushClock:
    """The coalescing window of every sink of one event loop: each tick flushes all sinks with
    deltas waiting, their batches in one writer round."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._dirty: dict[EventSink, None] = {}  # insertion-ordered set
        self._task: asyncio.Task | None = None
        self._flushes: set[asyncio.Task] = set()

    def mark(self, sink: EventSink) -> None:
        self._dirty[sink] = None
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="event-flush-clock")

    async def _run(self) -> None:
        try:
            while self._dirty:
                await asyncio.sleep(self.seconds)
                sinks, self._dirty = list(self._dirty), {}
                # Not awaited: the clock keeps time while a round commits (group commit).
                flush = asyncio.create_task(self._flush(sinks))
                self._flushes.add(flush)
                flush.add_done_callback(self._flushes.discard)
        finally:
            self._task = None

    async def _flush(self, sinks: list[EventSink]) -> None:
        writer = get_writer()
        taken: list[tuple[EventSink, asyncio.Future]] = []
        for sink in sinks:
            if sink._lock.locked():
                self.mark(sink)  # its own flush is under way: what it left waits a tick
                continue
            await sink._lock.acquire()  # free, so no wait: nothing can slip in between the takes
            batch = sink._take(None)
            if batch is None:
                sink._lock.release()
                continue
            taken.append((sink, writer.submit(batch)))
        for sink, future in taken:
            try:
                try:
                    frames = await future
                except Exception as exc:  # the run learns of it at its next event
                    sink._failure = exc
                    continue
                await publish(sink.conversation_id, frames)
            finally:
                sink._lock.release()


_clocks: PerLoop[dict[float, FlushClock]] = PerLoop(dict)


def get_clock(seconds: float) -> FlushClock:
    clocks = _clocks.get()
    clock = clocks.get(seconds)
    if clock is None:
        clock = clocks[seconds] = FlushClock(seconds)
    return clock


class EventSink:
    def __init__(self, *, conversation_id, run_id, flush_seconds: float):
        self.conversation_id = conversation_id
        self.run_id = run_id
        self.flush_seconds = flush_seconds
        self._pending: list[dict[str, Any]] = []
        self._records: list[services.ToolRecordData] = []
        self._tool_arguments: dict[str, str] = {}
        self._lock = asyncio.Lock()
        self._failure: Exception | None = None  # a clock flush that failed, raised at the next event

    async def add(self, payload: dict[str, Any], *, outcome: services.RunOutcome | None = None) -> None:
        self._raise_failure()
        kind = payload["type"]
        if kind in DELTA_TYPES:
            last = self._pending[-1] if self._pending else None
            if last is not None and last["type"] == kind:
                last["content"] += payload["content"]
            else:
                self._pending.append(dict(payload))
            if self.flush_seconds <= 0:
                await self.flush()
            else:
                get_clock(self.flush_seconds).mark(self)
            return
        if kind == "tool_start":
            self._tool_arguments[payload["toolCallId"]] = payload["arguments"]
        elif kind == "tool_end":
            self._records.append(self._record(payload))
        self._pending.append(payload)
        await self.flush(outcome=outcome)

    def _record(self, payload: dict[str, Any]) -> services.ToolRecordData:
        duration = int(payload.get("durationMs", 0))
        return services.ToolRecordData(
            tool_call_id=payload["toolCallId"],
            tool_name=payload["toolName"],
            arguments=self._tool_arguments.pop(payload["toolCallId"], ""),
            result=payload["result"],
            is_error=bool(payload["isError"]),
            started_at=timezone.now() - timedelta(milliseconds=duration),
            duration_ms=duration,
        )

    def _take(self, outcome: services.RunOutcome | None) -> services.EventBatch | None:
        batch, self._pending = self._pending, []
        records, self._records = self._records, []
        if not batch:
            return None
        return services.EventBatch(self.conversation_id, self.run_id, batch, records, outcome)

    def _raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure

    async def flush(self, *, outcome: services.RunOutcome | None = None) -> None:
        async with self._lock:
            self._raise_failure()
            batch = self._take(outcome)
            if batch is None:
                return
            frames = await get_writer().submit(batch)
            await publish(self.conversation_id, frames)
