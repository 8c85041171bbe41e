"""Growth curves (`python -m bench --only growth`): how the cost of a run start, the memory, a
replay, a reconnect, the list and search grow with the data.

Per database, one server (1 daphne; PostgreSQL with Redis) against the bench's fake model:

- **conversation length**: one conversation each of 10, 100, 1,000 and 10,000 turns, every
  turn a user message, a tool call and its result, an answer in three deltas and `complete`
  (7 events). For each: message -> model request (a message sent over the socket until the
  fake model has read the request and written its first token, whose stamp says when),
  memory derivation (the events of the run's branch read and made into the model's
  messages, as a run start does: chat.eventlog.reads.runs_memory_events + chat.eventlog.history, timed in
  a Django process), full replay (connect with `?after=0` until `sync`) and reconnect
  (`?after=` the last 20 events).
- **table size**: 1,000 users and 100 / 1,000 / 10,000 conversations of 100 events each
  (10,000 / 100,000 / 1,000,000 events), grown step by step with bench/search.py's bulk
  seeding: the list's first page and a search for a rare word (Django's test client, as
  bench/search.py), the replay of one conversation and a run start (message -> model
  request) over the socket on conversations of the big table.

Each curve's growth comes from its own figures: the slope b of log(p50) against log(size),
fitted by least squares over the sizes but the smallest (growth()). The figures go to bench/results/growth.json and the plot
to docs/bench-growth.png (bench/plot.py).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from . import clients, firsttext
from .clients import percentile
from .server import ROOT, FakeModel, Stack

RESULTS = Path(__file__).resolve().parent / "results" / "growth.json"
LENGTHS = (10, 100, 1_000, 10_000)
TABLE_SIZES = ((100, 10_000), (1_000, 100_000), (10_000, 1_000_000))  # (conversations, events)
USERS = 1_000
EVENTS_PER_TURN = 7
RECONNECT_EVENTS = 20
PARTS = ("length", "table")  # `--growth-parts`: the table's seeding takes most of the time
REPEATS = 5  # per length: run starts, reconnects, derivations (replays: 3)
SAMPLES = 20  # per table size: conversations replayed and run starts
REQUESTS = 100  # per table size and list/search query


def growth(sizes: list[float], values: list[float]) -> tuple[str, float]:
    """(flat | log | linear | superlinear, b): b is the least-squares slope of log(value) against
    log(size), the smallest size left out when there are three or more: there a fixed cost
    (the socket, the request) hides how the rest grows. A constant cost has b ~ 0, a linear
    one b ~ 1; a logarithmic one has a small b that shrinks as the sizes grow."""
    points = [(math.log(s), math.log(v)) for s, v in zip(sizes, values) if s > 0 and v and v > 0]
    if len(points) < 2:
        return "-", math.nan
    if len(points) >= 3:
        points = points[1:]
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    if b < 0.1:
        kind = "flat"
    elif b < 0.5:
        kind = "log"
    elif b < 1.3:
        kind = "linear"
    else:
        kind = "superlinear"
    return kind, round(b, 2)


def _ms(samples: list[float]) -> dict:
    ms = [s * 1000 for s in samples]
    return {"p50": round(statistics.median(ms), 2), "p95": round(percentile(ms, 95), 2), "n": len(ms)}


# -- the parent: servers, sockets, the table ---------------------------------------------------


def _worker(stack: Stack, command: dict, timeout: float = 3600) -> dict:
    """One op of this module's worker in a Django process on the stack's database."""
    env = {**stack.env, "ALLOWED_HOSTS": stack.env["ALLOWED_HOSTS"] + ",testserver"}
    done = subprocess.run(
        [sys.executable, "-m", "bench.growth", "--worker"],
        cwd=ROOT,
        env=env,
        input=json.dumps(command),
        stdout=subprocess.PIPE,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench.growth worker {command['op']} failed with {done.returncode}")
    return json.loads(done.stdout.strip().splitlines()[-1])


async def _sync_time(stack: Stack, session: str, conversation: str, *, after: int, expect: int) -> float:
    started = time.perf_counter()
    ws, sync, replayed = await clients.connect(stack.base(0), conversation, session, after=after, timeout=120)
    elapsed = time.perf_counter() - started
    await ws.close()
    if len(replayed) != expect or sync["lastSeq"] != after + expect:
        raise RuntimeError(f"replay after {after}: {len(replayed)} events, {expect} expected")
    return elapsed


async def _run_start(stack: Stack, session: str, conversation: str) -> float:
    # rate=0: the fake model writes token 0 as soon as it has read the request.
    result = await firsttext.one(stack.base(0), session, conversation, tokens=2, rate=0)
    if result["problem"] or result["model_s"] is None:
        raise RuntimeError(f"run start: {result['problem'] or 'no first token'}")
    return result["model_s"]


async def _lengths(stack: Stack, lengths: tuple[int, ...], repeats: int) -> list[dict]:
    seeded = _worker(stack, {"op": "long", "turns": list(lengths)})
    session, out = seeded["session"], []
    for turns in lengths:
        conversation, last = seeded["conversations"][str(turns)], seeded["last_seq"][str(turns)]
        print(f"    {turns} turns ({last} events)", flush=True)
        replay = [await _sync_time(stack, session, conversation, after=0, expect=last) for _ in range(min(3, repeats))]
        reconnect = [
            await _sync_time(stack, session, conversation, after=last - RECONNECT_EVENTS, expect=RECONNECT_EVENTS)
            for _ in range(repeats)
        ]
        derived = _worker(stack, {"op": "derive", "conversation": conversation, "repeats": repeats})
        await _run_start(stack, session, conversation)  # warms up the server's model client
        starts = [await _run_start(stack, session, conversation) for _ in range(repeats)]
        out.append(
            {
                "turns": turns,
                "events": last,
                "run_start_ms": _ms(starts),
                "memory_ms": derived["memory_ms"],
                "memory_messages": derived["messages"],
                "replay_ms": _ms(replay),
                "reconnect_ms": _ms(reconnect),
            }
        )
    return out


async def _tables(stack: Stack, sizes: tuple[tuple[int, int], ...], requests: int, samples: int) -> list[dict]:
    out, offset, seeded_events = [], 0, 0
    for conversations, events in sizes:
        print(f"    {conversations} conversations / {events} events", flush=True)
        step = _worker(
            stack,
            {
                "op": "table",
                "offset": offset,
                "conversations": conversations - offset,
                "events": events - seeded_events,
                "users": USERS,
                "requests": requests,
                "samples": samples,
            },
        )
        offset, seeded_events = conversations, events
        pairs = step["pairs"]
        replay = [await _sync_time(stack, s, c, after=0, expect=n) for s, c, n in pairs]
        starts = [await _run_start(stack, s, c) for s, c, _ in pairs]
        # bench/search.py's figures as this module's: {"p50", "p95", "n"} in ms.
        timings = {name: {"p50": t["p50_ms"], "p95": t["p95_ms"], "n": t["n"]} for name, t in step["timings"].items()}
        out.append(
            {
                "conversations": conversations,
                "events": step["events"],
                "users": USERS,
                "seed_s": step["seed_s"],
                "list_ms": timings["list first page"],
                "search_ms": timings[next(k for k in timings if k.startswith("search rare"))],
                "search_common_ms": timings[next(k for k in timings if k.startswith("search common"))],
                "replay_ms": _ms(replay),
                "run_start_ms": _ms(starts),
            }
        )
    return out


LENGTH_CURVES = {
    "run_start_ms": "message -> model request",
    "memory_ms": "memory derivation",
    "replay_ms": "full replay",
    "reconnect_ms": f"?after reconnect ({RECONNECT_EVENTS} events)",
}
TABLE_CURVES = {
    "list_ms": "conversation list",
    "search_ms": "search (rare word)",
    "search_common_ms": "search (common word)",
    "replay_ms": "replay (one conversation)",
    "run_start_ms": "message -> model request",
}


def curves(result: dict) -> dict:
    """{"length" | "table": {key: (growth, b)}} of one database's figures, fitted on the p50s."""
    out: dict = {"length": {}, "table": {}}
    for part, key_size, names in (("length", "turns", LENGTH_CURVES), ("table", "events", TABLE_CURVES)):
        rows = result.get(part) or []
        for key in names:
            out[part][key] = growth([r[key_size] for r in rows], [r[key]["p50"] for r in rows])
    return out


