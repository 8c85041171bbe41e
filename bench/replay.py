"""4. Replay: connect to a conversation with N events; time until `sync`."""

from __future__ import annotations

import statistics
import time

from . import clients

EVENTS = 10_000
REPEATS = 3


async def measure(stack, model, pool, *, events: int = EVENTS, repeats: int = REPEATS) -> dict:
    seeded = stack.seed(op="replay", events=events)
    times, problems = [], []
    for attempt in range(repeats):
        started = time.time()
        ws, sync, replayed = await clients.connect(
            stack.base(attempt), seeded["conversation"], seeded["session"], timeout=60
        )
        times.append(time.time() - started)
        await ws.close()
        seqs = [f["seq"] for f in replayed]
        if seqs != list(range(1, events + 1)) or sync["lastSeq"] != events:
            problems.append(f"replayed {len(seqs)} events, sync lastSeq {sync['lastSeq']}")
    return {
        "events": events,
        "sync_s": round(statistics.median(times), 3),
        "sync_s_all": [round(t, 3) for t in times],
        "problems": problems,
    }
