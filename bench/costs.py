"""Costs of the features of issue 55's round (`python -m bench --only costs`), each against what it
is measured against (docs/protocol.md, "Queued messages", "Steering", "Sub-agents", "Firing",
"Budgets"). The fake model answers at once unless said (bench/fakemodel.py), so the figures are
the server's own times.

On one daphne with SQLite + in-memory, the feature and its baseline taking turns in each of
`rounds` rounds (which goes first alternating), each run on a fresh conversation and socket
(bench/cost_runs.py), after one warm-up run of each that is left out:
- **queued**: a message queued while a run works (`whileRunning: "queue"`), from that run's
  `complete` (its `ts`) to the queued run's `user_message`, its model request and its first
  text; against a direct message from its send to the same three.
- **steer**: a steer sent at the first text of a model call streaming 50 tokens at 100 a second
  that ends in a tool call: the gap from that call's last token to the next model request (which
  holds the steer, as the fake model saw), against the same gap in the same run without a
  steer; and from the steer's send to that request.
- **sub-agent**: an answer of 20 tokens at 100 a second streamed by a child run, the
  conversation's agent handing the task to its delegate (a model call for the delegate tool, the
  child run, a closing model call), against the same answer by the agent itself: first text and
  the top-level `complete`, from the send.
- **budget**: the gap between two model calls of a run of CALLS model calls (a tool call in each
  but the last) by a user with a daily token budget (too large to be reached), against a user
  with none: the check before each model call (chat/runtime/budget_check.py) is the difference.
  Measured through runs, and the check itself (chat.accounts.budgets.budget_stop) timed in a
  Django process of its own on the same database for those runs (bench/budget_timing.py).

On PostgreSQL + Redis with two daphnes:
- **schedule**: SCHEDULES schedules `at` due times spread over two poll intervals, each on a
  conversation of its own watched by a socket: from the due time to its run's `user_message`
  (`ts`) and to its model request; against the scheduler's tick (AGENT_SCHEDULE_POLL_SECONDS,
  each process polling on its own).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

import httpx2

from . import clients, cost_runs
from .clients import percentile
from .doors import Tokens
from .pool import Pool
from .server import ROOT, FakeModel, Stack

RESULTS = Path(__file__).resolve().parent / "results" / "costs.json"
ROUNDS = 12
CALLS = 8  # model calls in a budget run: CALLS - 1 gaps each
SCHEDULES = 20
POLL_SECONDS = 5.0  # the server's default AGENT_SCHEDULE_POLL_SECONDS
CHECKS = 200  # budget checks timed in-process, each side
HUGE_BUDGET = 10**12  # tokens a day: checked before every call, never reached


def summary(seconds: list[float]) -> dict:
    ms = [s * 1000 for s in seconds]
    if not ms:
        return {"p50": None, "p95": None, "mean": None, "n": 0}
    return {
        "p50": round(statistics.median(ms), 1),
        "p95": round(percentile(ms, 95), 1),
        "mean": round(statistics.fmean(ms), 1),
        "n": len(ms),
    }


def _added(feature: dict, baseline: dict) -> float | None:
    if feature["p50"] is None or baseline["p50"] is None:
        return None
    return round(feature["p50"] - baseline["p50"], 1)


def _conversations(seeded: dict) -> list[str]:
    return [c for user in seeded["users"] for c in user["conversations"]]


async def _turns(rounds: int, sides: dict[str, object]) -> dict[str, list[dict]]:
    """Each side once per round (a warm-up first, left out), the order alternating by round."""
    names = list(sides)
    out: dict[str, list[dict]] = {name: [] for name in names}
    for index in range(rounds + 1):
        for name in names if index % 2 == 0 else names[::-1]:
            result = await sides[name]()
            if index:
                out[name].append(result)
    return out


def _of(results: list[dict], key: str) -> list[float]:
    return [r[key] for r in results if not r["problem"]]


def _problems(*sides: list[dict]) -> list[str]:
    return [r["problem"] for side in sides for r in side if r["problem"]][:5]


async def measure_sqlite(model: FakeModel, *, rounds: int) -> dict:
    stack = Stack(name="sqlite-daphne", database="sqlite", server="daphne", processes=1)
    out: dict = {"stack": stack.label, "rounds": rounds}
    try:
        stack.start(model)
        base = stack.base(0)
        seeded = stack.seed(op="users", count=40, conversations=-(-6 * (rounds + 1) // 40))
        plain, unbudgeted = Pool(seeded), _conversations(seeded)
        seeded = stack.seed(op="users", count=rounds + 1, conversations=1)
        delegates = stack.seed(op="delegates", conversations=_conversations(seeded))
        delegating = Pool(seeded)
        seeded = stack.seed(op="users", count=rounds + 1, conversations=1)
        stack.seed(op="budget", conversations=_conversations(seeded), tokens=HUGE_BUDGET)
        budgeted = Pool(seeded)
        with_budget = _conversations(seeded)

        def on(pool: Pool, run, **kwargs):
            async def one():
                [(session, conversation)] = pool.take(1)
                return await run(base, session, conversation, **kwargs)

            return one

        turns = await _turns(
            rounds,
            {
                "queued": on(plain, cost_runs.queued),
                "direct": on(plain, cost_runs.direct),
                "steered": on(plain, cost_runs.steered, steer=True),
                "unsteered": on(plain, cost_runs.steered, steer=False),
                "delegated": on(delegating, cost_runs.answered, delegate=delegates["child"]),
                "answered": on(plain, cost_runs.answered, delegate=None),
                "budgeted": on(budgeted, cost_runs.many_calls, calls=CALLS),
                "unbudgeted": on(plain, cost_runs.many_calls, calls=CALLS),
            },
        )
        checks = _time_checks(stack, with_budget, unbudgeted, calls=CHECKS)
    except Exception as exc:
        traceback.print_exc()
        out["error"] = f"{type(exc).__name__}: {exc}"
        return out
    finally:
        stack.stop()
    t = turns
    queued = {k: summary(_of(t["queued"], k)) for k in ("user_message", "model", "first_text")}
    direct = {k: summary(_of(t["direct"], k)) for k in ("user_message", "model", "first_text")}
    out["queued"] = {
        "queued_ms": queued,
        "direct_ms": direct,
        "complete_seen_ms": summary(_of(t["queued"], "complete_seen")),
        "problems": _problems(t["queued"], t["direct"]),
    }
    steered, unsteered = summary(_of(t["steered"], "gap")), summary(_of(t["unsteered"], "gap"))
    out["steer"] = {
        "tokens": 50,
        "steer_to_model_ms": summary(_of(t["steered"], "steer_to_model")),
        "gap_steered_ms": steered,
        "gap_ms": unsteered,
        "added_ms": _added(steered, unsteered),
        "problems": _problems(t["steered"], t["unsteered"]),
    }
    sub = {k: summary(_of(t["delegated"], k)) for k in ("first_text", "total")}
    alone = {k: summary(_of(t["answered"], k)) for k in ("first_text", "total")}
    out["subagent"] = {
        "tokens": 20,
        "delegated_ms": sub,
        "direct_ms": alone,
        "added_ms": {k: _added(sub[k], alone[k]) for k in sub},
        "problems": _problems(t["delegated"], t["answered"]),
    }
    with_budget = summary([g for r in t["budgeted"] if not r["problem"] for g in r["gaps"]])
    without = summary([g for r in t["unbudgeted"] if not r["problem"] for g in r["gaps"]])
    out["budget"] = {
        "calls": CALLS,
        "how": "runs through the fake model",
        "gap_budget_ms": with_budget,
        "gap_ms": without,
        "added_ms": _added(with_budget, without),
        "check_ms": checks,
        "problems": _problems(t["budgeted"], t["unbudgeted"]),
    }
    return out


def _time_checks(stack: Stack, with_budget: list[str], without: list[str], *, calls: int) -> dict:
    """The check itself, timed in a Django process on the stack's database (bench/budget_timing.py)."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.budget_timing"],
        cwd=ROOT,
        env=stack.env,
        input=json.dumps({"with": with_budget, "without": without, "calls": calls}),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


