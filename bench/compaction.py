"""Compaction's cost (`python -m bench --only compaction`, issue 50): message -> model request on a
conversation of 1,000 turns with compaction on, against one of 10 turns (the target: within
1.2x), and what a compaction itself costs.

Per database, one daphne against the bench's fake model, with the server's compaction settings
as shipped (AGENT_CONTEXT_TOKENS 32,000, compaction past 0.8 of it or past 80 messages, the
newest 4 turns kept). Conversations are seeded as bench/growth.py seeds them (7 events a turn,
a tool call in each, memory checkpoints filled): of 10 turns (40 messages: not compacted) and of
1,000 turns (4,000 messages).

- **the compacting message**: PAIRS conversations of each length are seeded; the first message
  on each 1,000 turns compacts: its older turns (as far as the run start reads back,
  chat.eventlog.memory's bound) are summarized by one model call (purpose `compaction`) before
  the agent's call. Its message -> model request (to the agent's call, the one the user waits
  for) against the first message on 10 turns is what the compaction adds, once; the compaction
  calls' own figures (duration, messages sent) come from their ModelCall rows, the turns
  summarized and the memory before and after (estimated tokens) from the `compaction` events.
- **after it**: the second message on every conversation, the two lengths taken in turn so that
  the load of a shared machine falls on both alike, each conversation measured once (a message
  adds a turn: repeating on one conversation would measure a longer one each time, and compact
  the short ones too): message -> model request, p50 / p95, and the ratio of the p50s (1,000
  turns over 10). The fake model answers at once, so these are the server's own times (the
  memory read from the log, the request built and sent), no provider's. The memory's derivation
  is also timed on its own in a Django process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from . import firsttext, growth
from .server import ROOT, FakeModel, Stack

RESULTS = Path(__file__).resolve().parent / "results" / "compaction.json"
SHORT, LONG = 10, 1_000
PAIRS = 30  # conversations of each length: each measured on a message of its own
TARGET = 1.2  # issue 50: the long conversation's message -> model request within 1.2x of the short one's


async def _run_start(stack: Stack, session: str, conversation: str, after: int) -> float:
    """Message -> model request (s) on a socket connected with `?after=` the seeded log's end, as
    a client that has the conversation on screen: no replay of 7,000 events before the message
    (growth.py's run starts replay it all, whose work is still settling on a loaded machine)."""
    result = await firsttext.one(stack.base(0), session, conversation, tokens=2, rate=0, after=after)
    if result["problem"] or result["model_s"] is None:
        raise RuntimeError(f"run start: {result['problem'] or 'no first token'}")
    return result["model_s"]


def _worker(stack: Stack, command: dict) -> dict:
    """One op of this module's worker in a Django process on the stack's database."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.compaction", "--worker"],
        cwd=ROOT,
        env=stack.env,
        input=json.dumps(command),
        stdout=subprocess.PIPE,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench.compaction worker {command['op']} failed with {done.returncode}")
    return json.loads(done.stdout.strip().splitlines()[-1])


async def measure(model: FakeModel, *, database: str, quick: bool = False) -> dict:
    pairs = 5 if quick else PAIRS
    stack = Stack(name=f"compaction-{database}", database=database, server="daphne", processes=1)
    out: dict = {"database": database, "label": stack.label, "turns": [SHORT, LONG], "pairs": pairs}
    print(f"\n[compaction] {stack.label}: {pairs} conversations of {SHORT} and of {LONG:,} turns", flush=True)
    try:
        stack.start(model)
        warm, *seeded = _worker(stack, {"op": "seed", "pairs": pairs + 1})
        for key in ("short", "long"):  # a pair of its own warms up the server: its model client, its code paths
            await _run_start(stack, *warm[key])
        first: dict[int, list[float]] = {SHORT: [], LONG: []}
        second: dict[int, list[float]] = {SHORT: [], LONG: []}
        for messages in (first, second):  # the conversations in turn, each message on every pair
            for pair in seeded:
                messages[SHORT].append(await _run_start(stack, *pair["short"]))
                messages[LONG].append(await _run_start(stack, *pair["long"]))
        found = _worker(stack, {"op": "compactions", "conversations": [pair["long"][1] for pair in seeded]})
        if len(found["events"]) != pairs:
            raise RuntimeError(f"{len(found['events'])} compactions on {pairs} long conversations, one each expected")
        out["run_start_ms"] = {str(turns): growth._ms(values) for turns, values in second.items()}
        out["first_message_ms"] = {str(turns): growth._ms(values) for turns, values in first.items()}
        out["compaction"] = found
        # The run start's own read of the memory, timed in a Django process.
        out["memory_ms"] = {
            str(turns): growth._worker(stack, {"op": "derive", "conversation": seeded[0][key][1], "repeats": 10})
            for turns, key in ((SHORT, "short"), (LONG, "long"))
        }
        out["ratio"] = round(out["run_start_ms"][str(LONG)]["p50"] / out["run_start_ms"][str(SHORT)]["p50"], 2)
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
        print(stack.server_log_tail(), file=sys.stderr)
    finally:
        stack.stop()
    return out


def lines(results: list[dict]) -> list[str]:
    out = []
    for result in results:
        out.append(f"\n== compaction, {result['label']} ==")
        if "error" in result:
            out.append(f"  FAILED: {result['error']}")
            continue
        pairs, second, first = result["pairs"], result["run_start_ms"], result["first_message_ms"]
        verdict = "within" if result["ratio"] <= TARGET else "OVER"
        out.append(f"  message -> model request, p50 / p95 ms, one message on each of {pairs} conversations:")
        for turns, label in ((SHORT, ""), (LONG, ", compacted")):
            memory = result["memory_ms"][str(turns)]
            out.append(
                f"    {turns:>6,} turns{label:12} {second[str(turns)]['p50']:>8.1f} / {second[str(turns)]['p95']:>7.1f}"
                f"   (memory derivation {memory['memory_ms']['p50']:.1f} ms, {memory['messages']} messages)"
            )
        out.append(f"    ratio {result['ratio']:.2f}x ({verdict} the {TARGET}x target)")
        calls, events = result["compaction"]["calls"], result["compaction"]["events"]
        out.append(
            f"  the compacting message (the first on 1,000 turns): {first[str(LONG)]['p50']:.1f} /"
            f" {first[str(LONG)]['p95']:.1f} ms, against {first[str(SHORT)]['p50']:.1f} /"
            f" {first[str(SHORT)]['p95']:.1f} ms for the first on 10 turns"
        )
        durations = sorted(call["duration_ms"] for call in calls)
        out.append(
            f"  the compaction calls ({len(calls)}): p50 {durations[len(durations) // 2]} ms against the fake model"
            f" (a real model's time to write the summary comes on top), {calls[0]['messages']} messages sent;"
            f" {events[0]['turns']} turns summarized, memory {events[0]['tokensBefore']:,} ->"
            f" {events[0]['tokensAfter']:,} tokens (estimated)"
        )
    return out


# -- the worker: a Django process on the stack's database --------------------------------------


def seed(pairs: int) -> list[dict]:
    """`pairs` users, each with a conversation of SHORT and one of LONG turns (bench/growth.py's
    seeding): [{"short": (session, conversation, last seq), "long": (...)}, ...]."""
    out = []
    for _ in range(pairs):
        seeded = growth.seed_long([SHORT, LONG])
        session, conversations = seeded["session"], seeded["conversations"]
        out.append(
            {
                key: (session, conversations[str(turns)], seeded["last_seq"][str(turns)])
                for key, turns in (("short", SHORT), ("long", LONG))
            }
        )
    return out


def compactions(conversations: list[str]) -> dict:
    """The conversations' compaction events and compaction calls."""
    from chat.models import Event, ModelCall

    events = [
        {key: payload[key] for key in ("turns", "tokensBefore", "tokensAfter", "trigger")}
        for payload in Event.objects.filter(conversation_id__in=conversations, type="compaction")
        .order_by("seq")
        .values_list("payload", flat=True)
    ]
    calls = [
        {"duration_ms": duration, "messages": messages}
        for duration, messages in ModelCall.objects.filter(
            run__conversation_id__in=conversations, purpose="compaction"
        ).values_list("duration_ms", "message_count")
    ]
    return {"events": events, "calls": calls}


def worker() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    import django

    django.setup()
    command = json.loads(sys.stdin.read())
    op = command.pop("op")
    print(json.dumps({"seed": seed, "compactions": compactions}[op](**command)))


def main() -> None:
    if sys.argv[1:] == ["--worker"]:
        worker()
        return
    sys.exit("run it as `python -m bench --only compaction` (it needs the suite's fake model and servers)")


if __name__ == "__main__":
    main()
