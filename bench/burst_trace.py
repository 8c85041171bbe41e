"""Where a burst's first text goes (issue 30): `python -m bench.burst_trace`.

One daphne serving bench/stepped_asgi.py (the project with each run start's steps timed) on
SQLite, against the bench's fake model. C sockets each send a message at once (default 100,
after a warm-up run); each run streams TOKENS tokens. Per step, the time from the message's
send, p50 and p95 over the burst, in the order a run start goes through them:

    received                 the consumer handed the message to the run start
    orm_in / orm_out         its group's trip to the ORM thread (store the run + user_message, memory)
    task                     the run's task began
    user_message_published   its user_message published to the conversation's sockets
    request_sent             the model request handed to the SDK
    headers                  the model's response headers
    model_first_token        the fake model wrote token 0 (its stamp)
    first_delta_submitted    the first text delta handed to the group writer
    first_delta_round_in     the writer's thread began the round that stores it
    first_delta_round_out    ... and committed it
    first_delta_published    the first text delta stored and published
    first_text               the first text frame on the client's socket

and the ORM thread's groups and the writer's rounds (size, start and end from the burst's first
send), and the write transactions' waits at BEGIN (the writer's thread, the others).

    python -m bench.burst_trace                 # C=100
    python -m bench.burst_trace --count 200 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os

import httpx2

from . import clients
from .clients import percentile
from .pool import Pool
from .runinfo import RunInfo
from .server import FakeModel, Stack

# Where the server of bench/stepped_asgi.py answers its readings.
STEPS_PATH = "/__bench__/steps"
# ... and switches its profile of the loop's thread (POST `on`, `off`).
PROFILE_PATH = "/__bench__/profile"
TOKENS = 3
RATE = 100
SERVER_STEPS = (
    "received",
    "orm_in",
    "orm_out",
    "task",
    "user_message_published",
    "request_sent",
    "headers",
)
DELTA_STEPS = ("first_delta_submitted", "first_delta_round_in", "first_delta_round_out", "first_delta_published")


async def burst(stack: Stack, pool: Pool, count: int) -> tuple[list[tuple[str, clients.Stream]], float]:
    pairs = pool.take(count)
    connected = [await clients.connect(stack.base(), conversation, session) for session, conversation in pairs]
    streams = [clients.Stream(TOKENS) for _ in pairs]
    try:
        await asyncio.gather(
            *(clients.run(ws, stream, rate=RATE, timeout=60) for (ws, _, _), stream in zip(connected, streams))
        )
    finally:
        await clients.close_all(ws for ws, _, _ in connected)
    problems = [
        p for p in (clients.check(st, after_seq=sync["lastSeq"]) for st, (_, sync, _) in zip(streams, connected)) if p
    ]
    if problems:
        raise RuntimeError(f"{len(problems)} runs went wrong: {problems[:3]}")
    return [(conversation, stream) for (_, conversation), stream in zip(pairs, streams)], min(
        s.sent_at for s in streams
    )


def table(rounds: list[tuple[list[tuple[str, clients.Stream]], float]], readings: dict) -> str:
    steps = readings["steps"]
    series: dict[str, list[float]] = {
        name: [] for name in (*SERVER_STEPS, "model_first_token", *DELTA_STEPS, "first_text")
    }
    groups = []
    for runs, first_sent in rounds:
        for conversation, stream in runs:
            marks = steps.get(conversation, {})
            times = {name: marks.get(name) for name in SERVER_STEPS + DELTA_STEPS}
            times["model_first_token"] = clients.first_token_stamp(stream)
            times["first_text"] = stream.first_text_at
            for name, at in times.items():
                if at is not None:
                    series[name].append((at - stream.sent_at) * 1000)
        last_text = max(s.first_text_at or s.sent_at for _, s in runs)
        groups.append(
            {
                kind: [
                    (g["size"], round((g["began"] - first_sent) * 1000), round((g["ended"] - first_sent) * 1000))
                    for g in readings[kind]
                    if first_sent <= g["began"] <= last_text
                ]
                for kind in ("groups", "rounds")
            }
            | {"begins": _begin_waits(readings["begins"], first_sent, last_text)}
        )
    lines = ["step                      p50 ms   p95 ms    n"]
    for name, values in series.items():
        lines.append(f"{name:<24} {percentile(values, 50):>7.1f}  {percentile(values, 95):>7.1f}  {len(values):>4}")
    for index, burst_groups in enumerate(groups, 1):
        for kind, label in (("groups", "ORM groups"), ("rounds", "writer rounds")):
            shown = ", ".join(f"{size} runs {began}-{ended} ms" for size, began, ended in burst_groups[kind])
            lines.append(f"burst {index}, {label} (from the first send): {shown}")
        lines.append(f"burst {index}, waits at BEGIN: {burst_groups['begins']}")
    return "\n".join(lines)


def _begin_waits(begins: list[dict], first_sent: float, last_text: float) -> str:
    """The write transactions' waits at BEGIN during a burst, per kind of thread: how many, how
    many over 1 ms, the longest (their turn, agentsite/sqlite, and SQLite's lock)."""
    waits: dict[str, list[float]] = {}
    for begin in begins:
        if first_sent <= begin["began"] <= last_text:
            kind = "writer" if begin["thread"].startswith("event-writer") else "other threads"
            waits.setdefault(kind, []).append((begin["ended"] - begin["began"]) * 1000)
    return "; ".join(
        f"{kind} {len(ms)}, {sum(1 for m in ms if m > 1)} over 1 ms, longest {max(ms):.1f} ms"
        for kind, ms in sorted(waits.items())
    )


async def measure(stack: Stack, pool: Pool, *, count: int, rounds: int) -> str:
    await burst(stack, pool, 1)  # warm: the model client's connections, the server's imports
    done = []
    for _ in range(rounds):
        await asyncio.sleep(1)
        done.append(await burst(stack, pool, count))
    readings = httpx2.get(stack.base() + STEPS_PATH, timeout=30).json()
    return table(done, readings)


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.burst_trace", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=100, help="messages sent at once")
    parser.add_argument("--rounds", type=int, default=3, help="bursts, their steps pooled")
    parser.add_argument("--out", default=None, help="also write the table and the run's details here (JSON)")
    args = parser.parse_args()
    info = RunInfo().start()
    model = FakeModel()
    stack = Stack("sqlite-daphne-stepped", server="daphne-stepped")
    try:
        stack.start(model)
        need = 1 + args.count * args.rounds
        users = min(need, 50)
        pool = Pool(stack.seed(op="users", count=users, conversations=-(-need // users)))
        text = asyncio.run(measure(stack, pool, count=args.count, rounds=args.rounds))
    finally:
        stack.stop()
        model.stop()
    run = info.finish()
    print(f"C={args.count}, {args.rounds} bursts, commit {run['commit']}; machine load {run['load']}")
    print(text)
    if args.out:
        with open(os.path.expanduser(args.out), "w") as out:
            json.dump({"count": args.count, "rounds": args.rounds, "run": run, "table": text}, out, indent=1)


if __name__ == "__main__":
    main()
