"""`python -m bench --only idle10k` (opt-in, `make bench-idle10k`): 10,000 idle sockets in one
process, and the reconnect storm after its restart.

One daphne on SQLite + the in-memory layer, with its database queries counted
(bench/counted_asgi.py). 1,000 users hold 10 sockets each (under AGENT_MAX_SOCKETS_PER_USER), one
per conversation, each conversation with a finished run of a few events. Measured:

- memory: the server's RSS before and after opening the sockets, per socket;
- CPU while idle: a quiet window with no client frames (the server's own timers: daphne's
  protocol pings every 20 s and its timeout sweeps), then a window where every socket also
  sends the page's `ping` every 20 s (static/chat/socket.js), spread evenly, and the queries
  per ping (a ping is answered from memory; the process's tail watch reads the last seq of every
  conversation with a socket in one query every 5 s, chat/doors/socket/tail_watch.py, and those
  queries are counted over the pings);
- the reconnect storm: the server is stopped (SIGTERM) and started again on its port; once it
  answers, every socket reconnects with `?after=<the last seq it saw>` after the page's first
  wait (0.25-2.25 s at random: every page dropped at the same moment), and one whose handshake
  fails retries on the page's backoff (1, 2, 4, 8, 15 s, +-50%). Per socket the
  time from the storm's start to its `sync`; the queries per reconnect; the CPU it took.

The client is this one asyncio process (RLIMIT_NOFILE raised to its hard limit, which the servers
inherit).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import resource
import time
from collections import Counter
from dataclasses import dataclass, field

import websockets

from . import clients
from .clients import percentile
from .pool import Pool
from .procs import CpuMeter, rss_bytes, self_cpu_seconds
from .query_count import difference
from .report import RESULTS as RESULTS_DIR
from .server import FakeModel, Stack

SOCKETS = 10_000
SOCKETS_PER_USER = 10
HISTORY_EVENTS = 4
CONNECT_AT_ONCE = 50
# daphne pings every open socket every 20 s itself (its --ping-interval) and sweeps them all for
# timeouts every few seconds: the quiet window holds one whole round of its pings.
QUIET_SECONDS = 20
IDLE_SECONDS = 60
PING_EVERY = 20.0  # static/chat/socket.js PING_EVERY_MS
# static/chat/socket.js reconnectDelayMs: the first reconnect spread over FIRST_RETRY, later ones
# on BACKOFF_MS, each +-50%.
FIRST_RETRY = (0.25, 2.25)
BACKOFF = (1, 2, 4, 8, 15)
STORM_DEADLINE = 300
SYNCED_BY = (5, 10, 30, 60, 120, 300)
PING = json.dumps({"type": "ping"})
RESULTS = RESULTS_DIR / "idle10k.json"


@dataclass
class Held:
    """One of the bench's sockets: its conversation, the connection and what it saw."""

    session: str
    conversation: str
    ws: object = None
    last_seq: int = 0
    pongs: int = 0
    reader: asyncio.Task | None = None
    storm: dict = field(default_factory=dict)


async def _read(held: Held) -> None:
    """Drains the socket (pongs, frames), keeping the last seq, until it closes."""
    try:
        async for raw in held.ws:
            frame = json.loads(raw)
            if frame.get("type") == "pong":
                held.pongs += 1
            elif "seq" in frame:
                held.last_seq = max(held.last_seq, frame["seq"])
    except websockets.ConnectionClosed:
        pass


async def _connect(stack: Stack, held: Held) -> int:
    """Connect with `after` = the last seq seen and start draining; the frames replayed."""
    held.ws, sync, replayed = await clients.connect(
        stack.base(), held.conversation, held.session, after=held.last_seq, timeout=60
    )
    held.last_seq = max([sync["lastSeq"]] + [f["seq"] for f in replayed if "seq" in f])
    held.reader = asyncio.create_task(_read(held))
    return len(replayed)