async def measure(model: FakeModel, *, database: str, quick: bool = False, parts: tuple[str, ...] = PARTS) -> dict:
    lengths = LENGTHS[:3] if quick else LENGTHS
    sizes = tuple((c // 10, e // 10) for c, e in TABLE_SIZES[:2]) if quick else TABLE_SIZES
    stack = Stack(name=f"growth-{database}", database=database, server="daphne", processes=1)
    out: dict = {"database": database, "label": stack.label}
    print(f"\n[growth] {stack.label}", flush=True)
    try:
        stack.start(model)
        if "length" in parts:
            print("[growth] conversation length", flush=True)
            out["length"] = await _lengths(stack, lengths, REPEATS)
        if "table" in parts:
            print("[growth] table size", flush=True)
            out["table"] = await _tables(stack, sizes, REQUESTS // 5 if quick else REQUESTS, SAMPLES)
        out["growth"] = curves(out)
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
        print(stack.server_log_tail(), file=sys.stderr)
    finally:
        stack.stop()
    return out


def table(results: list[dict]) -> str:
    lines = []
    for result in results:
        lines.append(f"\n== growth, {result['label']} ==")
        if "error" in result:
            lines.append(f"  FAILED: {result['error']}")
        fitted = curves(result)
        rows = result.get("length") or []
        if rows:
            lines.append("  conversation length (turns with a tool call each), p50 / p95 ms:")
            lines.append(f"  {'':34}" + "".join(f"{r['turns']:>18,}" for r in rows) + "   growth (b)")
            for key, name in LENGTH_CURVES.items():
                kind, b = fitted["length"][key]
                cells = "".join(f"{r[key]['p50']:>9.1f} /{r[key]['p95']:>7.1f}" for r in rows)
                lines.append(f"  {name:34}{cells}   {kind} ({b})")
        rows = result.get("table") or []
        if rows:
            lines.append(f"  table size ({USERS:,} users; conversations / events), p50 / p95 ms:")
            lines.append(f"  {'':34}" + "".join(f"{r['conversations']:>7,} /{r['events']:>9,}" for r in rows))
            for key, name in TABLE_CURVES.items():
                kind, b = fitted["table"][key]
                cells = "".join(f"{r[key]['p50']:>9.1f} /{r[key]['p95']:>7.1f}" for r in rows)
                lines.append(f"  {name:34}{cells}   {kind} ({b})")
    return "\n".join(lines)


# -- the worker: a Django process on the stack's database --------------------------------------


def seed_long(turns: list[int]) -> dict:
    """A user with one conversation per length, each of that many finished turns with a tool call,
    stored as the server stores them: each turn's user_message names the one before it, and each
    finished run has its memory checkpoint (chat.eventlog.memory)."""
    from django.db import transaction
    from django.utils import timezone

    from chat.eventlog import memory
    from chat.models import Conversation, Event, Run

    from .seed import users

    user = users(1, len(turns))["users"][0]
    out: dict = {"session": user["session"], "conversations": {}, "last_seq": {}}
    for count, conversation_id in zip(turns, user["conversations"]):
        conversation = Conversation.objects.select_related("owner").get(pk=conversation_id)
        seq, now, parent = 0, timezone.now(), None
        for start in range(0, count, 1000):
            with transaction.atomic():
                runs = [
                    Run(conversation=conversation, user=conversation.owner, model="fake-model", status="succeeded")
                    for _ in range(start, min(count, start + 1000))
                ]
                Run.objects.bulk_create(runs)
                rows = []
                for index, run in enumerate(runs, start):
                    call = f"call_{index}"
                    for payload in (
                        {"type": "user_message", "content": f"turn {index}: what is {index} * 7?", "parentSeq": parent},
                        {"type": "tool_start", "toolName": "calculator", "toolCallId": call, "arguments": "{}"},
                        {
                            "type": "tool_end",
                            "toolName": "calculator",
                            "toolCallId": call,
                            "result": json.dumps({"result": index * 7}),
                            "isError": False,
                            "durationMs": 1,
                        },
                        {"type": "text", "content": f"{index} * 7 "},
                        {"type": "text", "content": f"is {index * 7}, "},
                        {"type": "text", "content": "as the calculator says."},
                        {"type": "complete", "status": "succeeded"},
                    ):
                        seq += 1
                        if payload["type"] == "user_message":
                            parent = seq
                        rows.append(
                            Event(conversation=conversation, run=run, seq=seq, type=payload["type"], payload=payload)
                        )
                Event.objects.bulk_create(rows, batch_size=5000)
        Run.objects.filter(conversation=conversation).update(finished_at=now)
        memory.checkpoints_fill(conversation_id=conversation.pk)
        Conversation.objects.filter(pk=conversation.pk).update(last_seq=seq, updated_at=now)
        out["conversations"][str(count)] = conversation_id
        out["last_seq"][str(count)] = seq
    return out


def derive(conversation: str, repeats: int) -> dict:
    """The memory of the conversation's last run, derived as a run start does (chat.eventlog.memory)."""
    from chat.eventlog import memory
    from chat.models import Conversation, Event

    conversation_id = Conversation.objects.values_list("pk", flat=True).get(pk=conversation)
    run_id = (
        Event.objects.filter(conversation_id=conversation_id, type="user_message")
        .order_by("-seq")
        .values_list("run_id", flat=True)
        .first()
    )
    times, messages = [], []
    for _ in range(repeats + 1):  # the first one warms up the connection and the caches
        started = time.perf_counter()
        messages = memory.runs_memory(runs={conversation_id: run_id})[conversation_id].messages
        times.append(time.perf_counter() - started)
    return {"memory_ms": _ms(times[1:]), "messages": len(messages)}


def grow_table(*, offset: int, conversations: int, events: int, users: int, requests: int, samples: int) -> dict:
    """The table grown by `conversations` / `events` (bench/search.py's seeding), then the list and
    search timed, and `samples` (session, conversation, events) of the big table to replay."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from chat.models import Conversation, Event

    from . import search
    from .seed import session_for

    started = time.monotonic()
    if offset:
        owners = list(get_user_model().objects.filter(username__startswith="search-").order_by("id"))
    else:
        owners = search.seed_users(users)
    search.seed_conversations(owners, conversations=conversations, events=events, offset=offset)
    seeded = time.monotonic() - started
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    timings = search.measure(owners, requests)
    pairs = []
    for owner in owners[:samples]:
        conversation = Conversation.objects.filter(owner=owner).order_by("-updated_at").first()
        if conversation is not None:
            pairs.append((session_for(owner), str(conversation.pk), conversation.last_seq))
    return {
        "events": Event.objects.filter(conversation__owner__username__startswith="search-").count(),
        "seed_s": round(seeded, 1),
        "timings": timings,
        "pairs": pairs,
    }


def worker() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    import django

    django.setup()
    command = json.loads(sys.stdin.read())
    op = command.pop("op")
    result = {"long": seed_long, "derive": derive, "table": grow_table}[op](**command)
    print(json.dumps(result))


def main() -> None:
    if sys.argv[1:] == ["--worker"]:
        worker()
        return
    sys.exit("run it as `python -m bench --only growth` (it needs the suite's fake model and servers)")


if __name__ == "__main__":
    main()
