"""serving.collector: the process's full garbage collections on a clock, started by its first
connection and run on the loop; the application keeps answering around them."""

from __future__ import annotations

import asyncio
import gc

from serving.collector import FullCollections


class Cycle:
    def __init__(self) -> None:
        self.me = self


async def test_a_full_collection_runs_on_the_clock_and_frees_old_cycles():
    served = []

    async def app(scope, receive, send):
        served.append(scope["type"])

    wrapped = FullCollections(app, every=0.05)
    gc.collect()
    cycle = Cycle()
    # As at a server's young collections: the cycle lived through them into the oldest generation.
    gc.collect(1)
    assert gc.is_tracked(cycle) and any(o is cycle for o in gc.get_objects(generation=2))
    alive = gc.get_stats()[2]["collections"]
    await wrapped({"type": "http"}, None, None)
    del cycle
    # On the clock, not once (a full collection of a test process takes a while: waited for).
    for _ in range(100):
        await asyncio.sleep(0.05)
        if gc.get_stats()[2]["collections"] >= alive + 2:
            break
    assert gc.get_stats()[2]["collections"] >= alive + 2
    assert not any(isinstance(o, Cycle) for o in gc.get_objects())
    await wrapped({"type": "websocket"}, None, None)
    assert served == ["http", "websocket"]


async def test_nothing_is_collected_before_the_first_connection():
    FullCollections(lambda *a: None, every=0.01)
    before = gc.get_stats()[2]["collections"]
    await asyncio.sleep(0.1)
    assert gc.get_stats()[2]["collections"] == before
