"""Search and list latency on a large database (`python -m bench --only search`).

Seeds a fresh database (a temp SQLite file, or a new PostgreSQL database next to
BENCH_PG_URL) with CONVERSATIONS conversations holding EVENTS events in all (finished runs:
user_message, text deltas, complete; their search documents written by the same service as
a live run's), then times the real views through Django's test client, in-process: the
first page of the list, a deeper page (a `before` cursor) and `?q=` searches of a rare
word, a common word, two words and a word prefix, each for a random one of the users.
Prints p50/p95 in ms, and on PostgreSQL whether the search plan uses the GIN index.

    python -m bench --only search                    # 10,000 conversations / 1,000,000 events
    python -m bench.search --conversations 500 --events 50000 --database sqlite
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONVERSATIONS = 10_000
EVENTS = 1_000_000
USERS = 100
RUNS_PER_CONVERSATION = 5
REQUESTS = 200
# A Zipf-like vocabulary: a few words are everywhere, most are rare.
WORDS = [f"w{i:04d}" for i in range(5000)]
QUERIES = {"rare": "w0400", "common": "w0001", "two words": "w0002 w0010", "prefix": "w012"}


def _word(rng: random.Random) -> str:
    return WORDS[min(int(rng.paretovariate(1.1)) - 1, len(WORDS) - 1)]


def seed(*, conversations: int, events: int, users: int) -> list:
    owners = seed_users(users)
    seed_conversations(owners, conversations=conversations, events=events)
    return owners


def seed_users(users: int) -> list:
    from django.contrib.auth import get_user_model

    User = get_user_model()
    owners = User.objects.bulk_create(User(username=f"search-{i}", password="!") for i in range(users))
    if owners[0].pk is None:
        owners = list(User.objects.filter(username__startswith="search-").order_by("id"))
    return owners


def seed_conversations(owners: list, *, conversations: int, events: int, offset: int = 0) -> None:
    """`conversations` more conversations holding `events` events in all, spread over `owners`;
    `offset` = how many an earlier call made (bench/growth.py grows the tables step by step)."""
    from django.db import transaction
    from django.utils import timezone

    from chat.eventlog import search
    from chat.models import Conversation, Event, Run

    rng = random.Random(7 + offset)
    users = len(owners)
    per_run = max(3, events // (conversations * RUNS_PER_CONVERSATION))
    now = timezone.now()
    chunk = max(1, 2000 // RUNS_PER_CONVERSATION)
    conversations += offset
    for start in range(offset, conversations, chunk):
        with transaction.atomic():
            convs = [
                Conversation(
                    owner=owners[i % users],
                    title=" ".join(_word(rng) for _ in range(4)),
                    updated_at=now - timezone.timedelta(seconds=i),
                    last_seq=RUNS_PER_CONVERSATION * per_run,
                )
                for i in range(start, min(start + chunk, conversations))
            ]
            Conversation.objects.bulk_create(convs)
            runs, rows = [], []
            for conversation in convs:
                seq = 0
                for _ in range(RUNS_PER_CONVERSATION):
                    run = Run(conversation=conversation, user=conversation.owner, status="succeeded", finished_at=now)
                    runs.append(run)
                    payloads = [{"type": "user_message", "content": " ".join(_word(rng) for _ in range(12))}]
                    payloads += [
                        {"type": "text", "content": " " + " ".join(_word(rng) for _ in range(6))}
                        for _ in range(per_run - 2)
                    ]
                    payloads.append({"type": "complete", "status": "succeeded"})
                    for payload in payloads:
                        seq += 1
                        rows.append(
                            Event(conversation=conversation, run=run, seq=seq, type=payload["type"], payload=payload)
                        )
            Run.objects.bulk_create(runs)
            Event.objects.bulk_create(rows, batch_size=5000)
            search.documents_write(run_ids=[run.pk for run in runs])
        done = min(start + chunk, conversations)
        if done % (chunk * 10) == 0 or done == conversations:
            print(f"  seeded {done}/{conversations} conversations", file=sys.stderr, flush=True)


def _percentiles(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1] * 1000, 2),
        "n": len(ordered),
    }


def measure(owners: list, requests: int) -> dict:
    from django.test import Client

    rng = random.Random(11)
    clients = []
    for owner in rng.sample(owners, min(10, len(owners))):
        client = Client()
        client.force_login(owner)
        clients.append(client)

    def timed(params_of) -> dict:
        samples, hits = [], []
        for _ in range(requests):
            client = rng.choice(clients)
            params = params_of(client)
            started = time.perf_counter()
            response = client.get("/api/conversations/", params)
            samples.append(time.perf_counter() - started)
            assert response.status_code == 200, response.content
            hits.append(len(response.json()["conversations"]))
        return {**_percentiles(samples), "mean_hits": round(sum(hits) / len(hits), 1)}

    out = {"list first page": timed(lambda client: {})}
    cursors = {}
    for client in clients:
        page = client.get("/api/conversations/", {"limit": 50}).json()
        cursors[client] = page["next"]
    out["list second page"] = timed(lambda client: {"before": cursors[client]} if cursors[client] else {})
    for name, q in QUERIES.items():
        out[f"search {name} ({q})"] = timed(lambda client, q=q: {"q": q})
    return out


def plan_uses_index() -> bool | None:
    from django.db import connection

    from chat.eventlog import search
    from chat.models import SearchDocument

    if connection.vendor != "postgresql":
        return None
    query = SearchDocument.objects.filter(search._body_match(search.query_terms(QUERIES["rare"]))).values("id")
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    return "chat_searchdocument_fts" in plan


def worker(args) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    import django

    django.setup()
    from django.db import connection

    started = time.monotonic()
    owners = seed(conversations=args.conversations, events=args.events, users=args.users)
    seeded = time.monotonic() - started
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # fresh statistics, as a live database has them
    from chat.models import Event

    result = {
        "database": connection.vendor,
        "conversations": args.conversations,
        "events": Event.objects.count(),
        "seed_s": round(seeded, 1),
        "gin_index_used": plan_uses_index(),
        "timings": measure(owners, args.requests),
    }
    print(json.dumps(result))


def run(*, database: str, conversations: int, events: int, users: int = USERS, requests: int = REQUESTS) -> dict:
    """Seed a fresh database of the kind and measure, in a subprocess; the result as a dict."""
    from .server import PG_ADMIN_URL, _pg_admin

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentsite.settings", "SECRET_KEY": "bench-" + uuid.uuid4().hex}
    env.pop("REDIS_URL", None)
    env["ALLOWED_HOSTS"] = "testserver"  # Django's test client, which drives the views
    with tempfile.TemporaryDirectory(prefix="agentsite-bench-search-") as tmp:
        name = None
        if database == "postgres":
            name = f"agentsite_bench_search_{uuid.uuid4().hex[:8]}"
            _pg_admin(f'CREATE DATABASE "{name}"')
            env["DATABASE_URL"] = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
        else:
            env["DATABASE_URL"] = f"sqlite:///{os.path.join(tmp, 'search.sqlite3')}"
        try:
            subprocess.run(
                [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0", "--skip-checks"],
                cwd=ROOT,
                env=env,
                check=True,
            )
            done = subprocess.run(
                [sys.executable, "-m", "bench.search", "--worker", "--conversations", str(conversations)]
                + ["--events", str(events), "--users", str(users), "--requests", str(requests)],
                cwd=ROOT,
                env=env,
                check=True,
                stdout=subprocess.PIPE,
                text=True,
            )
            return json.loads(done.stdout.strip().splitlines()[-1])
        finally:
            if name:
                _pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def table(result: dict) -> str:
    lines = [
        f"\n== search, {result['database']}: {result['conversations']} conversations, {result['events']} events "
        f"(seeded in {result['seed_s']} s"
        + ("" if result["gin_index_used"] is None else f", GIN index used: {result['gin_index_used']}")
        + ") =="
    ]
    for name, t in result["timings"].items():
        lines.append(
            f"  {name:32} p50 {t['p50_ms']:8.2f} ms   p95 {t['p95_ms']:8.2f} ms   ({t['mean_hits']} hits/page)"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.search", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--conversations", type=int, default=CONVERSATIONS)
    parser.add_argument("--events", type=int, default=EVENTS)
    parser.add_argument("--users", type=int, default=USERS)
    parser.add_argument("--requests", type=int, default=REQUESTS)
    parser.add_argument("--database", default="sqlite,postgres", help="comma list of sqlite, postgres")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    for database in args.database.split(","):
        print(
            table(
                run(
                    database=database,
                    conversations=args.conversations,
                    events=args.events,
                    users=args.users,
                    requests=args.requests,
                )
            )
        )


if __name__ == "__main__":
    main()
