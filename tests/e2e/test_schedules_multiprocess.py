"""Schedules on two daphne processes sharing one PostgreSQL database and one Redis
(docs/protocol.md, "Firing"): both poll, and each slot starts exactly one run."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from .conftest import ON_POSTGRES, REDIS_URL
from .harness import Client

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.skipif(not (ON_POSTGRES and REDIS_URL), reason="needs DATABASE_URL=postgres://... and REDIS_URL"),
]

FAST = {"AGENT_SCHEDULE_POLL_SECONDS": "0.2", "AGENT_SCHEDULE_MIN_SECONDS": "2"}


@pytest.fixture(scope="module")
def servers(databases, make_server):
    database = databases.new()
    return make_server(database, name="A", **FAST), make_server(database, name="B", **FAST)


async def _runs(client: Client, schedule_id: str) -> list[dict]:
    r = await client.api("GET", f"/api/schedules/{schedule_id}/runs/")
    assert r.status_code == 200, r.text
    return r.json()["runs"]


async def test_a_schedule_due_in_seconds_fires_exactly_once_across_two_processes(servers):
    server_a, server_b = servers
    alice = await Client(server_a).signup()
    try:
        await alice.api("GET", "/healthz", server=server_b)  # B's poller starts with its first request
        at = (datetime.now(UTC) + timedelta(seconds=2)).isoformat()
        r = await alice.api("POST", "/api/schedules/", json_body={"prompt": "Once, please", "name": "Once", "at": at})
        assert r.status_code == 201, r.text
        schedule_id = r.json()["id"]
        every = await alice.api("POST", "/api/schedules/", json_body={"prompt": "Every two", "every": 2})
        assert every.status_code == 201, every.text
        created = time.monotonic()
        await asyncio.sleep(7)
        runs = await _runs(alice, schedule_id)
        assert len(runs) == 1, runs
        elapsed = time.monotonic() - created
        every_runs = await _runs(alice, every.json()["id"])
        assert 2 <= len(every_runs) <= int(elapsed // 2), every_runs  # never two runs for one slot
        r = await alice.api("GET", f"/api/schedules/{schedule_id}/", server=server_b)
        body = r.json()
        assert body["nextRunAt"] is None and body["lastRunId"] == runs[0]["runId"]
        assert body["lastStatus"] in ("running", "succeeded")
        r = await alice.api("GET", f"/api/conversations/{runs[0]['conversationId']}/")
        conversation = r.json()
        assert (conversation["title"], conversation["source"], conversation["scheduleId"]) == (
            "Once",
            "schedule",
            schedule_id,
        )
        logs = server_a.log() + server_b.log()
        assert "Traceback" not in logs, logs[-3000:]
    finally:
        await alice.aclose()