async def _watch_schedule(base: str, http: httpx2.AsyncClient, token: str, session: str, conversation: str, due: float):
    """A socket on the conversation, then an `at` schedule on it due at `due`: the run's figures."""
    ws, _, _ = await clients.connect(base, conversation, session, timeout=cost_runs.TIMEOUT)
    frames: list = []
    try:
        at = datetime.fromtimestamp(due, UTC).isoformat(timespec="milliseconds")
        body = {"prompt": clients.order(2, 0), "at": at, "conversation": conversation, "name": "bench"}
        r = await http.post(f"{base}/api/schedules/", json=body, headers={"Authorization": f"Bearer {token}"})
        if r.status_code != 201:
            return {"problem": f"HTTP {r.status_code} creating a schedule: {r.text[:200]}"}
        problem = await cost_runs.read_until(ws, frames)
    finally:
        await ws.close()
    echo = next((f for _, f in frames if f.get("type") == "user_message"), None)
    start = cost_runs.answer_start(frames)
    if not problem and (echo is None or start is None or not echo.get("scheduleId")):
        problem = "the run did not start with its scheduleId"
    if problem:
        return {"problem": problem}
    return {"user_message": cost_runs.ts_of(echo) - due, "model": start[1] - due, "problem": ""}


async def measure_schedules(model: FakeModel, *, schedules: int) -> dict:
    stack = Stack(name="pg-redis-2daphne", database="postgres", server="daphne", processes=2)
    tick = float(stack.extra_env.get("AGENT_SCHEDULE_POLL_SECONDS", POLL_SECONDS))
    out: dict = {"stack": stack.label, "processes": 2, "tick_s": tick, "schedules": schedules}
    try:
        stack.start(model)
        pool = Pool(stack.seed(op="users", count=schedules, conversations=1))
        pairs = pool.take(schedules)
        async with httpx2.AsyncClient(timeout=60) as http:
            tokens = Tokens(stack.base(0))
            credentials = [await tokens.of(http, session) for session, _ in pairs]
            # Due times spread evenly over two ticks, from a few seconds ahead (time to create them).
            first = time.time() + 3 + schedules * 0.1
            step = 2 * tick / schedules
            results = await asyncio.gather(
                *(
                    _watch_schedule(stack.base(i), http, token, session, conversation, first + i * step)
                    for i, (token, (session, conversation)) in enumerate(zip(credentials, pairs))
                ),
                return_exceptions=True,
            )
    except Exception as exc:
        traceback.print_exc()
        out["error"] = f"{type(exc).__name__}: {exc}"
        return out
    finally:
        stack.stop()
    runs = [r if isinstance(r, dict) else {"problem": repr(r)} for r in results]
    out["delay_ms"] = summary(_of(runs, "user_message"))
    out["delay_ms"]["max"] = round(max(_of(runs, "user_message"), default=0) * 1000, 1)
    out["model_ms"] = summary(_of(runs, "model"))
    out["fired"] = len(_of(runs, "model"))
    out["problems"] = _problems(runs)
    return out


