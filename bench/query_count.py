"""The database queries a server makes, counted for the benchmarks (SQLite has no pg_stat).

`QueryCounter.install()` puts an execute wrapper (Django's documented hook,
`connection.execute_wrapper`) on every database connection opened from then on, in any thread;
`with_stats(app, counter)` answers `GET /__bench__/queries` with the counts so far, by the
statement's first words, and hands every other request to the application. Only
bench/counted_asgi.py, the application a bench's daphne serves, uses them: the project's own
server counts nothing.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter

from django.db.backends.signals import connection_created

STATS_PATH = "/__bench__/queries"
# A statement's kind: its verb and its own table (`SELECT chat_event`), not its values.
_TABLE = re.compile(r'\b(?:FROM|INTO|UPDATE)\s+"?(\w+)"?', re.IGNORECASE)
_INNERMOST_PARENS = re.compile(r"\([^()]*\)")


def statement_kind(sql: str) -> str:
    verb = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else "?"
    outer, inner = sql, None
    while inner != outer:  # the subqueries (and calls) taken out, innermost first
        inner, outer = outer, _INNERMOST_PARENS.sub("", outer)
    table = _TABLE.search(outer)
    return f"{verb} {table.group(1)}" if table else verb


class QueryCounter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_kind: Counter[str] = Counter()

    def install(self) -> QueryCounter:
        connection_created.connect(self._wrap, weak=False)
        return self

    def uninstall(self) -> None:
        connection_created.disconnect(self._wrap)

    def _wrap(self, sender, connection, **kwargs) -> None:
        if self._count not in connection.execute_wrappers:
            connection.execute_wrappers.append(self._count)

    def _count(self, execute, sql, params, many, context):
        with self._lock:
            self.by_kind[statement_kind(sql)] += 1
        return execute(sql, params, many, context)

    def counts(self) -> dict:
        with self._lock:
            return {"queries": sum(self.by_kind.values()), "by_kind": dict(self.by_kind)}


def with_stats(app, counter: QueryCounter):
    """The ASGI application, with the counts at STATS_PATH."""

    async def application(scope, receive, send):
        if scope["type"] == "http" and scope["path"] == STATS_PATH:
            body = json.dumps(counter.counts()).encode()
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return application


def difference(after: dict, before: dict) -> dict:
    """The queries between two readings of the counts."""
    kinds = {k: v - before["by_kind"].get(k, 0) for k, v in after["by_kind"].items()}
    return {"queries": after["queries"] - before["queries"], "by_kind": {k: v for k, v in kinds.items() if v}}
