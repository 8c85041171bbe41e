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
from .mcp_raw import cancelled_call, dropped_call, initialize

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


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
def test_progress_comes_for_each_stored_event_and_a_second_call_continues(user, replies, e2e_llm, mode):
    replies.set(f"mcp tools {mode}", tool_call_reply(("current_time", {})), text_reply("It is now.", piece=3))
    replies.set(f"mcp again {mode}", text_reply("Again."))
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    async def scenario():
        async with connected(user, mode=mode) as client:
            first = await client.call_tool("ask_default", {"message": f"mcp tools {mode}"}, progress_callback=progress)
            conversation = first.structured_content["conversationId"]
            second = await client.call_tool(
                "ask_default", {"message": f"mcp again {mode}", "conversationId": conversation}
            )
            return first, second

    first, second = asyncio.run(scenario())
    conversation = first.structured_content["conversationId"]
    assert second.structured_content["conversationId"] == conversation
    assert second.structured_content["answer"] == "Again."
    events = user.events(conversation)
    run = [e for e in events if e["runId"] == first.structured_content["runId"]]
    # One notification per stored event after the user_message, in seq order, as the spec words them.
    expected = []
    for e in run[1:]:
        message = {"text": e.get("content"), "tool_start": f"calling {e.get('toolName')}"}.get(e["type"])
        if e["type"] == "tool_end":
            message = f"{e['toolName']} {'failed' if e['isError'] else 'done'}"
        if e["type"] == "complete":
            message = e["status"]
        expected.append((float(e["seq"]), None, message or e["type"]))
    assert seen == expected
    assert any(m == "calling current_time" for _, _, m in seen) and any(m == "current_time done" for _, _, m in seen)
    assert first.structured_content["answer"] == "It is now."
    # The second run followed the first turn: its memory held it, its user_message no parentSeq needed.
    second_user = next(e for e in events if e["runId"] == second.structured_content["runId"])
    assert second_user["via"] == "mcp" and second_user["content"] == f"mcp again {mode}"
    sent = next(b for b in reversed(e2e_llm.requests) if b["messages"][-1].get("content") == f"mcp again {mode}")
    assert [m.get("content") for m in sent["messages"] if m["role"] == "user"] == [
        f"mcp tools {mode}",
        f"mcp again {mode}",
    ]


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
def test_a_cancelled_call_cancels_its_run(user, replies, mode):
    message = replies.set(f"mcp slow {mode}", slow_text_reply(answer_text(200), chunks=200, delay=0.05))
    started = anyio.Event()

    async def progress(value: float, total: float | None, text: str | None) -> None:
        started.set()

    async def scenario():
        async with connected(user, mode=mode) as client:
            with anyio.move_on_after(30):
                async with anyio.create_task_group() as tasks:

                    async def call():
                        await client.call_tool("ask_default", {"message": message}, progress_callback=progress)

                    tasks.start_soon(call)
                    await started.wait()
                    tasks.cancel_scope.cancel()
            # The connection stays usable after the cancel.
            return [t.name for t in (await client.list_tools()).tools]

    assert asyncio.run(scenario())[0] == "ask_default"
    for _ in range(100):
        listed = user.http.get("/api/conversations/").json()["conversations"]
        mine = [c for c in listed if c["title"].startswith(f"mcp slow {mode}")]
        events = user.events(mine[0]["id"]) if mine else []
        if events and events[-1]["type"] == "complete":
            break
        asyncio.run(asyncio.sleep(0.1))
    assert events[-1]["type"] == "complete" and events[-1]["status"] == "cancelled"
    assert any(e["type"] == "error" and e["code"] == "CANCELLED" for e in events)
    # Cancelled long before the model's 10 s answer was streamed.
    text = "".join(e["content"] for e in events if e["type"] == "text")
    assert len(text) < len(answer_text(200))


