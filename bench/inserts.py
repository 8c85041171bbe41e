"""The rows of a burst of run starts, inserted two ways: `python -m bench.inserts`.

What a group of COUNT run starts inserts (a Run and its user_message Event each, in one
transaction) with Django's bulk_create, and with chat/eventlog/inserts.py (what the run start
and the group writer use): the median and the fastest of REPEATS groups, in ms, the
instances built outside the timing as the run start builds them before it inserts; and the
CPU time of the inserting thread (what it takes from the event loop's GIL), p50. In this
process, on a fresh database (SQLite in a temporary directory, or a new PostgreSQL database
on BENCH_PG_URL's server, dropped afterwards).

    python -m bench.inserts
    python -m bench.inserts --database postgres --count 200
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid

from .server import PG_ADMIN_URL, _pg_admin

REPEATS = 15


def _measure(count: int, repeats: int) -> dict[str, dict[str, float]]:
    # Django is configured by main() for the database chosen, before these imports may run.
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import transaction
    from django.utils import timezone

    from chat.eventlog.append import EVENT_COLUMNS
    from chat.eventlog.inserts import insert_objects, insert_rows
    from chat.models import Conversation, Event, Run

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user(username=f"inserts-{uuid.uuid4().hex[:8]}", password=None)
    conversations = iter(Conversation.objects.bulk_create(Conversation(owner=user) for _ in range(2 * count * repeats)))

    def group() -> tuple[list[Run], list[tuple]]:
        now = timezone.now()
        runs = [
            Run(conversation_id=next(conversations).pk, user=user, model="fake-model", worker="w", started_at=now)
            for _ in range(count)
        ]
        payload = {"type": "user_message", "content": "what is 6 * 7?", "parentSeq": None}
        return runs, [(run.conversation_id, run.pk, 1, "user_message", {**payload}, now) for run in runs]

    def with_bulk_create(runs: list[Run], events: list[tuple]) -> None:
        Run.objects.bulk_create(runs)
        Event.objects.bulk_create(Event(**dict(zip(EVENT_COLUMNS, row))) for row in events)

    def with_inserts(runs: list[Run], events: list[tuple]) -> None:
        insert_objects(runs)
        insert_rows(Event, EVENT_COLUMNS, events)

    times: dict[str, list[float]] = {"bulk_create": [], "inserts": []}
    cpu: dict[str, list[float]] = {"bulk_create": [], "inserts": []}
    for _ in range(repeats):  # interleaved, so that the machine's load falls on both alike
        for name, way in (("bulk_create", with_bulk_create), ("inserts", with_inserts)):
            runs, events = group()
            with transaction.atomic():
                started, used = time.perf_counter(), time.thread_time()
                way(runs, events)
                times[name].append((time.perf_counter() - started) * 1000)
                cpu[name].append((time.thread_time() - used) * 1000)
    return {
        name: {
            "p50_ms": round(statistics.median(v), 2),
            "min_ms": round(min(v), 2),
            "cpu_p50_ms": round(statistics.median(cpu[name]), 2),
        }
        for name, v in times.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.inserts", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=100, help="run starts in the group")
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    args = parser.parse_args()
    os.environ.update(DJANGO_SETTINGS_MODULE="agentsite.settings", LOG_LEVEL="WARNING")
    os.environ.setdefault("SECRET_KEY", "bench-" + uuid.uuid4().hex)
    name = ""
    if args.database == "postgres":
        name = f"agentsite_inserts_{uuid.uuid4().hex[:8]}"
        _pg_admin(f'CREATE DATABASE "{name}"')
        os.environ["DATABASE_URL"] = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    else:
        os.environ["DATABASE_URL"] = (
            f"sqlite:///{os.path.join(tempfile.mkdtemp(prefix='agentsite-inserts-'), 'db.sqlite3')}"
        )
    try:
        result = _measure(args.count, args.repeats)
    finally:
        if name:
            from django.db import connections

            connections.close_all()
            _pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(f"{args.count} run starts' Run + user_message rows, {args.database}, {args.repeats} groups each way:")
    for way, figures in result.items():
        print(
            f"  {way:12} p50 {figures['p50_ms']:6.2f} ms   fastest {figures['min_ms']:6.2f} ms"
            f"   this thread's CPU p50 {figures['cpu_p50_ms']:6.2f} ms"
        )


if __name__ == "__main__":
    main()
