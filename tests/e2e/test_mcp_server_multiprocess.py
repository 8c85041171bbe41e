"""The MCP server on two daphne processes sharing one PostgreSQL database and one Redis
(docs/protocol.md, "MCP server"): a session initialized on one process is served by the other,
requests of one session alternate between them, and a call running on one is cancelled by the
session's `notifications/cancelled` received by the other."""

from __future__ import annotations

import asyncio

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.fakellm import text_reply

from .conftest import ON_POSTGRES, REDIS_URL
from .harness import SyncUser, answer_text, slow_text_reply
from .mcp_raw import cancelled_call, initialize, session_headers

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.skipif(not (ON_POSTGRES and REDIS_URL), reason="needs DATABASE_URL=postgres://... and REDIS_URL"),
]


@pytest.fixture(scope="module")
def servers(databases, make_server):
    database = databases.new()
    return make_server(database, name="mcp-A"), make_server(database, name="mcp-B")


class Alternating(httpx2.AsyncBaseTransport):
    """Each request to the next process in turn: one MCP session, served by both."""

    def __init__(self, ports: list[int]) -> None:
        self.ports, self.sent = ports, 0
        self.inner = httpx2.AsyncHTTPTransport()
        self.used: list[int] = []

    async def handle_async_request(self, request):
        port = self.ports[self.sent % len(self.ports)]
        self.sent += 1
        self.used.append(port)
        request.url = request.url.copy_with(port=port)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_a_session_initialized_on_one_process_is_served_by_the_other(servers, replies):
    server_a, server_b = servers
    person = SyncUser(server_a)
    token = person.token("mcp")
    replies.set("mcp two processes", text_reply("Served by both."))
    replies.set("mcp two processes again", text_reply("Still both."))
    transport = Alternating([server_a.port, server_b.port])

    async def scenario():
        # Raw: initialize on A, list on B with that session.
        async with httpx2.AsyncClient(timeout=30) as http:
            session = await initialize(http, server_a.base, token)
            listed = await http.post(
                f"{server_b.base}/mcp",
                json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                headers=session_headers(token, session),
            )
            assert listed.status_code == 200, listed.text
            assert [t["name"] for t in listed.json()["result"]["tools"]] == ["ask_default"]
            # Ended on B: unknown on A.
            assert (
                await http.delete(f"{server_b.base}/mcp", headers=session_headers(token, session))
            ).status_code == 204
            gone = await http.post(
                f"{server_a.base}/mcp",
                json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
                headers=session_headers(token, session),
            )
            assert gone.status_code == 404
        # The official client, each of its requests to the other process.
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, transport=transport, timeout=httpx2.Timeout(30, read=60)
        )
        async with http, Client(streamable_http_client(f"{server_a.base}/mcp", http_client=http)) as client:
            first = await client.call_tool("ask_default", {"message": "mcp two processes"})
            second = await client.call_tool(
                "ask_default",
                {"message": "mcp two processes again", "conversationId": first.structured_content["conversationId"]},
            )
            return first, second

    first, second = asyncio.run(scenario())
    assert set(transport.used) == {server_a.port, server_b.port}
    assert first.structured_content["answer"] == "Served by both."
    assert second.structured_content["answer"] == "Still both."
    assert second.structured_content["conversationId"] == first.structured_content["conversationId"]
    person.close()


def test_a_call_on_one_process_is_cancelled_through_the_other(servers, replies):
    server_a, server_b = servers
    person = SyncUser(server_a)
    token = person.token("mcp")
    message = replies.set("mcp cancel across", slow_text_reply(answer_text(200), chunks=200, delay=0.05))

    async def scenario():
        async with httpx2.AsyncClient(timeout=30) as http:
            session = await initialize(http, server_b.base, token)
        return await cancelled_call(
            call_base=server_a.base, cancel_base=server_b.base, token=token, session=session, message=message
        )

    received = asyncio.run(scenario())
    assert received and all(m.get("method") == "notifications/progress" for m in received)  # no result
    conversation = next(
        c for c in person.http.get("/api/conversations/").json()["conversations"] if c["title"] == message
    )
    events = person.events(conversation["id"])
    assert events[-1]["type"] == "complete" and events[-1]["status"] == "cancelled"
    assert any(e["type"] == "error" and e["code"] == "CANCELLED" for e in events)
    person.close()