def test_a_tool_needing_approval_is_denied_saying_mcp(user, replies):
    replies.set("mcp approve", tool_call_reply(("calculator", {"expression": "6*7"})), text_reply("Denied, fine."))

    async def scenario():
        async with connected(user) as client:
            return await client.call_tool("ask_default", {"message": "mcp approve"})

    result = asyncio.run(scenario())
    assert result.structured_content["answer"] == "Denied, fine."
    events = user.events(result.structured_content["conversationId"])
    denied = next(e for e in events if e["type"] == "approval_result")
    assert denied["decision"] == "denied" and "MCP" in denied["reason"]


def test_errors_unknown_tools_and_tool_errors(user, mcp_server):
    other = SyncUser(mcp_server)
    theirs = other.conversation("theirs")
    other.close()

    async def scenario():
        async with connected(user) as client:
            for name in ("ask_secret", "ask_nobody", "nothing"):
                with pytest.raises(MCPError) as raised:
                    await client.call_tool(name, {"message": "hi"})
                assert raised.value.error.code == -32602 and raised.value.error.message == f"Unknown tool: {name}"
            out = {}
            out["empty"] = await client.call_tool("ask_default", {"message": "  "})
            out["extra"] = await client.call_tool("ask_default", {"message": "hi", "other": 1})
            out["theirs"] = await client.call_tool("ask_default", {"message": "hi", "conversationId": theirs})
            out["garbage"] = await client.call_tool("ask_default", {"message": "hi", "conversationId": "nope"})
            made = await client.call_tool("ask_default", {"message": "mcp first of helper"})
            out["agent"] = await client.call_tool(
                "ask_helper", {"message": "hi", "conversationId": made.structured_content["conversationId"]}
            )
            out["large"] = await client.call_tool("ask_default", {"message": "x" * 200_000})
            return out

    before = len(user.http.get("/api/conversations/").json()["conversations"])
    out = asyncio.run(scenario())
    for key, code in [
        ("empty", "BAD_REQUEST"),
        ("extra", "BAD_REQUEST"),
        ("theirs", "NOT_FOUND"),
        ("garbage", "NOT_FOUND"),
        ("agent", "BAD_REQUEST"),
        ("large", "TOO_LARGE"),
    ]:
        result = out[key]
        assert result.is_error is True and result.structured_content is None, key
        assert result.content[0].text.startswith(f"{code}: "), (key, result.content[0].text)
    # Only the one good call made a conversation: refusals store nothing.
    assert len(user.http.get("/api/conversations/").json()["conversations"]) == before + 1


def post(server, body, *, token: str | None, headers: dict[str, str] | None = None, method: str = "POST"):
    sent = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json", **(headers or {})}
    if token:
        sent["Authorization"] = f"Bearer {token}"
    content = body if isinstance(body, bytes) else json.dumps(body).encode() if body is not None else None
    return httpx2.request(method, f"{server.base}/mcp", content=content, headers=sent, timeout=30)


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}


def test_tokens_sessions_and_http_rules(user, mcp_server):
    token = user.token("raw")
    # No token, a bad one, a session cookie alone: 401 with WWW-Authenticate, JSON.
    for bad in (None, "as_nope"):
        r = post(mcp_server, INITIALIZE, token=bad)
        assert r.status_code == 401 and r.headers["WWW-Authenticate"].startswith("Bearer") and r.json()["error"]
    cookie = {"Cookie": "; ".join(f"{k}={v}" for k, v in user.http.cookies.items())}
    assert post(mcp_server, INITIALIZE, token=None, headers=cookie).status_code == 401
    # initialize: the client's known version, a session id of at least 128 bits.
    r = post(mcp_server, INITIALIZE, token=token)
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    assert r.json()["result"]["protocolVersion"] == "2025-06-18"
    assert r.json()["result"]["serverInfo"]["name"] == "agentsite"
    session = r.headers["Mcp-Session-Id"]
    assert len(session) >= 22
    versioned = {"MCP-Protocol-Version": "2025-06-18"}
    unknown = post(
        mcp_server, {**INITIALIZE, "params": {**INITIALIZE["params"], "protocolVersion": "1999-01-01"}}, token=token
    )
    assert unknown.json()["result"]["protocolVersion"] == "2025-11-25"
    # Without the session: 400; with an unknown one or another token's: 404.
    assert post(mcp_server, LIST, token=token, headers=versioned).status_code == 400
    assert post(mcp_server, LIST, token=token, headers={**versioned, "Mcp-Session-Id": "nope"}).status_code == 404
    other = SyncUser(mcp_server)
    theirs = other.token("theirs")
    other.close()
    assert post(mcp_server, LIST, token=theirs, headers={**versioned, "Mcp-Session-Id": session}).status_code == 404
    listed = post(mcp_server, LIST, token=token, headers={**versioned, "Mcp-Session-Id": session})
    assert listed.status_code == 200 and [t["name"] for t in listed.json()["result"]["tools"]] == [
        "ask_default",
        "ask_helper",
    ]
    # A notification is 202; GET is 405; not JSON 400 -32700; Origin of another site 403.
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert post(mcp_server, note, token=token, headers={**versioned, "Mcp-Session-Id": session}).status_code == 202
    assert post(mcp_server, None, token=token, method="GET").status_code == 405
    bad = post(mcp_server, b"{not json", token=token, headers={**versioned, "Mcp-Session-Id": session})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == -32700
    assert post(mcp_server, LIST, token=token, headers={"Origin": "http://evil.example"}).status_code == 403
    own = post(mcp_server, INITIALIZE, token=token, headers={"Origin": mcp_server.base})
    assert own.status_code == 200
    assert post(mcp_server, b"x" * (4 * 1024 * 1024 + 10), token=token).status_code == 413
    # DELETE ends the session: 204, then 404.
    ended = post(mcp_server, None, token=token, headers={"Mcp-Session-Id": session}, method="DELETE")
    assert ended.status_code == 204
    assert post(mcp_server, LIST, token=token, headers={**versioned, "Mcp-Session-Id": session}).status_code == 404
    # Revoking the token ends its sessions (and the token).
    again = post(mcp_server, INITIALIZE, token=token).headers["Mcp-Session-Id"]
    count = "from chat.models import McpSession; print(McpSession.objects.filter(token__name='raw').count())"
    assert int(shell(mcp_server, count)) >= 1
    listed_tokens = user.http.get("/api/tokens/").json()
    raw = next(t for t in listed_tokens["tokens"] if t["name"] == "raw")
    assert user.http.delete(f"/api/tokens/{raw['id']}/", headers=user.unsafe_headers).status_code in (200, 204)
    assert shell(mcp_server, count.replace("token__name='raw'", f"token_id={raw['id']}")) == "0"
    assert post(mcp_server, LIST, token=token, headers={**versioned, "Mcp-Session-Id": again}).status_code == 401


def test_a_call_its_client_cancelled_gets_no_result(user, replies):
    message = replies.set("mcp raw slow", slow_text_reply(answer_text(200), chunks=200, delay=0.05))
    token = user.token("raw-cancel")

    async def scenario():
        async with httpx2.AsyncClient(timeout=30) as http:
            session = await initialize(http, user.server.base, token)
        base = user.server.base
        return await cancelled_call(call_base=base, cancel_base=base, token=token, session=session, message=message)

    received = asyncio.run(scenario())
    assert received and all(m.get("method") == "notifications/progress" for m in received), received[-1]
    conversation = next(
        c for c in user.http.get("/api/conversations/").json()["conversations"] if c["title"] == "mcp raw slow"
    )
    events = user.events(conversation["id"])
    assert events[-1]["type"] == "complete" and events[-1]["status"] == "cancelled"


@pytest.fixture(scope="module")
def strict_server(databases, make_server):
    return make_server(databases.new(), name="mcp-strict", AGENT_MESSAGES_PER_MINUTE="2", AGENT_MCP_SESSION_IDLE="2")


