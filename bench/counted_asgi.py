"""The project's ASGI application with its database queries counted (bench/query_count.py):
what `Stack(server="daphne-counted")` serves, `daphne bench.counted_asgi:application`."""

from __future__ import annotations

from agentsite.asgi import application as project

from .query_count import QueryCounter, with_stats

counter = QueryCounter().install()
application = with_stats(project, counter)
