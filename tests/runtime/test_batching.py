"""chat.agent.batching: items that arrive while a round is processed form the next round; each
item gets its own result or failure; a caller that has gone does not stop the round."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from chat.agent.batching import Batcher, GroupedCalls, server_task


class Recorder:
    def __init__(self, *, fail_on=None, gate: asyncio.Event | None = None):
        self.rounds: list[list] = []
        self.fail_on, self.gate = fail_on, gate

    async def process(self, items):
        self.rounds.append(list(items))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_on in items:
            raise RuntimeError("the round failed")
        return [ValueError(item) if item == "bad" else item.upper() for item in items]


async def test_items_submitted_together_share_a_round_and_later_ones_form_the_next():
    gate = asyncio.Event()
    recorder = Recorder(gate=gate)
    batcher: Batcher[str, str] = Batcher(recorder.process, name="test")
    assert batcher.idle
    first = [batcher.submit(item) for item in ("a", "b")]
    await asyncio.sleep(0)  # the first round has begun and waits on the gate
    assert not batcher.idle
    later = [batcher.submit(item) for item in ("c", "d")]
    gate.set()
    assert await asyncio.gather(*first, *later) == ["A", "B", "C", "D"]
    assert recorder.rounds == [["a", "b"], ["c", "d"]]
    assert batcher.idle


async def test_each_item_gets_its_own_failure_and_a_failed_round_fails_each():
    batcher: Batcher[str, str] = Batcher(Recorder(fail_on="boom").process, name="test")
    good, bad = batcher.submit("ok"), batcher.submit("bad")
    assert await good == "OK"
    with pytest.raises(ValueError):
        await bad
    futures = [batcher.submit(item) for item in ("x", "boom")]
    results = await asyncio.gather(*futures, return_exceptions=True)
    assert [type(r) for r in results] == [RuntimeError, RuntimeError]


async def test_a_caller_that_has_gone_does_not_stop_the_round_and_added_items_need_no_caller():
    gate = asyncio.Event()
    recorder = Recorder(gate=gate)
    batcher: Batcher[str, str] = Batcher(recorder.process, name="test")
    gone = batcher.submit("a")
    kept = batcher.submit("b")
    batcher.add("c")
    await asyncio.sleep(0)
    gone.cancel()
    gate.set()
    assert await kept == "B"
    await batcher.wait_idle()
    assert recorder.rounds == [["a", "b", "c"]]


async def test_a_pause_gathers_the_items_of_its_window_into_one_round():
    recorder = Recorder()
    batcher: Batcher[str, str] = Batcher(recorder.process, name="test", pause=0.05)
    first = batcher.submit("a")
    await asyncio.sleep(0.01)
    second = batcher.submit("b")
    assert await asyncio.gather(first, second) == ["A", "B"]
    assert recorder.rounds == [["a", "b"]]


async def test_a_server_task_runs_in_a_context_of_its_own():
    mark: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="none")
    mark.set("the caller's")

    async def read():
        return mark.get()

    assert await server_task(read(), name="test") == "none"


async def test_grouped_calls_share_a_trip_each_made_as_alone_its_failure_its_own():
    trips: list[int] = []

    def trip(calls):
        async def one_trip(items):
            trips.append(len(items))
            await asyncio.sleep(0)  # the calls made meanwhile wait for the next trip
            return calls(items)

        return one_trip

    def halve(number, *, strict=False):
        if strict and number % 2:
            raise ValueError(number)
        return number // 2

    halved = GroupedCalls(halve, trip, name="test")
    results = await asyncio.gather(
        halved(8), halved(6), halved(5, strict=True), halved(4, strict=True), return_exceptions=True
    )
    assert results[:2] == [4, 3] and results[3] == 2
    assert isinstance(results[2], ValueError)
    assert trips == [4]
    assert await halved(2) == 1 and trips == [4, 1]