async def _open_all(stack: Stack, held: list[Held]) -> list[str]:
    gate = asyncio.Semaphore(CONNECT_AT_ONCE)

    async def one(h: Held) -> None:
        async with gate:
            await _connect(stack, h)

    results = await asyncio.gather(*(one(h) for h in held), return_exceptions=True)
    return [repr(r) for r in results if isinstance(r, BaseException)]


async def _ping(held: list[Held], stop: asyncio.Event) -> int:
    """Each open socket a ping every PING_EVERY seconds, the sockets' turns spread evenly (each
    page's timer starts at its own connect); the pings sent."""
    loop = asyncio.get_running_loop()
    start, sent = loop.time(), 0
    while not stop.is_set():
        due = int((loop.time() - start) / PING_EVERY * len(held))
        while sent < due:
            ws = held[sent % len(held)].ws
            sent += 1
            try:
                await ws.send(PING)
            except websockets.ConnectionClosed:
                pass
        try:
            await asyncio.wait_for(stop.wait(), 0.1)
        except TimeoutError:
            pass
    return sent


async def _reconnect(stack: Stack, held: Held, started: float, deadline: float) -> None:
    """As the page does: its first wait, and after each failure its backoff."""
    attempt, errors = 0, []
    await asyncio.sleep(random.uniform(*FIRST_RETRY))
    while True:
        attempt += 1
        try:
            replayed = await _connect(stack, held)
        except Exception as exc:
            errors.append(_error(exc))
            wait = BACKOFF[min(attempt - 1, len(BACKOFF) - 1)] * random.uniform(0.5, 1.5)
            if time.monotonic() + wait > deadline:
                held.storm = {"attempts": attempt, "errors": errors}
                return
            await asyncio.sleep(wait)
            continue
        held.storm = {"sync_s": time.monotonic() - started, "attempts": attempt, "replayed": replayed, "errors": errors}
        return


def _error(exc: Exception) -> str:
    """A failed handshake's kind: the exception, and the HTTP status for one the server refused."""
    if isinstance(exc, websockets.InvalidStatus):
        return f"InvalidStatus {exc.response.status_code}"
    return type(exc).__name__


async def _progress(held: list[Held], started: float) -> None:
    """The storm as it goes, for whoever watches the run."""
    while True:
        await asyncio.sleep(10)
        synced = sum("sync_s" in h.storm for h in held)
        print(f"    {time.monotonic() - started:.0f} s: {synced} of {len(held)} synced", flush=True)


def _server(stack: Stack) -> dict:
    return {"server": stack.pids[0]}


def _per(count: dict, n: int) -> dict:
    """Query counts per socket (per ping, per reconnect), by kind."""
    return {
        "queries": round(count["queries"] / max(1, n), 2),
        "by_kind": {k: round(v / max(1, n), 2) for k, v in sorted(count["by_kind"].items(), key=lambda kv: -kv[1])},
    }


async def _idle(stack: Stack, held: list[Held], *, quiet: float, seconds: float) -> dict:
    meter = CpuMeter(_server(stack)).start()
    await asyncio.sleep(quiet)
    quiet_cpu = meter.stop()["server"]
    before, pongs = stack.query_counts(), sum(h.pongs for h in held)
    stop = asyncio.Event()
    meter = CpuMeter(_server(stack)).start()
    pinger = asyncio.create_task(_ping(held, stop))
    await asyncio.sleep(seconds)
    stop.set()
    pings = await pinger
    cpu = meter.stop()["server"]
    await asyncio.sleep(1)  # the last pongs
    queries = difference(stack.query_counts(), before)
    return {
        "quiet_seconds": quiet,
        "quiet_cpu_pct": round(100 * quiet_cpu / quiet, 2),
        "ping_seconds": seconds,
        "ping_every_s": PING_EVERY,
        "pings": pings,
        "pongs": sum(h.pongs for h in held) - pongs,
        "cpu_pct": round(100 * cpu / seconds, 2),
        "cpu_ms_per_ping": round(1000 * cpu / max(1, pings), 3),
        "queries_per_ping": _per(queries, pings),
    }


