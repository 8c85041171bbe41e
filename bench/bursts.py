"""The first text of a burst, the project against the relay in turn (`--only bursts`, in the
default run).

One burst per level per run cannot say which of two servers answers a burst first: on a 2-core
machine the relay's own C = 100 first text moved 141-592 ms between whole runs of the same code,
and the project's 159-309 ms, while the two are measured minutes apart (bench/reference.py runs
after every stack). Here the project (SQLite + in-memory, 1 daphne, as the sqlite-daphne stack)
and the relay (bench/reference_relay.py) are up side by side, and each level's bursts (C
conversations x 300 tokens at 100/s, the concurrency bench's) are taken in turn, a burst of one
then one of the other, the order swapped every round (ABBA), so that both meet the machine's slow
and fast moments alike. Per level: each burst's first text p50, their median for each side, and
in how many rounds the project's came no later than the relay's in the same round.
"""

from __future__ import annotations

import asyncio
import math
import statistics

from . import concurrency
from .pool import Pool
from .reference import RelayStack
from .reference import pool as relay_pool
from .server import FakeModel, Stack

LEVELS = (50, 100, 200)
ROUNDS = 6
WARM_UP = 10  # a burst each before the rounds: the first burst of a server also pays its imports
PAUSE_S = 1.0  # between bursts, as between the concurrency bench's levels
SIDES = ("project", "relay")


def _burst(result: dict) -> dict:
    return {
        "first_text_p50_ms": result["first_text_ms"]["p50"],
        "first_text_p95_ms": result["first_text_ms"]["p95"],
        "ok": result["ok"],
        "server_cpu_s": round(sum(v for k, v in result["cpu_s"].items() if k.startswith("server")), 2),
    }


def _median(values: list[float]) -> float:
    values = [v for v in values if not math.isnan(v)]
    return round(statistics.median(values), 1) if values else math.nan


def verdict(level: dict) -> dict:
    """Each side's median of its bursts' p50s, and the rounds the project was no later in."""
    pairs = list(zip(level["project"], level["relay"], strict=True))
    project = _median([b["first_text_p50_ms"] for b in level["project"]])
    relay = _median([b["first_text_p50_ms"] for b in level["relay"]])
    return {
        "project_median_ms": project,
        "relay_median_ms": relay,
        "ratio": round(project / relay, 2) if relay else math.nan,
        "rounds_no_later": sum(p["first_text_p50_ms"] <= r["first_text_p50_ms"] for p, r in pairs),
        "rounds": len(pairs),
        "whole": all(b["ok"] == level["C"] for side in SIDES for b in level[side]),
    }


async def measure(model: FakeModel, *, levels=LEVELS, rounds: int = ROUNDS) -> dict:
    project = Stack(name="sqlite-daphne", database="sqlite", server="daphne", processes=1)
    relay = RelayStack()
    out: dict = {"project": project.label, "relay": relay.label, "rounds": rounds, "levels": []}
    need = WARM_UP + rounds * sum(levels)
    try:
        project.start(model)
        relay.start(model)
        pools = {
            "project": Pool(project.seed(op="users", count=400, conversations=-(-need // 400))),
            "relay": relay_pool(need),
        }
        stacks = {"project": project, "relay": relay}
        for side in SIDES:
            await concurrency.level(
                stacks[side], model, pools[side], WARM_UP, tokens=concurrency.TOKENS, rate=concurrency.RATE
            )
        for count in levels:
            level: dict = {"C": count, "project": [], "relay": []}
            for index in range(rounds):
                for side in SIDES if index % 2 == 0 else SIDES[::-1]:
                    await asyncio.sleep(PAUSE_S)
                    result = await concurrency.level(
                        stacks[side], model, pools[side], count, tokens=concurrency.TOKENS, rate=concurrency.RATE
                    )
                    level[side].append(_burst(result))
            level["verdict"] = verdict(level)
            out["levels"].append(level)
            print("    " + line(level), flush=True)
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
        print(project.server_log_tail(), flush=True)
        print(relay.server_log_tail(), flush=True)
    finally:
        relay.stop()
        project.stop()
    return out


def line(level: dict) -> str:
    v = level["verdict"]
    p50s = {side: ", ".join(f"{b['first_text_p50_ms']:g}" for b in level[side]) for side in SIDES}
    return (
        f"C={level['C']}: first text p50, median of {v['rounds']} bursts each: project {v['project_median_ms']} ms, "
        f"relay {v['relay_median_ms']} ms ({v['ratio']}x); the project no later in {v['rounds_no_later']}/"
        f"{v['rounds']} rounds (project {p50s['project']}; relay {p50s['relay']})"
        + ("" if v["whole"] else "  NOT EVERY STREAM WHOLE")
    )


def lines(result: dict) -> list[str]:
    head = [f"First text of a burst, {result['project']} against the relay in turn ({result['rounds']} rounds)"]
    return (
        head
        + ["  " + line(level) for level in result["levels"]]
        + ([f"  ERROR {result['error']}"] if "error" in result else [])
    )
