"""The peers side by side (`--only peers`): the project, the minimal Channels relay and Chainlit
with and without its data layer, the four up at once, fed by the same fake model, measured by the
same clients (bench/clients.py; bench/peers/chainlit_client.py speaks Chainlit's socket.io).

First each one's idle sockets (bench/idle.py, on servers that have not streamed yet: memory per
socket); then a single stream each (the stretch's denominator); then per level, bursts of C
conversations x 300 tokens at 100/s (bench/concurrency.py's), one server after the other, the
order reversed every round so that each meets the machine's slow and fast moments alike. Per
burst: first text p50 / p95, stretch (its wall time over the single stream's), server CPU per
1,000 tokens, streams whole; per level, each server's median over the rounds.
"""

from __future__ import annotations

import asyncio
import statistics
import uuid

from .. import clients, concurrency, idle
from ..pool import Pool
from ..procs import server_cpu_per_1k
from ..reference import RelayStack
from ..reference import pool as relay_pool
from ..report import RESULTS as REPORT_RESULTS
from ..server import FakeModel, Stack
from . import chainlit_client
from .chainlit_stack import ChainlitStack

RESULTS = REPORT_RESULTS / "peers.json"
SIDES = ("project", "relay", "chainlit", "chainlit-data")
LEVELS = (50, 100, 200)
ROUNDS = 2
WARM_UP = 10  # a burst each before the rounds: the first burst of a server also pays its imports
PAUSE_S = 1.0  # between bursts, as between the concurrency bench's levels


def _stacks(sides) -> dict:
    made = {
        "project": lambda: Stack(name="sqlite-daphne", database="sqlite", server="daphne", processes=1),
        "relay": RelayStack,
        "chainlit": ChainlitStack,
        "chainlit-data": lambda: ChainlitStack(data=True),
    }
    return {side: made[side]() for side in sides}


def _pools(stacks: dict, need: int) -> dict[str, Pool]:
    """Each server's sockets: the project's seeded users and conversations; the relay's and
    Chainlit's any id (a Chainlit socket opens a thread of its own), with the signed-in user's
    cookie for the data layer's."""
    ids = [str(uuid.uuid4()) for _ in range(need)]
    made = {
        "project": lambda: Pool(stacks["project"].seed(op="users", count=400, conversations=-(-need // 400))),
        "relay": lambda: relay_pool(need),
        "chainlit": lambda: Pool({"users": [{"session": "-", "conversations": ids}]}),
        "chainlit-data": lambda: Pool({"users": [{"session": stacks["chainlit-data"].cookie, "conversations": ids}]}),
    }
    return {side: made[side]() for side in stacks}


def _connect(side: str):
    return chainlit_client.connect if side.startswith("chainlit") else clients.connect


def _burst(result: dict, solo_wall_s: float, tokens: int) -> dict:
    return {
        "first_text_p50_ms": result["first_text_ms"]["p50"],
        "first_text_p95_ms": result["first_text_ms"]["p95"],
        "wall_s": result["wall_s"],
        "stretch": round(result["wall_s"] / solo_wall_s, 2),
        "server_cpu_per_1k_s": server_cpu_per_1k(result, tokens),
        "ok": result["ok"],
        "problems": result["problems"][:2],
    }


def summary(level: dict) -> dict:
    """Per server, the median over its bursts of each figure, and whether every stream was whole."""
    out = {}
    for side, bursts in level["bursts"].items():
        out[side] = {
            key: round(statistics.median(b[key] for b in bursts), 3)
            for key in ("first_text_p50_ms", "first_text_p95_ms", "stretch", "server_cpu_per_1k_s")
        } | {"whole": all(b["ok"] == level["C"] for b in bursts)}
    return out


async def _level(stacks, pools, model, side: str, count: int, tokens: int) -> dict:
    return await concurrency.level(
        stacks[side], model, pools[side], count, tokens=tokens, rate=concurrency.RATE, connect=_connect(side)
    )


async def measure(
    model: FakeModel,
    *,
    levels=LEVELS,
    rounds: int = ROUNDS,
    idle_sockets: int = idle.SOCKETS,
    idle_seconds: float = idle.IDLE_SECONDS,
    tokens: int = concurrency.TOKENS,
    sides=SIDES,
) -> dict:
    """`sides`: some of SIDES, in their order (a test's short run)."""
    stacks = _stacks(sides)
    out: dict = {
        "tokens": tokens,
        "rate": concurrency.RATE,
        "rounds": rounds,
        "labels": {side: stack.label for side, stack in stacks.items()},
        "idle": {},
        "solo": {},
        "levels": [],
    }
    need = WARM_UP + 1 + (50 + idle_sockets if idle_sockets else 0) + rounds * sum(levels)
    try:
        for stack in stacks.values():
            stack.start(model)
        pools = _pools(stacks, need)
        if idle_sockets:  # first: servers that have not streamed, so freed memory cannot hide what sockets cost
            for side in sides:
                print(f"    {side}: {idle_sockets} idle sockets", flush=True)
                out["idle"][side] = await asyncio.wait_for(
                    idle.measure(
                        stacks[side],
                        model,
                        pools[side],
                        sockets=idle_sockets,
                        idle_seconds=idle_seconds,
                        connect=_connect(side),
                    ),
                    300,
                )
        for side in sides:
            await _level(stacks, pools, model, side, WARM_UP, tokens)
            solo = await _level(stacks, pools, model, side, 1, tokens)
            out["solo"][side] = {"wall_s": solo["wall_s"], "first_text_ms": solo["first_text_ms"]["p50"]}
        for count in levels:
            level: dict = {"C": count, "bursts": {side: [] for side in sides}}
            for index in range(rounds):
                for side in sides if index % 2 == 0 else sides[::-1]:
                    await asyncio.sleep(PAUSE_S)
                    result = await _level(stacks, pools, model, side, count, tokens)
                    level["bursts"][side].append(_burst(result, out["solo"][side]["wall_s"], tokens))
            level["summary"] = summary(level)
            out["levels"].append(level)
            print("\n".join("    " + line for line in level_lines(level)), flush=True)
        if "chainlit-data" in stacks:  # that its data layer kept the messages at all
            out["persisted_steps"] = stacks["chainlit-data"].rows("steps")
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
        for stack in stacks.values():
            print(stack.server_log_tail(), flush=True)
    finally:
        for stack in stacks.values():
            stack.stop()
    return out


def level_lines(level: dict) -> list[str]:
    lines = []
    for side, s in level["summary"].items():
        lines.append(
            f"C={level['C']} {side:>13}: first text p50/p95 {s['first_text_p50_ms']:g}/{s['first_text_p95_ms']:g} ms, "
            f"stretch {s['stretch']:g}, server CPU {s['server_cpu_per_1k_s']:g} s per 1k tokens"
            + ("" if s["whole"] else "  NOT EVERY STREAM WHOLE")
        )
    return lines


def lines(result: dict) -> list[str]:
    head = [
        f"Peers side by side, {result['tokens']} tokens at {result['rate']}/s, {result['rounds']} rounds per level:"
    ]
    head += [f"  {side}: {label}" for side, label in result["labels"].items()]
    head += [
        f"  {side}: {i['kib_per_socket']} KiB per idle socket ({i['sockets']} sockets), idle CPU {i['idle_cpu_pct']}%"
        for side, i in result["idle"].items()
    ]
    body = ["  " + line for level in result["levels"] for line in level_lines(level)]
    return head + body + ([f"  ERROR {result['error']}"] if "error" in result else [])