async def measure(model: FakeModel, *, quick: bool = False, rounds: int | None = None) -> dict:
    rounds = rounds or (2 if quick else ROUNDS)
    print(f"\n[costs] SQLite + in-memory, 1 daphne: {rounds} rounds, each feature and its baseline in turn", flush=True)
    out = await measure_sqlite(model, rounds=rounds)
    count = 4 if quick else SCHEDULES
    print(f"[costs] PostgreSQL + Redis, 2 daphnes: {count} schedules over two poll ticks", flush=True)
    out["schedule"] = await measure_schedules(model, schedules=count)
    return out


def _ms(figure: dict) -> str:
    return "-" if figure["p50"] is None else f"{figure['p50']:g} / {figure['p95']:g} ms (n={figure['n']})"


def lines(costs: dict) -> list[str]:
    """What the benchmark prints: each cost beside what it is against (p50 / p95)."""
    out = [f"\ncosts of this round's features, p50 / p95 ({costs.get('stack')}, {costs.get('rounds')} rounds)"]
    if "error" in costs:
        out.append(f"  error: {costs['error']}")
    if q := costs.get("queued"):
        for key, what in (("user_message", "user_message"), ("model", "model request"), ("first_text", "first text")):
            out.append(
                f"  queued message, run's complete -> {what}: {_ms(q['queued_ms'][key])}; "
                f"direct message, send -> {what}: {_ms(q['direct_ms'][key])}"
            )
        out.append(
            f"  (the running run's complete itself reached the client {_ms(q['complete_seen_ms'])} after its ts)"
        )
    if s := costs.get("steer"):
        out.append(
            f"  steer -> the model request holding it: {_ms(s['steer_to_model_ms'])} (sent at the first text "
            f"of a {s['tokens']}-token stream at 100/s)"
        )
        out.append(
            f"  model call -> next model request, steered: {_ms(s['gap_steered_ms'])}; without a steer: "
            f"{_ms(s['gap_ms'])}; added p50 {s['added_ms']} ms"
        )
    if a := costs.get("subagent"):
        for key, what in (("first_text", "first text"), ("total", "complete")):
            out.append(
                f"  {a['tokens']}-token answer by a sub-agent, send -> {what}: {_ms(a['delegated_ms'][key])}; "
                f"by the agent itself: {_ms(a['direct_ms'][key])}; added p50 {a['added_ms'][key]} ms"
            )
    if b := costs.get("budget"):
        out.append(
            f"  model call -> next model request, with a budget: {_ms(b['gap_budget_ms'])}; without: "
            f"{_ms(b['gap_ms'])}; the budget check adds p50 {b['added_ms']} ms per model call ({b['how']})"
        )
        if check := b.get("check_ms"):
            out.append(
                f"  the check itself, in-process ({check['budget_ms']['n']} each): with a budget "
                f"{check['budget_ms']['p50']:g} / {check['budget_ms']['p95']:g} ms, without "
                f"{check['none_ms']['p50']:g} / {check['none_ms']['p95']:g} ms; database queries "
                f"{check['budget_queries']} and {check['none_queries']}"
            )
    if sc := costs.get("schedule"):
        if "error" in sc:
            out.append(f"  schedule: error: {sc['error']}")
        else:
            out.append(
                f"  schedule due -> its run's user_message ({sc['stack']}): {_ms(sc['delay_ms'])}, max "
                f"{sc['delay_ms']['max']:g} ms, {sc['fired']} of {sc['schedules']} fired; -> model request "
                f"{_ms(sc['model_ms'])}; against the tick: {sc['tick_s']:g} s per process"
            )
    for part in ("queued", "steer", "subagent", "budget", "schedule"):
        for problem in (costs.get(part) or {}).get("problems", []):
            out.append(f"  {part} problem: {problem}")
    return out


def failed(costs: dict | None) -> bool:
    return costs is not None and ("error" in costs or "error" in costs.get("schedule", {}))
