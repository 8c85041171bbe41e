"""The counters of failed tokens, sign-ins and sign-ups use one cache backend per process.

Under ASGI, Django's `django.core.cache.cache` is built anew for each request (asgiref's Local),
and with Redis each request that counted something opened its own connection to it, closed only
when collected. On PostgreSQL + Redis (the `services` pass) this counts the connections Redis
accepted; on SQLite the counters themselves."""

from __future__ import annotations

import asyncio
import contextvars

import pytest
import redis
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings
from django.test import AsyncClient

from chat.accounts.process_cache import cache

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]

REQUESTS = 8


def connections_received() -> int | None:
    if not getattr(django_settings, "REDIS_URL", None):
        return None
    return redis.Redis.from_url(django_settings.REDIS_URL).info("stats")["total_connections_received"]


async def test_failed_tokens_of_many_requests_are_counted_on_one_connection(settings):
    settings.LOGIN_FAILURE_LIMIT = 100
    await sync_to_async(cache.clear)()
    before = await sync_to_async(connections_received)()
    client = AsyncClient()
    for _ in range(REQUESTS):  # one after the other: a pool needs a second connection only for a second user at once
        # Each in a context of its own, as daphne serves each request in a task of its own.
        request = client.get("/api/conversations/", headers={"Authorization": "Bearer as_guess"})
        response = await asyncio.create_task(request, context=contextvars.Context())
        assert response.status_code == 401
    assert await sync_to_async(cache.get)("token-failures:127.0.0.1") == REQUESTS
    after = await sync_to_async(connections_received)()
    if before is not None:
        # This test's own two INFO connections, and at most one for the counters (the process's
        # first use of its pool): not one per request.
        assert after - before <= 3, f"{after - before} connections for {REQUESTS} requests"
    await sync_to_async(cache.clear)()
