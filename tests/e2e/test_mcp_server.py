"""The MCP server at /mcp with the official `mcp` client over real HTTP against a real daphne
(docs/protocol.md, "MCP server"): the handshake era and the 2026-07-28 era, the user's agents as
tools, progress, cancellation, a conversation continued, the answers as the stored runs have
them, and the token and session rules."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.fakellm import text_reply, tool_call_reply

from .harness import SyncUser, answer_text, shell, slow_text_reply

pytestmark = pytest.mark.services

LEGACY = "legacy"
MODERN = "2026-07-28"


@pytest.fixture(scope="module")
def mcp_server(databases, make_server):
    server = make_server(
        databases.new(), name="mcp-server", AGENT_MESSAGES_PER_MINUTE="1000", AGENT_APPROVAL_TOOLS="calculator"
    )
    shell(
        server,
        "from chat.models import AgentProfile\n"
        "AgentProfile.objects.create(slug='helper', name='Helper', description='Helps.', model='fake-model', everyone=True)\n"
        "AgentProfile.objects.create(slug='secret', name='Secret', model='fake-model', everyone=False)\n",
    )
    return server


@pytest.fixture
def user(mcp_server):
    person = SyncUser(mcp_server)
    yield person
    person.close()


@asynccontextmanager
async def connected(person: SyncUser, *, mode: str = LEGACY, token: str | None = None) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token or person.token('mcp')}"}, timeout=httpx2.Timeout(30, read=60)
    )
    async with http, Client(streamable_http_client(f"{person.server.base}/mcp", http_client=http), mode=mode) as client:
        yield client


def runs_of(person: SyncUser, conversation_id: str) -> list[dict]:
    return [e for e in person.events(conversation_id) if e["type"] in ("user_message", "complete")]


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
def test_tools_are_the_users_agents_and_a_call_answers_as_the_stored_run(user, replies, mode):
    replies.set(f"mcp hello {mode}", text_reply("Hello over MCP."))

    async def scenario():
        async with connected(user, mode=mode) as client:
            if mode == LEGACY:
                assert client.session.protocol_version == "2025-11-25"
                assert client.server_info.name == "agentsite"
                assert client.server_capabilities.model_dump(exclude_none=True) == {"tools": {"list_changed": False}}
            tools = (await client.list_tools()).tools
            assert [t.name for t in tools] == ["ask_default", "ask_helper"]  # not another's, not a private one
            helper = tools[1]
            assert helper.title == "Helper" and helper.description == "Helps."
            assert tools[0].title == "Default" and tools[0].description == "Ask the agent Default."
            assert helper.input_schema["required"] == ["message"]
            return await client.call_tool("ask_default", {"message": f"mcp hello {mode}"})

    result = asyncio.run(scenario())
    assert result.is_error is False
    structured = result.structured_content
    assert structured["answer"] == "Hello over MCP." == result.content[0].text
    assert structured["status"] == "succeeded"
    events = user.events(structured["conversationId"])
    first = events[0]
    assert first["type"] == "user_message" and first["via"] == "mcp" and first["runId"] == structured["runId"]
    assert events[-1]["type"] == "complete" and events[-1]["status"] == "succeeded"
    assert "".join(e["content"] for e in events if e["type"] == "text") == structured["answer"]
    listed = user.http.get(f"/api/conversations/{structured['conversationId']}/").json()
    assert listed["source"] == "mcp"
