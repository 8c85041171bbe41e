"""/metrics and traces with two daphne processes on one PostgreSQL database and one Redis:
either process answers the same numbers, the gauges count what lives in both, and a
run's trace reaches an OTLP/HTTP receiver from the process that ran it."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.otlp import Receiver, attributes

from .conftest import ON_POSTGRES, REDIS_URL
from .harness import Client, slow_text_reply

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.skipif(not (ON_POSTGRES and REDIS_URL), reason="needs DATABASE_URL=postgres://... and REDIS_URL"),
]

TOKEN = "e2e-scrape-token-1234"


@pytest.fixture(scope="module")
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.stop()


@pytest.fixture(scope="module")
def servers(databases, make_server, receiver):
    database = databases.new()
    env = {"METRICS_TOKEN": TOKEN, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "200"}
    return make_server(database, name="metrics-A", **env), make_server(database, name="metrics-B", **env)


@pytest.fixture
async def alice(servers):
    client = await Client(servers[0]).signup()
    yield client
    await client.aclose()


async def scrape(client: Client, server) -> dict[tuple[str, tuple], float]:
    response = await client.http.get(f"{server.base}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200, response.status_code
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


async def until_scraped(client: Client, server, expected: dict, timeout: float = 30.0) -> dict:
    """Scrape until the samples hold `expected` (the gauges are published on each heartbeat)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        samples = await scrape(client, server)
        if all(samples.get(key) == value for key, value in expected.items()):
            return samples
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"never scraped {expected}: {[(k, samples.get(k)) for k in expected]}")
        await asyncio.sleep(0.3)


SOCKETS = ("agentsite_websocket_connections", ())
ACTIVE = ("agentsite_active_runs", ())
SUCCEEDED = ("agentsite_runs_total", (("status", "succeeded"),))


async def test_both_processes_count_the_sockets_and_runs_of_both(alice, servers, replies):
    server_a, server_b = servers
    conversation = await alice.create_conversation()
    on_a = [await alice.socket(conversation, server=server_a) for _ in range(2)]
    on_b = await alice.socket(conversation, server=server_b)
    for socket in (*on_a, on_b):
        await socket.sync()
    message = replies.set("metrics across processes", slow_text_reply("slow words " * 40, chunks=80, delay=0.05))
    await on_b.message(message)
    await on_b.until(lambda f: f.get("type") == "text")

    for server in servers:
        await until_scraped(alice, server, {SOCKETS: 3, ACTIVE: 1})
    await on_b.until_complete()
    await on_b.close()
    for server in servers:
        samples = await until_scraped(alice, server, {SOCKETS: 2, ACTIVE: 0})
        assert samples[SUCCEEDED] == 1  # ran on B, counted by both
        assert samples[("agentsite_run_duration_seconds_count", ())] == 1
    for socket in on_a:
        await socket.close()
    for server in servers:
        await until_scraped(alice, server, {SOCKETS: 0})


async def test_a_run_on_b_is_exported_as_a_trace(alice, servers, replies, receiver):
    server_b = servers[1]
    conversation = await alice.create_conversation()
    socket = await alice.socket(conversation, server=server_b)
    await socket.sync()
    message = replies.set("traced across processes", slow_text_reply("traced answer", chunks=4, delay=0.01))
    await socket.message(message)
    frames = await socket.until_complete()
    await socket.close()
    run_id = frames[-1]["runId"]

    deadline = asyncio.get_running_loop().time() + 30
    while True:
        runs = [s for s in list(receiver.spans) if attributes(s).get("agentsite.run.id") == run_id]
        if runs or asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.2)
    (run,) = runs
    children = [s for s in list(receiver.spans) if s.trace_id == run.trace_id and s.span_id != run.span_id]
    assert attributes(run)["gen_ai.request.model"] == "fake-model"
    assert attributes(run)["agentsite.run.status"] == "succeeded"
    assert [(s.name, attributes(s)["gen_ai.operation.name"]) for s in children] == [("chat fake-model", "chat")]
    assert children[0].parent_span_id == run.span_id
