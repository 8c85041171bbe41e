"""`python -m bench` (`make bench`): run the suite, print the table, write bench/results/latest.json.

python -m bench                 # everything (about 5-8 minutes on 2 cores)
python -m bench --quick         # smaller numbers, the SQLite stacks only (about a minute)
python -m bench --only relay,replay --stacks sqlite-daphne
python -m bench --only search   # opt-in: search and list on 10,000 conversations / 1,000,000 events
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import traceback
from pathlib import Path

from . import concurrency, idle, relay, replay, report, search, writes
from .pool import Pool
from .procs import raise_fd_limit
from .server import FakeModel, Stack

MEASUREMENTS = ("relay", "concurrency", "idle", "replay", "writes")
# Not in the default run: seeding its volume takes minutes per database (bench/search.py).
OPT_IN = ("search",)
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
    parser.add_argument("--flush-ms", type=int, default=None, help="AGENT_STREAM_FLUSH_MS for the servers")
    parser.add_argument("--out", default=None, help="JSON path (default bench/results/latest.json)")
    return parser.parse_args()


async def run_stack(name: str, args, model: FakeModel, only: set[str]) -> dict:
    quick = args.quick
    levels = [int(x) for x in args.levels.split(",")] if args.levels else ([50, 100] if quick else [50, 100, 200, 400])
    idle_sockets = 200 if quick else idle.SOCKETS
    stack = Stack(name=name, flush_ms=args.flush_ms, **STACKS[name])
    out: dict = {"name": name, "label": stack.label}
    started = time.monotonic()
    print(f"\n[{name}] {stack.label}: starting", flush=True)
    try:
        stack.start(model)
        need = 1 + sum(levels) + 4 + 50 + idle_sockets
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
        if "concurrency" in only:
            print(f"[{name}] concurrency {levels}", flush=True)
            out["concurrency"] = await asyncio.wait_for(concurrency.measure(stack, model, pool, levels=levels), 600)
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
        for name in names if only - set(OPT_IN) else []:
            results["stacks"].append(await run_stack(name, args, model, only))
    finally:
        model.stop()
    if "search" in only:
        size = dict(conversations=1000, events=100_000) if args.quick else {}
        databases = dict.fromkeys(STACKS[name]["database"] for name in names)
        results["search"] = [await asyncio.to_thread(search.run, database=db, **size) for db in databases]
        for result in results["search"]:
            print(search.table(result))
        if not results["stacks"]:  # search alone: keep the suite's latest.json as it is
            if args.out:
                report.write(results, Path(args.out))
            return 0
    results["elapsed_s"] = round(time.monotonic() - started, 1)
    print(report.table(results))
    print()
    print(report.summary(results))
    path = report.write(results, Path(args.out) if args.out else None)
    print(f"\nwritten to {path}")
    return 1 if any("error" in s for s in results["stacks"]) else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
