"""Run start against conversation length (issue 17 part 2): `python -m bench.runstart`.

Seeds, straight into a fresh database (bulk inserts, no model), one conversation per length
(10, 100, 1,000, 10,000 turns by default) whose every turn has the shape of a tool-using
answer: the user message, thinking, two parallel tool calls and their results, the answer in
three deltas, `complete`. Then a real daphne serves it against the bench's fake model, and a
client on each conversation (connected with `?after=<its last seq>`, so no replay) sends a
message and reads the run to its end. Measured: from sending the message to the fake model
writing its first token, which it does as soon as the request arrived (the token carries the
time it was written; same machine, same clock) - the run start, memory included.

The first message of each conversation is reported apart ("first"): on a database seeded
without memory checkpoints (a deployment upgraded from before them) it is the one that
builds them. Then SAMPLES messages per length, the lengths taken in turn so that the load
of a shared machine falls on all of them alike; p50 and p95 in ms, and p50 relative to the
shortest conversation.

    python -m bench.runstart                                # SQLite, this checkout
    python -m bench.runstart --root /work/main              # the same, another checkout's server
    python -m bench.runstart --database postgres --turns 10,1000,10000 --samples 30
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.seed import session_for

ROOT = Path(__file__).resolve().parent.parent
TURNS = (10, 100, 1_000, 10_000)
SAMPLES = 20
EVENTS_PER_TURN = 10
ORDER = "bench tokens=1 rate=0"


# -- seeding (runs in a subprocess inside the measured checkout's Django) ----------------------
def _turn_payloads(turn: int, parent: int | None) -> list[dict]:
    a, b = f"call_{turn}_a", f"call_{turn}_b"
    return [
        {"type": "user_message", "content": f"question {turn}: what is {turn} * 7, and the time?", "parentSeq": parent},
        {"type": "thinking", "content": "Two tools at once."},
        {"type": "tool_start", "toolName": "calculator", "toolCallId": a, "arguments": json.dumps({"expression": f"{turn} * 7"})},
        {"type": "tool_start", "toolName": "current_time", "toolCallId": b, "arguments": "{}"},
        {"type": "tool_end", "toolName": "calculator", "toolCallId": a, "result": str(turn * 7), "isError": False, "durationMs": 1},
        {"type": "tool_end", "toolName": "current_time", "toolCallId": b, "result": "2026-01-01T00:00:00Z", "isError": False, "durationMs": 1},
        {"type": "text", "content": f"{turn} * 7 is "},
        {"type": "text", "content": f"{turn * 7}, and it is "},
        {"type": "text", "content": "midnight."},
        {"type": "complete", "status": "succeeded", "durationMs": 5, "usage": {"promptTokens": 0, "completionTokens": 0, "totalTokens": 0}},
    ]  # fmt: skip


def seed(turns: list[int]) -> dict:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import transaction
    from django.utils import timezone

    from chat.models import Conversation, Event, Run

    user = get_user_model().objects.create_user(username=f"runstart-{uuid.uuid4().hex[:8]}", password=None)
    session_key = session_for(user)
    now = timezone.now()
    conversations = {}
    for count in turns:
        conversation = Conversation.objects.create(owner=user, title=f"{count} turns", last_seq=count * EVENTS_PER_TURN)
        chunk = 500
        for first in range(0, count, chunk):
            with transaction.atomic():
                runs = [
                    Run(conversation=conversation, user=user, model="fake-model", status="succeeded", finished_at=now)
                    for _ in range(first, min(count, first + chunk))
                ]
                Run.objects.bulk_create(runs)
                events = []
                for offset, run in enumerate(runs):
                    turn = first + offset
                    seq = turn * EVENTS_PER_TURN + 1
                    parent = seq - EVENTS_PER_TURN if turn else None
                    for index, payload in enumerate(_turn_payloads(turn, parent)):
                        events.append(
                            Event(
                                conversation=conversation,
                                run=run,
                                seq=seq + index,
                                type=payload["type"],
                                payload=payload,
                                created_at=now,
                            )
                        )
                Event.objects.bulk_create(events, batch_size=2000)
        conversations[str(count)] = {"id": str(conversation.pk), "last_seq": count * EVENTS_PER_TURN}
    return {"session": session_key, "conversations": conversations}


# -- the measurement ---------------------------------------------------------------------------
async def _one(ws, *, timeout: float = 60.0) -> float:
    """Send the order, read the run to its end; ms from sending to the model's first token."""
    sent = time.time()
    await ws.send(json.dumps({"type": "message", "content": ORDER}))
    stamp = None
    async with asyncio.timeout(timeout):
        while True:
            frame = json.loads(await ws.recv())
            if frame.get("type") == "text" and stamp is None:
                stamp = float(frame["content"].split()[0].split("@", 1)[1])
            if frame.get("type") == "error" and "seq" not in frame:
                raise RuntimeError(f"refused: {frame}")
            if frame.get("type") == "complete":
                if stamp is None:
                    raise RuntimeError(f"a run without text: {frame}")
                return (stamp - sent) * 1000


