"""`python -m bench` (`make bench`): run the suite, print the table, write bench/results/latest.json.

python -m bench                 # everything (about 10 minutes on 2 cores)
python -m bench --quick         # smaller numbers, the SQLite stacks only (about a minute)
python -m bench --only relay,replay --stacks sqlite-daphne
python -m bench --only search   # opt-in: search and list on 10,000 conversations / 1,000,000 events
python -m bench --only growth   # opt-in: growth curves (conversation length, table size), docs/bench-growth.png
python -m bench --only compaction   # opt-in: message -> model request at 1,000 turns compacted vs 10 turns
python -m bench --only doors --door-levels 1,10   # first text: the WebSocket vs each HTTP door
python -m bench --only idle --stacks sqlite-daphne --idle-sockets 500   # idle sockets, beside the relay's
python -m bench --only idle10k  # opt-in: 10,000 idle sockets, then a reconnect storm (bench/idle_scale.py)
python -m bench --only model-tls  # a model call's first text over TLS, warm connection vs new ones
python -m bench --only bursts --burst-rounds 6   # a burst's first text, the project and the relay in turn
python -m bench --only peers    # opt-in: the project, the relay and Chainlit (make peers) in turn (bench/peers/)
python -m bench --only costs    # opt-in: queued message, steer, sub-agent, schedule, budget check, each against its baseline

Every results file holds a `run` entry: the command, commit, date and the machine's load
(bench/runinfo.py); `python -m bench.docs` makes docs/performance.md's tables from them.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import traceback
from pathlib import Path

from . import (
    bursts,
    compaction,
    concurrency,
    costs,
    doors,
    firsttext,
    growth,
    idle,
    idle_scale,
    model_tls,
    plot,
    reference,
    relay,
    replay,
    report,
    search,
    writes,
)
from .doc_tables import run_line
from .peers import measure as peers
from .pool import Pool
from .procs import raise_fd_limit
from .runinfo import RunInfo
from .server import FakeModel, Stack

MEASUREMENTS = ("relay", "concurrency", "doors", "idle", "replay", "writes", "reference", "bursts", "model-tls")
# Not in the default run: seeding their volume takes minutes per database (bench/search.py,
# bench/growth.py), and 10,000 sockets with their idle minute and storm over two (bench/idle_scale.py);
# compaction's figures are a question of their own (bench/compaction.py), and so are the costs of
# issue 55's features, on stacks of their own (bench/costs.py, about two minutes); the peers take
# four servers through every level in turn, minutes even in quick mode (bench/peers/measure.py).
OPT_IN = ("search", "growth", "idle10k", "compaction", "costs", "peers")
# Measured on servers of their own (or none), not on the stacks.
STACKLESS = {"reference", "bursts", "model-tls"}
STACKS = {
    "sqlite-daphne": dict(database="sqlite", server="daphne", processes=1),
    "sqlite-uvicorn": dict(database="sqlite", server="uvicorn", processes=1),
    "pg-redis-2daphne": dict(database="postgres", server="daphne", processes=2),
    "pg-redis-2uvicorn": dict(database="postgres", server="uvicorn", processes=2),
}


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small numbers, SQLite stacks only")
    parser.add_argument(
        "--only", default=",".join(MEASUREMENTS), help=f"comma list of {', '.join(MEASUREMENTS + OPT_IN)}"
    )
    parser.add_argument("--stacks", default=None, help=f"comma list of {', '.join(STACKS)}")
    parser.add_argument("--levels", default=None, help="concurrency levels, e.g. 50,100,200,400")
    parser.add_argument("--door-levels", default=None, help="for doors: concurrency levels (default 1,100; quick 1,10)")
    parser.add_argument("--doors", default=",".join(doors.DOORS), help="for doors: which, comma list")
    parser.add_argument("--door-rounds", type=int, default=1, help="for doors: rounds of each door at each level")
    parser.add_argument("--flush-ms", type=int, default=None, help="AGENT_STREAM_FLUSH_MS for the servers")
    parser.add_argument(
        "--growth-parts", default=",".join(growth.PARTS), help="for --only growth: length, table or both"
    )
    parser.add_argument(
        "--idle-sockets",
        type=int,
        default=None,
        help=f"idle sockets: for idle (default {idle.SOCKETS:,}; quick 200) and idle10k (default {idle_scale.SOCKETS:,}; quick 1,000)",
    )
    parser.add_argument(
        "--tls-calls",
        type=int,
        default=None,
        help=f"for model-tls: calls per variant (default {model_tls.CALLS}; quick 20)",
    )
    parser.add_argument(
        "--burst-rounds",
        type=int,
        default=None,
        help=f"for bursts: rounds per level, each a burst of the project and one of the relay (default {bursts.ROUNDS}; quick 2)",
    )
    parser.add_argument(
        "--peer-rounds",
        type=int,
        default=None,
        help=f"for peers: rounds per level, each a burst of every server (default {peers.ROUNDS}; quick 1)",
    )
    parser.add_argument(
        "--out",
        default=None,
        help="JSON path (default bench/results/latest.json; growth.json, idle10k.json and peers.json for those opt-ins)",
    )
    return parser.parse_args()


def door_levels(args) -> list[int]:
    if args.door_levels:
        return [int(x) for x in args.door_levels.split(",")]
    return [1, 10] if args.quick else [1, 100]


def concurrency_levels(args) -> list[int]:
    if args.levels:
        return [int(x) for x in args.levels.split(",")]
    return [50, 100] if args.quick else [50, 100, 200, 400]


def burst_levels(args) -> list[int]:
    """The levels of issue 30's first-text comparison: the concurrency levels up to 200."""
    return [c for c in concurrency_levels(args) if c <= 200] or list(bursts.LEVELS)


def idle_count(args) -> int:
    return args.idle_sockets or (200 if args.quick else idle.SOCKETS)


async def run_stack(name: str, args, model: FakeModel, only: set[str]) -> dict:
    quick = args.quick
    levels = concurrency_levels(args)
    idle_sockets = idle_count(args)
    stack = Stack(name=name, flush_ms=args.flush_ms, **STACKS[name])
    out: dict = {"name": name, "label": stack.label}
    started = time.monotonic()
    print(f"\n[{name}] {stack.label}: starting", flush=True)
    try:
        stack.start(model)
        # doors: a warm-up run and every level, for each door on a conversation of its own
        need = (
            1
            + sum(levels)
            + 4
            + 50
            + idle_sockets
            + firsttext.RUNS
            + 1
            + len(args.doors.split(",")) * (1 + args.door_rounds * sum(door_levels(args)))
        )
        users = 400
        pool = Pool(stack.seed(op="users", count=users, conversations=-(-need // users)))
        # First: a server that has not yet streamed, so freed memory cannot hide what sockets cost.
        if "idle" in only:
            print(f"[{name}] idle {idle_sockets}", flush=True)
            out["idle"] = await asyncio.wait_for(idle.measure(stack, model, pool, sockets=idle_sockets), 300)
        if "relay" in only:
            print(f"[{name}] relay", flush=True)
            out["relay"] = await asyncio.wait_for(
                relay.measure(stack, model, pool, tokens=1000 if quick else relay.TOKENS), 300
            )
        if "reference" in only:  # the same single streams as the relay's, for the ratios
            print(f"[{name}] first text", flush=True)
            out["first_text"] = await asyncio.wait_for(firsttext.measure(stack, pool), 300)
        if "concurrency" in only:
            print(f"[{name}] concurrency {levels}", flush=True)
            out["concurrency"] = await asyncio.wait_for(concurrency.measure(stack, model, pool, levels=levels), 600)
        if "doors" in only:
            print(f"[{name}] doors {door_levels(args)}", flush=True)
            out["doors"] = await asyncio.wait_for(
                doors.measure(
                    stack, pool, levels=door_levels(args), doors=args.doors.split(","), rounds=args.door_rounds
                ),
                600 * args.door_rounds,
            )
        if "writes" in only:
            if out.get("relay"):
                out["writes_fast"] = writes.measure(
                    stack,
                    out["relay"]["conversations"],
                    tokens_expected=out["relay"]["tokens"] * len(out["relay"]["conversations"]),
                )
            if out.get("concurrency"):
                first = out["concurrency"]["levels"][0]
                out["writes_paced"] = writes.measure(
                    stack, first["conversations"], tokens_expected=first["C"] * concurrency.TOKENS
                )
        if "replay" in only:
            print(f"[{name}] replay", flush=True)
            out["replay"] = await asyncio.wait_for(
                replay.measure(stack, model, pool, events=2000 if quick else replay.EVENTS), 300
            )
    except Exception as exc:
        traceback.print_exc()
        out["error"] = f"{type(exc).__name__}: {exc}"
        if stack.servers:
            print(stack.server_log_tail(), file=sys.stderr)
    finally:
        stack.stop()
    if out.get("relay"):
        out["relay"].pop("conversations", None)
    for lv in out.get("concurrency", {}).get("levels", []):
        lv.pop("conversations", None)
    out.get("concurrency", {}).get("solo", {}).pop("conversations", None)
    out["elapsed_s"] = round(time.monotonic() - started, 1)
    return out


async def main() -> int:
    args = parse()
    run = RunInfo().start()
    raise_fd_limit()
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    unknown = only - set(MEASUREMENTS) - set(OPT_IN)
    if unknown:
        sys.exit(f"unknown measurement(s): {', '.join(sorted(unknown))}")
    names = (
        args.stacks.split(",") if args.stacks else (["sqlite-daphne", "sqlite-uvicorn"] if args.quick else list(STACKS))
    )
    started = time.monotonic()
    model = FakeModel()
    results = {"args": vars(args), "stacks": []}
    try:
        for name in names if only - set(OPT_IN) - STACKLESS else []:
            results["stacks"].append(await run_stack(name, args, model, only))
        if "reference" in only:
            results["reference"] = await reference.measure(model, levels=concurrency_levels(args))
        if "idle" in only:  # the bare relay's idle sockets, beside the project's
            results["reference_idle"] = await reference.measure_idle(model, sockets=idle_count(args))
        if "bursts" in only:
            rounds = args.burst_rounds or (2 if args.quick else bursts.ROUNDS)
            print(f"\n[bursts] {burst_levels(args)}, the project and the relay in turn, {rounds} rounds", flush=True)
            results["bursts"] = await bursts.measure(model, levels=burst_levels(args), rounds=rounds)
        if "peers" in only:
            rounds = args.peer_rounds or (1 if args.quick else peers.ROUNDS)
            print(f"\n[peers] {burst_levels(args)}: {', '.join(peers.SIDES)} in turn, {rounds} rounds", flush=True)
            results["peers"] = await peers.measure(
                model, levels=burst_levels(args), rounds=rounds, idle_sockets=idle_count(args)
            )
        if "model-tls" in only:
            print("\n[model-tls] a model call's first text, TLS and plain HTTP", flush=True)
            calls = args.tls_calls or (20 if args.quick else model_tls.CALLS)
            results["model_tls"] = await model_tls.measure(model, calls=calls)
        if "idle10k" in only:
            sockets = args.idle_sockets or (1000 if args.quick else idle_scale.SOCKETS)
            print(f"\n[idle10k] {sockets} idle sockets on one daphne", flush=True)
            results["idle10k"] = await idle_scale.measure(model, sockets=sockets, quick=args.quick)
        if "costs" in only:
            results["costs"] = await costs.measure(model, quick=args.quick)
        if "compaction" in only:
            databases = list(dict.fromkeys(STACKS[name]["database"] for name in names))
            results["compaction"] = [await compaction.measure(model, database=db, quick=args.quick) for db in databases]
        if "growth" in only:
            databases = list(dict.fromkeys(STACKS[name]["database"] for name in names))
            parts = tuple(part for part in growth.PARTS if part in args.growth_parts.split(","))
            results["growth"] = [
                await growth.measure(model, database=db, quick=args.quick, parts=parts) for db in databases
            ]
    finally:
        model.stop()
    if "search" in only:
        size = dict(conversations=1000, events=100_000) if args.quick else {}
        databases = dict.fromkeys(STACKS[name]["database"] for name in names)
        results["search"] = [await asyncio.to_thread(search.run, database=db, **size) for db in databases]
        for result in results["search"]:
            print(search.table(result))
    results["run"] = run.finish()
    if "growth" in only:
        print(growth.table(results["growth"]))
        growth_path = report.write(
            {"growth": results["growth"], "run": results["run"]}, Path(args.out) if args.out else growth.RESULTS
        )
        png = growth.RESULTS.with_name("growth-quick.png") if args.quick else plot.DOCS_PNG
        print(f"\nwritten to {growth_path}; plotted to {plot.growth(results['growth'], png)}")
    if "compaction" in only:
        print("\n".join(compaction.lines(results["compaction"])))
        path = report.write(
            {"compaction": results["compaction"], "run": results["run"]},
            Path(args.out) if args.out else compaction.RESULTS,
        )
        print(f"\nwritten to {path}")
    if "idle10k" in only:
        print("\n".join(idle_scale.lines(results["idle10k"])))
        path = report.write(
            {"idle10k": results["idle10k"], "run": results["run"]}, Path(args.out) if args.out else idle_scale.RESULTS
        )
        print(f"\nwritten to {path}")
    if "costs" in only:
        print("\n".join(costs.lines(results["costs"])))
        print(run_line({"run": results["run"]}))
        path = report.write(
            {"costs": results["costs"], "run": results["run"]}, Path(args.out) if args.out else costs.RESULTS
        )
        print(f"\nwritten to {path}")
    if "peers" in only:
        print("\n".join(peers.lines(results["peers"])))
        path = report.write(
            {"peers": results["peers"], "run": results["run"]}, Path(args.out) if args.out else peers.RESULTS
        )
        print(f"\nwritten to {path}")
    if not results["stacks"] and not only & STACKLESS:  # opt-ins alone: keep the suite's latest.json as it is
        if args.out and "search" in only:
            report.write(results, Path(args.out))
        failed = "error" in results.get("idle10k", {}) or any("error" in r for r in results.get("compaction", []))
        failed = failed or costs.failed(results.get("costs"))
        failed = failed or "error" in results.get("peers", {})
        return 1 if failed else 0
    results["elapsed_s"] = round(time.monotonic() - started, 1)
    print(report.table(results))
    if results["stacks"]:
        print()
        print(report.summary(results))
    if results.get("reference"):
        print()
        print(report.reference_summary(results))
    if results.get("bursts"):
        print()
        print("\n".join(bursts.lines(results["bursts"])))
    if results.get("model_tls"):
        print("\n".join(model_tls.lines(results["model_tls"])))
    path = report.write(results, Path(args.out) if args.out else None)
    print(f"\nwritten to {path}")
    failed = [s for s in results["stacks"] if "error" in s] + [
        results[k] for k in ("bursts", "model_tls", "idle10k") if "error" in results.get(k, {})
    ]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
