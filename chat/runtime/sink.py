"""EventSink: one run's events -> coalesced batches -> the group writer -> the doorbell.

Model chunks arrive 50-300 a second. The first delta of a stream (the deltas of
one kind between two other events) is stored at once, so that the first text is
not delayed; the deltas after it are merged over windows that start at
AGENT_STREAM_FLUSH_MS and double with each flush up to AGENT_STREAM_FLUSH_MAX_MS,
so rows, group_send calls and frames grow with time, not with tokens (at 100
tokens/s ~25 rows per 1,000 tokens instead of ~200). The page draws a frame's
text at an even pace across the window, so the long windows do not show as
stutter. Any other event flushes at once, keeping the order. A batch is
published only after its transaction commits: a frame a client received is
always in the database (resume by seq stays exact).

The error that ends a failed attempt names the first text event it discards
(`discards`, docs/protocol.md, "Events"): the sink follows its stored frames with
chat.agent.answer, and stores the attempt's text before the error to know its seq.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone

from chat.agent import ModelCallRecord
from chat.agent.answer import DELTA_TYPES, Answer, ends_failed_attempt
from chat.agent.approval import call_outcome
from chat.eventlog.types import EventBatch, ModelCallData, RunOutcome, ToolRecordData
from chat.runtime.clock import get_clock
from chat.runtime.doorbell import publish
from chat.runtime.image_parts import elided
from chat.runtime.writer import get_writer


def window(flushes: int, *, first: float, longest: float) -> float:
    """The coalescing window after a stream's `flushes`-th flush (1, 2, ...): `first`, doubled at
    each flush, at most `longest`. Short windows while the reader starts reading, long ones once
    the text flows (the page paces it)."""
    return max(first, min(longest, first * 2 ** min(flushes - 1, 16)))


def model_call_data(record: ModelCallRecord) -> ModelCallData:
    """The ModelCall row of an attempt the agent core reports (a run's, or its title's: chat.runtime.titles)."""
    return ModelCallData(
        iteration=record.iteration,
        attempt=record.attempt,
        started_at=datetime.fromtimestamp(record.started_at, UTC),
        first_token_ms=record.first_token_ms,
        duration_ms=record.duration_ms,
        message_count=record.message_count,
        prompt_tokens=record.prompt_tokens,
        completion_tokens=record.completion_tokens,
        # An endpoint that reports the parts only still counts against quotas.
        total_tokens=record.total_tokens or record.prompt_tokens + record.completion_tokens,
        finish_reason=record.finish_reason,
        error=record.error,
        request_messages=elided(record.messages),
        usage_estimated=record.estimated,
        purpose=record.purpose,
    )


class EventSink:
    def __init__(
        self,
        *,
        conversation_id,
        run_id,
        flush_seconds: float,
        max_flush_seconds: float = 0.0,
        extra: dict[str, Any] | None = None,
    ):
        self.conversation_id = conversation_id
        # Fields every event of the run carries: a child run's parentRunId and parentToolCallId.
        self._extra = extra or {}
        # Whether the run offered a tool name (AgentRun.offers), told once the agent exists.
        self.offers: Callable[[str], bool] = lambda name: True
        self.run_id = run_id
        self._clock = get_clock(flush_seconds) if flush_seconds > 0 else None
        self._first_window, self._longest_window = flush_seconds, max(flush_seconds, max_flush_seconds)
        self._stream: str | None = None  # the delta type of the stream going on
        self._stream_flushes = 0  # batches of deltas stored since it began
        self.due = 0.0  # loop time at which the deltas waiting are to be flushed (the clock reads it)
        self._pending: list[dict[str, Any]] = []
        self._records: list[ToolRecordData] = []
        self._model_calls: list[ModelCallData] = []
        self._tool_arguments: dict[str, str] = {}
        self._decisions: dict[str, str] = {}  # approval_result decisions of calls not ended yet
        # Held from taking a batch until it is published: one run's batches go out in order.
        self._lock = asyncio.Lock()
        self._marked = False  # waiting for a clock tick
        self._discarded = False
        self._failure: Exception | None = None  # a clock flush that failed, raised at the next event
        self._answer = Answer()  # follows the stored frames
        # The calls whose tool_start is stored, and who waits for one (a delegate call: its child
        # run's events come after it, chat.runtime.delegates).
        self._started: set[str] = set()
        self._start_waiters: dict[str, asyncio.Future] = {}

    async def add(self, payload: dict[str, Any], *, outcome: RunOutcome | None = None) -> None:
        self._raise_failure()
        if self._extra:
            payload = {**payload, **self._extra}
        kind = payload["type"]
        if kind in DELTA_TYPES:
            if kind != self._stream:
                self._stream, self._stream_flushes = kind, 0
            last = self._pending[-1] if self._pending else None
            if last is not None and last["type"] == kind:
                last["content"] += payload["content"]
            else:
                if not self._pending:  # the window opens with its first delta
                    self.due = asyncio.get_running_loop().time() + self._window()
                self._pending.append(dict(payload))
            if self._clock is None or self._stream_flushes == 0:
                await self.flush()  # a stream's first delta: at once
            elif not self._marked:
                self._marked = True
                self._clock.mark(self)
            return
        self._stream = None  # the next delta begins a new stream
        if kind in ("tool_start", "approval_request"):  # a denied call has only its request
            self._tool_arguments[payload["toolCallId"]] = payload["arguments"]
        elif kind == "approval_result":
            self._decisions[payload["toolCallId"]] = payload["decision"]
        elif kind == "tool_end":
            self._records.append(self._record(payload))
        elif ends_failed_attempt(payload):
            await self.flush()  # the attempt's text gets its seqs
            if discarded := self._answer.attempt:
                payload = {**payload, "discards": discarded[0]["seq"]}
        self._pending.append(payload)
        await self.flush(outcome=outcome)

    def add_model_call(self, record: ModelCallRecord) -> None:
        """The agent's observer (chat.agent.trace): the attempt is stored with the next batch, in
        its transaction; the run always has one more (at least `complete`)."""
        if self._discarded:
            return
        self._model_calls.append(model_call_data(record))

    async def flush(self, *, outcome: RunOutcome | None = None) -> None:
        """Store and publish what waits (with the run's outcome, for the batch holding `complete`)."""
        async with self._lock:
            self._raise_failure()
            batch = self._take(outcome)
            if batch is None:
                return
            frames = await get_writer().submit(batch)
            self._follow(frames)
            await publish(self.conversation_id, frames)

    # -- the clock's half of a flush: claim at the tick, finish once the round committed -----
    async def claim_tick(self) -> EventBatch | None:
        """The deltas waiting, the sink locked until finish_tick; None when there is nothing, or
        when the sink's own flush is under way (what it left then waits a tick). Never suspends."""
        self._marked = False
        if self._discarded:
            return None
        if self._lock.locked():
            self._marked = True
            assert self._clock is not None  # a sink with a window has its clock
            self._clock.mark(self)
            return None
        await self._lock.acquire()  # free: returns at once, nothing slips in between the claims
        batch = self._take(None)
        if batch is None:
            self._lock.release()
        return batch

    async def finish_tick(self, stored: asyncio.Future) -> None:
        try:
            frames = await stored
        except Exception as exc:  # the run learns of it at its next event
            self._failure = exc
        else:
            self._follow(frames)
            await publish(self.conversation_id, frames)
        finally:
            self._lock.release()

    def discard(self) -> None:
        """Drop what waits and store nothing more: the run was handed to another process."""
        self._discarded = True
        self._pending, self._records, self._model_calls = [], [], []

    def _follow(self, frames) -> None:
        for frame in frames:
            self._answer.add(frame)
            if frame["type"] == "tool_start":
                self._started.add(frame["toolCallId"])
                waiter = self._start_waiters.pop(frame["toolCallId"], None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(None)

    async def tool_started(self, tool_call_id: str) -> None:
        """Once the tool_start of the call is stored."""
        if tool_call_id in self._started:
            return
        waiter = self._start_waiters.setdefault(tool_call_id, asyncio.get_running_loop().create_future())
        await waiter

    def _record(self, payload: dict[str, Any]) -> ToolRecordData:
        duration = int(payload.get("durationMs", 0))
        return ToolRecordData(
            tool_call_id=payload["toolCallId"],
            tool_name=payload["toolName"],
            arguments=self._tool_arguments.pop(payload["toolCallId"], ""),
            result=payload["result"],
            is_error=bool(payload["isError"]),
            started_at=timezone.now() - timedelta(milliseconds=duration),
            duration_ms=duration,
            offered=self.offers(payload["toolName"]),
            outcome=call_outcome(
                is_error=bool(payload["isError"]), decision=self._decisions.pop(payload["toolCallId"], None)
            ),
        )

    def _window(self) -> float:
        return window(self._stream_flushes, first=self._first_window, longest=self._longest_window)

    def _take(self, outcome: RunOutcome | None) -> EventBatch | None:
        batch, self._pending = self._pending, []
        if not batch:
            return None  # model calls wait for the next events (there always are some)
        if batch[-1]["type"] == self._stream:
            self._stream_flushes += 1
        records, self._records = self._records, []
        calls, self._model_calls = self._model_calls, []
        return EventBatch(self.conversation_id, self.run_id, batch, records, outcome, calls)

    def _raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure
