"""A conversation deleted mid-run ends its run and everything open on it at once, on every process
(docs/protocol.md, "Server-sent events", "OpenAI-compatible endpoint", "The WebSocket"): two daphnes
on one PostgreSQL database and one Redis, the deletion made through A, the run, the streams, the
/v1 calls and a socket served by B. The run is stored `cancelled` (what /metrics counts of it) and
its model call is cut; a server-sent event stream ends with `error` NOT_FOUND, a streamed /v1 call
with OpenAI's error chunk and `[DONE]`, a whole one with OpenAI's 404, a socket with 4404.

The bounds below are liveness bounds, not measurements: before, none of these ended at all."""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest
from httpx_sse import aconnect_sse
from openai import AsyncOpenAI
from prometheus_client.parser import text_string_to_metric_families
from websockets.exceptions import ConnectionClosed

from .conftest import ON_POSTGRES, REDIS_URL
from .harness import Client, Socket, answer_text, slow_text_reply
from .test_revocation import ended_with_error, streamed_completion

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.services,
    pytest.mark.skipif(not (ON_POSTGRES and REDIS_URL), reason="needs DATABASE_URL=postgres://... and REDIS_URL"),
]

METRICS_TOKEN = "e2e-deletion-scrape-token"  # noqa: S105 - a test server's
AT_ONCE = 1.5  # seconds: a stream still open past this was not ended by the deletion
CANCELLED_RUNS = ("agentsite_runs_total", (("status", "cancelled"),))


@pytest.fixture(scope="module")
def servers(databases, make_server):
    database = databases.new()
    env = {"METRICS_TOKEN": METRICS_TOKEN, "AGENT_MESSAGES_PER_MINUTE": "1000"}
    return make_server(database, name="delete-A", **env), make_server(database, name="delete-B", **env)


@pytest.fixture
async def alice(servers):
    client = await Client(servers[0]).signup()
    yield client
    await client.aclose()


async def token_of(client: Client) -> str:
    r = await client.api("POST", "/api/tokens/", json_body={"name": "deletion"})
    assert r.status_code == 201, r.text
    return r.json()["token"]


async def cancelled_runs(client: Client, server) -> float:
    r = await client.http.get(f"{server.base}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert r.status_code == 200, r.status_code
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            if (sample.name, tuple(sorted(sample.labels.items()))) == CANCELLED_RUNS:
                return sample.value
    return 0.0


async def delete_through_a(alice: Client, conversation: str) -> float:
    """DELETE /api/conversations/<id>/ through A; the loop's time once it answered."""
    r = await alice.api("DELETE", f"/api/conversations/{conversation}/")
    assert r.status_code == 204, r.text
    return asyncio.get_running_loop().time()


async def close_code(sock: Socket, timeout: float) -> tuple[int | None, list[dict]]:
    """The code the server closed the socket with, within `timeout`, and the frames before it."""
    frames = []
    async with asyncio.timeout(timeout):
        try:
            while True:
                frames.append(json.loads(await sock.ws.recv()))
        except ConnectionClosed as exc:
            return (exc.rcvd.code if exc.rcvd else None), frames


async def model_stream_cut(e2e_llm, before: int) -> list[str]:
    """How the model streams that ended since `before` ended (the run's, cut: "aborted")."""
    return (await e2e_llm.endings(before + 1, timeout=10))[before:]


async def test_deleting_through_a_ends_the_run_its_stream_and_sockets_on_b(alice, servers, replies, e2e_llm):
    server_a, server_b = servers
    message = replies.set("delete me mid-run", slow_text_reply(answer_text(200, "d"), chunks=200, delay=0.05))
    conversation = await alice.create_conversation()
    on_b, on_a = await alice.socket(conversation, server=server_b), await alice.socket(conversation, server=server_a)
    await on_b.sync()
    await on_a.sync()
    cancelled_before = await cancelled_runs(alice, server_a)
    texts = asyncio.Event()
    events: list[tuple[str, dict]] = []

    async def stream() -> None:
        headers = {"Authorization": f"Bearer {await token_of(alice)}"}
        async with httpx.AsyncClient(base_url=server_b.base, headers=headers, timeout=60) as http:
            path = f"/api/conversations/{conversation}/stream/?until=complete"
            async with aconnect_sse(http, "GET", path) as source:
                async for sse in source.aiter_sse():
                    events.append((sse.event, json.loads(sse.data)))
                    if sse.event == "text":
                        texts.set()

    reader = asyncio.create_task(stream())
    # The run is started on B, and runs there: A reaches it through the layer only.
    r = await alice.api(
        "POST", f"/api/conversations/{conversation}/messages/", json_body={"content": message}, server=server_b
    )
    assert r.status_code == 202, r.text
    await asyncio.wait_for(texts.wait(), 15)
    model_streams = len(e2e_llm.stream_endings)

    deleted_at = await delete_through_a(alice, conversation)
    await asyncio.wait_for(reader, AT_ONCE)
    (code_b, frames_b), (code_a, frames_a) = await asyncio.gather(close_code(on_b, AT_ONCE), close_code(on_a, AT_ONCE))
    assert asyncio.get_running_loop().time() - deleted_at < AT_ONCE
    assert code_b == code_a == 4404
    assert "complete" not in [f["type"] for f in frames_a + frames_b]

    # The stream's last event says why it ended; the run's own end never came (it could not be stored).
    assert events[-1] == ("error", {"type": "error", "code": "NOT_FOUND", "message": "This conversation was deleted."})
    assert "complete" not in [event for event, _ in events]
    assert await model_stream_cut(e2e_llm, model_streams) == ["aborted"]
    assert await cancelled_runs(alice, server_b) == cancelled_before + 1
    r = await alice.api("GET", f"/api/conversations/{conversation}/", server=server_b)
    assert r.status_code == 404
    assert "Traceback" not in server_a.log(tail=None) + server_b.log(tail=None)


async def test_deleting_through_a_ends_a_streamed_completion_on_b(alice, servers, replies, e2e_llm):
    server_a, server_b = servers
    message = replies.set("delete my completion", slow_text_reply(answer_text(200, "s"), chunks=200, delay=0.05))
    cancelled_before = await cancelled_runs(alice, server_a)
    call, lines, conversation = await streamed_completion(server_b, await token_of(alice), message)
    model_streams = len(e2e_llm.stream_endings)

    await delete_through_a(alice, conversation)
    await asyncio.wait_for(call, AT_ONCE)

    assert ended_with_error(lines) == {
        "message": "The conversation of this completion was deleted.",
        "type": "invalid_request_error",
        "param": None,
        "code": "not_found",
    }
    assert not any('"finish_reason":"stop"' in line for line in lines)
    assert await model_stream_cut(e2e_llm, model_streams) == ["aborted"]
    assert await cancelled_runs(alice, server_b) == cancelled_before + 1


async def test_deleting_through_a_answers_a_whole_completion_on_b_with_a_404(alice, servers, replies):
    server_a, server_b = servers
    message = replies.set("delete my whole completion", slow_text_reply(answer_text(200, "w"), chunks=200, delay=0.05))
    client = AsyncOpenAI(base_url=f"{server_b.base}/v1", api_key=await token_of(alice), max_retries=0, timeout=60)
    call = asyncio.create_task(
        client.chat.completions.create(model="default", messages=[{"role": "user", "content": message}])
    )
    # Its conversation, found in the user's list once its run has said something.
    deadline = asyncio.get_running_loop().time() + 15
    while True:
        r = await alice.api("GET", "/api/conversations/")
        made = [c["id"] for c in r.json()["conversations"] if c["title"] == message]
        if made and any(e["type"] == "text" for e in await alice.events(made[0])):
            break
        assert asyncio.get_running_loop().time() < deadline, "the completion's run never started"
        await asyncio.sleep(0.1)

    await delete_through_a(alice, made[0])
    with pytest.raises(openai.NotFoundError) as caught:
        await asyncio.wait_for(call, AT_ONCE)
    assert caught.value.code == "not_found"
    assert caught.value.body["message"] == "The conversation of this completion was deleted."
    await client.close()