async def _storm(stack: Stack, held: list[Held]) -> dict:
    await clients.close_all([h.ws for h in held])  # the server's end closed them; their readers end
    await asyncio.gather(*(h.reader for h in held if h.reader))
    before = stack.query_counts()  # the new process's start-up queries
    client_cpu, meter = self_cpu_seconds(), CpuMeter(_server(stack)).start()
    started = time.monotonic()
    progress = asyncio.create_task(_progress(held, started))
    await asyncio.gather(*(_reconnect(stack, h, started, started + STORM_DEADLINE) for h in held))
    progress.cancel()
    cpu, client_cpu = meter.stop()["server"], self_cpu_seconds() - client_cpu
    synced = sorted(h.storm["sync_s"] for h in held if "sync_s" in h.storm)
    errors = Counter(e for h in held for e in h.storm["errors"])
    queries = difference(stack.query_counts(), before)
    attempts = Counter(h.storm["attempts"] for h in held)
    return {
        "reconnected": len(synced),
        "failed": len(held) - len(synced),
        "deadline_s": STORM_DEADLINE,
        "total_s": round(synced[-1], 2) if synced else None,
        "sync_s": {"p50": round(percentile(synced, 50), 3), "p95": round(percentile(synced, 95), 3)}
        if synced
        else None,
        # How the storm went: the sockets synced by each of these times.
        "synced_by": {f"{t} s": sum(s <= t for s in synced) for t in SYNCED_BY if t <= STORM_DEADLINE},
        "attempts": {str(k): v for k, v in sorted(attempts.items())},
        "failed_attempts": sum(errors.values()),
        "errors": dict(errors.most_common(5)),
        "replayed_frames": sum(h.storm.get("replayed", 0) for h in held),
        # Every attempt's queries, the failed ones' too: over the sockets that got their sync, and
        # over the attempts.
        "queries_per_reconnect": _per(queries, len(synced)) if synced else None,
        "queries_per_attempt": _per(queries, sum(h.storm["attempts"] for h in held)),
        "server_cpu_s": cpu,
        "server_cpu_ms_per_reconnect": round(1000 * cpu / len(synced), 2) if synced else None,
        "client_cpu_s": round(client_cpu, 2),
    }


