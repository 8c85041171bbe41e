"""The cache backend of the whole process, for the counters of sign-ins, sign-ups and tokens.

Django's `django.core.cache.cache` is per context (asgiref's Local): under ASGI every request
builds its own backend object, and the Redis backend its own connection pool, so each request
that counted something opened a new TCP connection to Redis, left to the collector to close.
One backend per process keeps one pool (redis-py's pool is thread-safe) for every request and
thread. The local-memory backend of a SQLite set-up shares its store by name either way.
"""

from __future__ import annotations

from django.core.cache import caches

cache = caches.create_connection("default")
