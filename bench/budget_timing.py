"""`python -m bench.budget_timing` (bench/costs.py, in a stack's environment): the check before a
model call timed in a Django process of its own on the stack's database, beside the runs that
time it from outside. It is chat.accounts.budgets.budget_stop, what chat/runtime/budget_check.py
runs in a thread before every model call, with or without a budget set: called for runs of
users with a budget and of users with none, the two taking turns.

Reads {"with": [conversation ids], "without": [...], "calls": N} on stdin (runs of those
conversations are the runs checked) and prints {"budget_ms": {...}, "none_ms": {...}}: p50, p95
and mean of the N checks of each side, in ms; and the database queries of one check of each
side ("budget_queries", "none_queries").
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from .clients import percentile
from .seed import setup


def _summary(seconds: list[float]) -> dict:
    ms = [s * 1000 for s in seconds]
    return {
        "p50": round(statistics.median(ms), 3),
        "p95": round(percentile(ms, 95), 3),
        "mean": round(statistics.fmean(ms), 3),
        "n": len(ms),
    }


def main() -> None:
    command = json.loads(sys.stdin.read())
    setup()
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from chat.accounts.budgets import budget_stop
    from chat.models import Run

    sides = {
        name: list(Run.objects.filter(conversation_id__in=command[key]).values_list("pk", "user_id"))
        for name, key in (("budget_ms", "with"), ("none_ms", "without"))
    }
    times: dict[str, list[float]] = {name: [] for name in sides}
    since = timezone.now()
    queries = {}
    for name, runs in sides.items():
        run_id, user_id = runs[0]
        with CaptureQueriesContext(connection) as captured:
            budget_stop(run_id=run_id, user_id=user_id, agent_id=None, own=("fake-model", 10, 2, 12), since=since)
        queries[name.replace("_ms", "_queries")] = len(captured.captured_queries)
    for index in range(command["calls"]):
        for name, runs in sides.items():
            run_id, user_id = runs[index % len(runs)]
            started = time.perf_counter()
            budget_stop(run_id=run_id, user_id=user_id, agent_id=None, own=("fake-model", 10, 2, 12), since=since)
            times[name].append(time.perf_counter() - started)
    print(json.dumps({name: _summary(seconds) for name, seconds in times.items()} | queries))


if __name__ == "__main__":
    main()
