"""Where an HTTP door's burst goes, beside the socket's (issue 55): `python -m bench.door_trace`.

burst_trace's server (bench/stepped_asgi.py: each run start's steps timed), and C clients of
one door at a time sending at once, the doors taking turns: the WebSocket's `message` frame,
`POST /v1/chat/completions` streamed, and SSE's `POST .../messages/` (its stream open and
synced). Per door, each step's time from the send (p50 and p95 over the bursts):

    http_in                  the request reached the ASGI application (the HTTP doors)
    token_checked            its bearer token checked (grouped: chat.accounts.token_checks)
    looked_up                its last grouped look-up before the start came back (its new
                             conversation for `/v1`, its conversation for SSE's POST)
    hops                     the request's trips to the request database threads before its
                             start: how many, their wait for a thread and their run (sums)
    received ... headers     as burst_trace's (`received`: the run engine's start called)
    first_delta_published    the first text delta stored and published
    first_text               the first text on the client

With `--profile`, the event loop's thread is profiled (cProfile) over the bursts of one door
(`--profile v1`): its top functions by own time and by cumulative time.

    python -m bench.door_trace                        # C=100, websocket, v1, sse, 2 rounds
    python -m bench.door_trace --profile v1 --rounds 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import httpx2

from . import clients
from .burst_trace import PROFILE_PATH, STEPS_PATH
from .clients import percentile
from .doors import Tokens
from .pool import Pool
from .runinfo import RunInfo
from .server import FakeModel, Stack

TOKENS = 3
RATE = 100
DOORS = ("websocket", "v1", "sse")
STEPS = (
    "http_in",
    "token_checked",
    "looked_up",
    "received",
    "orm_in",
    "orm_out",
    "task",
    "request_sent",
    "headers",
    "first_delta_published",
)


class Sent:
    """One run as its client saw it: its conversation, the send and the first text (wall clock)."""

    def __init__(self, conversation: str) -> None:
        self.conversation, self.sent_at, self.first_text_at = conversation, 0.0, None


async def socket_client(base: str, session: str, conversation: str, ready, go) -> Sent:
    ws, _, _ = await clients.connect(base, conversation, session, timeout=60)
    try:
        ready()
        await go.wait()
        stream = await clients.run(ws, clients.Stream(TOKENS), rate=RATE, timeout=60)
    finally:
        await ws.close()
    sent = Sent(conversation)
    sent.sent_at, sent.first_text_at = stream.sent_at, stream.first_text_at
    return sent


async def v1_client(base: str, token: str, conversation: str, ready, go) -> Sent:
    body = {"model": "default", "stream": True, "messages": [{"role": "user", "content": clients.order(TOKENS, RATE)}]}
    async with httpx2.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        (await http.get("/v1/models")).raise_for_status()
        ready()
        await go.wait()
        sent = Sent("")
        sent.sent_at = time.time()
        async with http.stream("POST", "/v1/chat/completions", json=body) as response:
            sent.conversation = response.headers.get("x-agentsite-conversation", "")
            async for line in response.aiter_lines():
                if sent.first_text_at is None and line.startswith("data: ") and '"content":"0@' in line:
                    sent.first_text_at = time.time()
    return sent


async def sse_client(base: str, token: str, conversation: str, ready, go) -> Sent:
    headers = {"Authorization": f"Bearer {token}"}
    sent = Sent(conversation)
    async with httpx2.AsyncClient(base_url=base, headers=headers, timeout=60) as http:
        (await http.get("/api/usage/")).raise_for_status()
        async with httpx2.AsyncClient(base_url=base, headers=headers, timeout=60) as reader:
            path = f"/api/conversations/{conversation}/stream/?until=complete"
            async with reader.stream("GET", path) as response:
                lines, event = response.aiter_lines(), ""
                async for line in lines:
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: ") and event == "sync":
                        break
                ready()
                await go.wait()
                sent.sent_at = time.time()
                posted = http.post(
                    f"/api/conversations/{conversation}/messages/", json={"content": clients.order(TOKENS, RATE)}
                )
                task = asyncio.ensure_future(posted)
                async for line in lines:
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: ") and event == "text" and sent.first_text_at is None:
                        sent.first_text_at = time.time()
                (await task).raise_for_status()
    return sent


async def burst(stack: Stack, pool: Pool, tokens: Tokens, door: str, count: int) -> list[Sent]:
    pairs = pool.take(count)
    async with httpx2.AsyncClient(timeout=60) as http:
        credentials = [session if door == "websocket" else await tokens.of(http, session) for session, _ in pairs]
    go, ready_count = asyncio.Event(), [0]

    def ready():
        ready_count[0] += 1
        if ready_count[0] == count:
            go.set()

    client = {"websocket": socket_client, "v1": v1_client, "sse": sse_client}[door]
    return list(
        await asyncio.gather(
            *(client(stack.base(), cred, conv, ready, go) for cred, (_, conv) in zip(credentials, pairs))
        )
    )


def table(door: str, runs: list[Sent], readings: dict) -> list[str]:
    series: dict[str, list[float]] = {name: [] for name in (*STEPS, "first_text")}
    hops, waits, works = [], [], []
    for run in runs:
        marks = dict(readings["steps"].get(run.conversation, {}), first_text=run.first_text_at)
        for name in series:
            if marks.get(name) is not None:
                series[name].append((marks[name] - run.sent_at) * 1000)
        trips = readings["hops"].get(run.conversation)
        if trips is not None:
            hops.append(len(trips))
            waits.append(sum(began - queued for queued, began, _ in trips) * 1000)
            works.append(sum(ended - began for _, began, ended in trips) * 1000)
    out = [f"{door}: step (ms from the send)   p50      p95      n"]
    for name, values in series.items():
        if values:
            out.append(f"  {name:<26} {percentile(values, 50):>7.1f}  {percentile(values, 95):>7.1f}  {len(values):>4}")
    if hops:
        out.append(
            f"  request-db trips before the start: {percentile(hops, 50)} (p50); their wait for a thread "
            f"{percentile(waits, 50):.1f} / {percentile(waits, 95):.1f} ms, their run "
            f"{percentile(works, 50):.1f} / {percentile(works, 95):.1f} ms (p50 / p95, summed per request)"
        )
    return out


async def measure(stack: Stack, pool: Pool, *, doors: list[str], count: int, rounds: int, profile: str) -> str:
    tokens = Tokens(stack.base())
    for door in doors:
        await burst(stack, pool, tokens, door, 1)  # warm
    done: dict[str, list[Sent]] = {door: [] for door in doors}
    profiled = ""
    async with httpx2.AsyncClient(base_url=stack.base(), timeout=60) as http:
        for _ in range(rounds):
            for door in doors:
                await asyncio.sleep(1)
                if door == profile:
                    await http.post(PROFILE_PATH, content=b"on")
                done[door] += await burst(stack, pool, tokens, door, count)
                if door == profile:
                    profiled = (await http.post(PROFILE_PATH, content=b"off")).text
        readings = (await http.get(STEPS_PATH)).json()
    lines = []
    for door in doors:
        lines += table(door, done[door], readings)
    return "\n".join(lines + ([f"profile of the loop's thread, {profile}:", profiled] if profile else []))


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.door_trace", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=100, help="messages sent at once")
    parser.add_argument("--rounds", type=int, default=2, help="bursts of each door, their steps pooled")
    parser.add_argument("--doors", default=",".join(DOORS), help=f"comma list of {', '.join(DOORS)}")
    parser.add_argument("--profile", default="", help="profile the loop over this door's bursts")
    parser.add_argument("--out", default=None, help="also write the table and the run's details here (JSON)")
    args = parser.parse_args()
    doors = args.doors.split(",")
    info = RunInfo().start()
    model = FakeModel()
    stack = Stack("sqlite-daphne-stepped", server="daphne-stepped")
    try:
        stack.start(model)
        need = len(doors) * (1 + args.count * args.rounds)
        users = min(need, 50)
        pool = Pool(stack.seed(op="users", count=users, conversations=-(-need // users)))
        text = asyncio.run(
            measure(stack, pool, doors=doors, count=args.count, rounds=args.rounds, profile=args.profile)
        )
    finally:
        stack.stop()
        model.stop()
    run = info.finish()
    print(f"C={args.count}, {args.rounds} bursts per door, commit {run['commit']}; machine load {run['load']}")
    print(text)
    if args.out:
        with open(args.out, "w") as out:
            json.dump({"count": args.count, "rounds": args.rounds, "run": run, "table": text}, out, indent=1)


if __name__ == "__main__":
    main()