def test_refused_starts_store_nothing_and_idle_sessions_end(strict_server, replies):
    person = SyncUser(strict_server)
    token = person.token("strict")
    message = replies.set("mcp strict slow", slow_text_reply(answer_text(100), chunks=100, delay=0.05))

    async def scenario():
        out = {}
        async with connected(person, token=token) as client:
            async with anyio.create_task_group() as tasks:
                first: dict = {}

                async def slow():
                    first["result"] = await client.call_tool("ask_default", {"message": message})

                tasks.start_soon(slow)
                conversation = None
                with anyio.fail_after(30):
                    while conversation is None:
                        await anyio.sleep(0.1)
                        listed = person.http.get("/api/conversations/").json()["conversations"]
                        conversation = next((c["id"] for c in listed if c["title"] == message), None)
                # The conversation runs: a second call on it is refused.
                out["busy"] = await client.call_tool("ask_default", {"message": "more", "conversationId": conversation})
            out["first"] = first["result"]
            # Two messages a minute (a refused one not counted): the third is refused, on a new
            # conversation made for nothing.
            out["second"] = await client.call_tool("ask_default", {"message": "mcp strict second"})
            out["limited"] = await client.call_tool("ask_default", {"message": "mcp strict third"})
        async with httpx2.AsyncClient(timeout=30) as http:
            session = await initialize(http, strict_server.base, token)
            await anyio.sleep(3)
            out["idle"] = await http.post(
                f"{strict_server.base}/mcp",
                json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                headers={
                    "Authorization": f"Bearer {token}",
                    "Mcp-Session-Id": session,
                    "MCP-Protocol-Version": "2025-11-25",
                    "Accept": "application/json, text/event-stream",
                },
            )
        return out

    out = asyncio.run(scenario())
    assert out["busy"].is_error and out["busy"].content[0].text.startswith("RUN_IN_PROGRESS: ")
    assert out["first"].structured_content["status"] == "succeeded"
    assert out["limited"].is_error and out["limited"].content[0].text.startswith("RATE_LIMITED: ")
    titles = [c["title"] for c in person.http.get("/api/conversations/").json()["conversations"]]
    assert out["second"].structured_content["status"] == "succeeded"
    assert sorted(titles) == sorted([message, "mcp strict second"])  # the refused call's was deleted again
    assert out["idle"].status_code == 404 and out["idle"].json()["error"]["code"] == -32600
    person.close()


def test_the_server_can_be_turned_off(databases, make_server):
    server = make_server(databases.new(), name="mcp-off", AGENT_MCP_SERVER="false")
    person = SyncUser(server)
    r = post(server, INITIALIZE, token=person.token("off"))
    assert r.status_code == 404
    person.close()


def test_a_failed_run_answers_its_last_error(user, replies):
    replies.set("mcp fails", {"status": 400, "body": {"error": {"message": "the fake model refuses"}}})

    async def scenario():
        async with connected(user) as client:
            return await client.call_tool("ask_default", {"message": "mcp fails"})

    result = asyncio.run(scenario())
    assert result.is_error is True and result.structured_content["status"] == "failed"
    events = user.events(result.structured_content["conversationId"])
    last_error = [e for e in events if e["type"] == "error"][-1]
    assert result.content[0].text == f"{last_error['code']}: {last_error['message']}"
    assert events[-1]["type"] == "complete" and events[-1]["status"] == "failed"


def test_a_dropped_connection_does_not_cancel_a_handshake_era_run(user, replies):
    message = replies.set("mcp dropped", slow_text_reply(answer_text(40), chunks=40, delay=0.05))
    token = user.token("raw-drop")

    async def scenario():
        async with httpx2.AsyncClient(timeout=30) as http:
            session = await initialize(http, user.server.base, token)
        return await dropped_call(base=user.server.base, token=token, session=session, message=message)

    first = asyncio.run(scenario())
    assert first["method"] == "notifications/progress"
    conversation = next(
        c for c in user.http.get("/api/conversations/").json()["conversations"] if c["title"] == message
    )
    for _ in range(100):
        events = user.events(conversation["id"])
        if events[-1]["type"] == "complete":
            break
        asyncio.run(asyncio.sleep(0.1))
    assert events[-1]["status"] == "succeeded"  # it finished, and stays in the conversation
    assert "".join(e["content"] for e in events if e["type"] == "text") == answer_text(40)