async def measure(base: str, seeded: dict, *, samples: int) -> dict:
    from .clients import close_all, connect, percentile

    sockets = {}
    for count, conversation in seeded["conversations"].items():
        ws, _, _ = await connect(base, conversation["id"], seeded["session"], after=conversation["last_seq"])
        sockets[count] = ws
    try:
        first = {count: await _one(ws) for count, ws in sockets.items()}
        times: dict[str, list[float]] = {count: [] for count in sockets}
        for _ in range(samples):
            for count, ws in sockets.items():
                await asyncio.sleep(0.05)  # the run before has finished writing
                times[count].append(await _one(ws))
    finally:
        await close_all(sockets.values())
    out = {}
    for count, values in times.items():
        out[count] = {
            "first_ms": round(first[count], 1),
            "p50_ms": round(statistics.median(values), 1),
            "p95_ms": round(percentile(values, 95), 1),
        }
    return out


def run(*, root: Path, database: str, turns: list[int], samples: int) -> dict:
    from .server import PG_ADMIN_URL, FakeModel, _pg_admin, free_port, wait_http

    model = FakeModel()
    tmp = tempfile.mkdtemp(prefix="agentsite-runstart-")
    pg_name = ""
    server = None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_", "DATABASE_", "REDIS_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="agentsite.settings",
        PYTHONPATH=str(root),
        AGENT_MODEL="fake-model",
        OPENAI_API_KEY="x",
        OPENAI_BASE_URL=model.base_url,
        ALLOWED_HOSTS="127.0.0.1,localhost",
        AGENT_MESSAGES_PER_MINUTE="0",
        AGENT_MAX_RETRIES="0",
        AGENT_WORKSPACE_ROOT=os.path.join(tmp, "workspaces"),
        LOG_LEVEL="WARNING",
        SECRET_KEY="bench-" + uuid.uuid4().hex,
    )
    try:
        if database == "postgres":
            pg_name = f"agentsite_runstart_{uuid.uuid4().hex[:8]}"
            _pg_admin(f'CREATE DATABASE "{pg_name}"')
            env["DATABASE_URL"] = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + pg_name
        else:
            env["DATABASE_URL"] = f"sqlite:///{os.path.join(tmp, 'db.sqlite3')}"
        manage = [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0", "--skip-checks"]
        subprocess.run(manage, cwd=root, env=env, check=True)
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--seed"],
            cwd=root,
            env=env,
            input=json.dumps(turns),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            raise RuntimeError(f"seeding failed:\n{done.stderr[-3000:]}")
        seeded = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"seeded {turns} turns in {time.monotonic() - started:.1f} s", flush=True)
        port = free_port()
        log = open(os.path.join(tmp, "server.log"), "w")
        daphne = [sys.executable, "-m", "serving.serve", "-b", "127.0.0.1", "-p", str(port), "-v", "0"]
        server = subprocess.Popen(
            [*daphne, "agentsite.asgi:application"], cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        base = f"http://127.0.0.1:{port}"
        wait_http(base + "/healthz", process=server)
        return asyncio.run(measure(base, seeded, samples=samples))
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
        model.stop()
        if pg_name:
            _pg_admin(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')
        shutil.rmtree(tmp, ignore_errors=True)


def table(result: dict) -> str:
    shortest = result[min(result, key=int)]["p50_ms"]
    lines = ["turns    first ms   p50 ms   p95 ms   p50 / shortest"]
    for count in sorted(result, key=int):
        row = result[count]
        ratio = row["p50_ms"] / shortest if shortest else float("nan")
        lines.append(
            f"{int(count):>6}  {row['first_ms']:>8.1f}  {row['p50_ms']:>7.1f}  {row['p95_ms']:>7.1f}   {ratio:>6.2f}x"
        )
    return "\n".join(lines)


def main() -> None:
    if sys.argv[1:] == ["--seed"]:
        print(json.dumps(seed(json.loads(sys.stdin.read()))))
        return
    parser = argparse.ArgumentParser(
        prog="python -m bench.runstart", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", default=str(ROOT), help="the checkout whose server is measured")
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--turns", default=",".join(map(str, TURNS)), help="comma list of conversation lengths")
    parser.add_argument("--samples", type=int, default=SAMPLES, help="messages per length, after the first")
    parser.add_argument("--out", default=None, help="also write the result as JSON here")
    args = parser.parse_args()
    turns = [int(x) for x in args.turns.split(",")]
    result = run(root=Path(args.root), database=args.database, turns=turns, samples=args.samples)
    print(f"{args.database}, server from {args.root}")
    print(table(result))
    if args.out:
        Path(args.out).write_text(
            json.dumps({"database": args.database, "root": args.root, "result": result}, indent=1)
        )


if __name__ == "__main__":
    main()