async def measure(model: FakeModel, *, sockets: int = SOCKETS, quick: bool = False) -> dict:
    seconds = 20 if quick else IDLE_SECONDS
    stack = Stack(name="idle10k", server="daphne-counted")
    out: dict = {"label": "sqlite+memory, 1x daphne", "sockets": sockets, "history_events": HISTORY_EVENTS}
    descriptors = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if descriptors < sockets + 1000:  # the client holds a descriptor per socket, and so does the server
        out["error"] = f"RLIMIT_NOFILE is {descriptors}: {sockets} sockets need {sockets + 1000} (ulimit -Hn)"
        return out
    held: list[Held] = []
    try:
        stack.start(model)
        users = -(-(sockets + CONNECT_AT_ONCE) // SOCKETS_PER_USER)
        pool = Pool(stack.seed(op="users", count=users, conversations=SOCKETS_PER_USER))
        warm = [Held(s, c) for s, c in pool.take(CONNECT_AT_ONCE)]
        held = [Held(s, c) for s, c in pool.take(sockets)]
        stack.seed(op="history", conversations=[h.conversation for h in held], events=HISTORY_EVENTS)
        print(f"[idle10k] {users} users, {sockets} conversations of {HISTORY_EVENTS} events seeded", flush=True)
        await _open_all(stack, warm)  # imports, caches, the run registry
        await clients.close_all([h.ws for h in warm])
        await asyncio.sleep(1)
        rss_before, before = rss_bytes(stack.pids[0]), stack.query_counts()
        started, meter = time.monotonic(), CpuMeter(_server(stack)).start()
        failed = await _open_all(stack, held)
        opened, cpu = time.monotonic() - started, meter.stop()["server"]
        queries = difference(stack.query_counts(), before)
        out["connect"] = {
            "failed": len(failed),
            "errors": failed[:5],
            "seconds": round(opened, 2),
            "per_s": round((sockets - len(failed)) / opened, 1),
            "server_cpu_ms_per_connect": round(1000 * cpu / sockets, 2),
            "queries_per_connect": _per(queries, sockets - len(failed)),
        }
        print(f"[idle10k] {sockets - len(failed)} sockets open in {opened:.1f} s", flush=True)
        if failed:
            raise RuntimeError(f"{len(failed)} sockets did not open: {failed[:3]}")
        await asyncio.sleep(2)
        rss_after = rss_bytes(stack.pids[0])
        out["memory"] = {
            "rss_before_mib": round(rss_before / 2**20, 1),
            "rss_after_mib": round(rss_after / 2**20, 1),
            "kib_per_socket": round((rss_after - rss_before) / sockets / 1024, 1),
            "client_rss_mib": round(rss_bytes(os.getpid()) / 2**20, 1),
        }
        print(f"[idle10k] idle: {QUIET_SECONDS} s quiet, {seconds} s with pings", flush=True)
        out["idle"] = await _idle(stack, held, quiet=QUIET_SECONDS, seconds=seconds)
        started = time.monotonic()
        stack.restart()
        out["restart_s"] = round(time.monotonic() - started, 2)
        print(f"[idle10k] restarted in {out['restart_s']} s; the storm", flush=True)
        out["storm"] = await _storm(stack, held)
        await asyncio.sleep(2)
        out["storm"]["rss_after_mib"] = round(rss_bytes(stack.pids[0]) / 2**20, 1)
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
        print(stack.server_log_tail(), flush=True)
    finally:
        await clients.close_all([h.ws for h in held])
        stack.stop()
    return out


def lines(result: dict) -> list[str]:
    """What the run prints."""
    out = [f"\n== idle sockets at scale: {result['sockets']} on {result['label']} =="]
    if "error" in result:
        out.append(f"  FAILED: {result['error']}")
    c, m, i, s = (result.get(k) for k in ("connect", "memory", "idle", "storm"))
    if c:
        out.append(
            f"  opened in {c['seconds']} s ({c['per_s']}/s), server CPU {c['server_cpu_ms_per_connect']} ms and "
            f"{c['queries_per_connect']['queries']} queries each"
        )
    if m:
        out.append(
            f"  memory: RSS {m['rss_before_mib']} -> {m['rss_after_mib']} MiB, {m['kib_per_socket']} KiB per socket"
        )
    if i:
        out.append(
            f"  idle CPU: {i['quiet_cpu_pct']}% of a core without frames; {i['cpu_pct']}% with a ping per socket "
            f"every {i['ping_every_s']:g} s ({i['pings']} pings, {i['pongs']} pongs, "
            f"{i['cpu_ms_per_ping']} ms and {i['queries_per_ping']['queries']} queries per ping)"
        )
    if s:
        out.append(
            f"  restart {result['restart_s']} s; reconnect storm: {s['reconnected']} synced ({s['failed']} not "
            f"within {s['deadline_s']} s), the last at {s['total_s']} s, sync p50/p95 {s['sync_s']}; "
            f"synced by {s['synced_by']}"
        )
        out.append(
            f"  attempts per socket {s['attempts']}, failed attempts {s['failed_attempts']} {s['errors']}; "
            f"queries per attempt {s['queries_per_attempt']}, per reconnect {s['queries_per_reconnect']}; "
            f"server CPU {s['server_cpu_s']} s ({s['server_cpu_ms_per_reconnect']} ms per reconnect), "
            f"client {s['client_cpu_s']} s"
        )
    return out
