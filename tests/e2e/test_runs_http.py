"""Runs over HTTP and server-sent events through a real daphne (docs/protocol.md, "Runs over HTTP"
and "Server-sent events"): a real SSE client (httpx + httpx-sse) posts, streams, cancels and
approves with a bearer token (no CSRF) or a session (with CSRF), and what it reads is exactly
the stored events, also while a WebSocket watches the same conversation."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from httpx_sse import aconnect_sse

from tests.fakellm import text_reply, tool_call_reply

from .harness import Client, events_only, slow_text_reply

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def runs_server(databases, make_server):
    return make_server(
        databases.new(),
        name="runs-http",
        AGENT_APPROVAL_TOOLS="calc*",
        AGENT_APPROVAL_TIMEOUT="120",
        AGENT_MESSAGES_PER_MINUTE="1000",
        AGENT_MAX_MESSAGE_CHARS="100",
    )


@pytest.fixture(scope="module")
def limited_server(databases, make_server):
    return make_server(databases.new(), name="runs-http-limited", AGENT_MESSAGES_PER_MINUTE="1")


@pytest.fixture(scope="module")
def quota_server(databases, make_server):
    return make_server(databases.new(), name="runs-http-quota", AGENT_DAILY_TOKEN_QUOTA="1")


async def signed_up(server) -> Client:
    return await Client(server).signup()


async def bearer(client: Client) -> httpx.AsyncClient:
    r = await client.api("POST", "/api/tokens/", json_body={"name": "script"})
    assert r.status_code == 201, r.text
    token = r.json()["token"]
    http = httpx.AsyncClient(base_url=client.server.base, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    http.token_id = r.json()["id"]
    return http


async def read_sse(http, path, *, headers=None, stop=None, timeout=30.0) -> list:
    """(event, id, data) of a stream, until it ends or `stop(items)` holds."""
    items = []

    async def run():
        async with aconnect_sse(http, "GET", path, headers=headers or {}) as source:
            assert source.response.status_code == 200
            assert source.response.headers["content-type"].startswith("text/event-stream")
            assert source.response.headers["x-accel-buffering"] == "no"
            async for sse in source.aiter_sse():
                items.append((sse.event, sse.id, json.loads(sse.data)))
                if stop and stop(items):
                    return

    await asyncio.wait_for(run(), timeout)
    return items


def frames_of(items) -> list[dict]:
    return [data for event, _, data in items if event != "sync"]


async def test_post_a_message_then_read_its_run_to_the_end(runs_server):
    owner = await signed_up(runs_server)
    http = await bearer(owner)
    conversation = await owner.create_conversation()
    r = await http.post(f"/api/conversations/{conversation}/messages/", json={"content": "hello"})
    assert r.status_code == 202, r.text
    body = r.json()
    assert set(body) == {"status", "runId", "seq"} and body["status"] == "started" and body["seq"] == 1
    items = await read_sse(http, f"/api/conversations/{conversation}/stream/?after=0&until=complete")
    stored = await owner.events(conversation)
    assert frames_of(items) == stored  # exactly the stored frames, as the WebSocket sends them
    assert [i for event, i, _ in items if event != "sync"] == [str(f["seq"]) for f in stored]
    assert stored[0]["type"] == "user_message" and stored[0]["runId"] == body["runId"]
    assert stored[-1]["type"] == "complete" and items[-1][0] == "complete"
    # after and Last-Event-ID (which wins); one sync without an id.
    items = await read_sse(
        http, f"/api/conversations/{conversation}/stream/?after=1", stop=lambda got: got[-1][0] == "sync"
    )
    assert frames_of(items) == stored[1:]
    # (the sync event carries no id: a client's last event id stays the last event's)
    assert items[-1][1] == str(stored[-1]["seq"]) and items[-1][2]["lastSeq"] == stored[-1]["seq"]
    assert items[-1][2]["running"] is False
    items = await read_sse(
        http,
        f"/api/conversations/{conversation}/stream/?after=1",
        headers={"Last-Event-ID": str(stored[-2]["seq"])},
        stop=lambda got: got[-1][0] == "sync",
    )
    assert frames_of(items) == stored[-1:]
    await http.aclose()
    await owner.aclose()


async def test_sse_and_websocket_watch_the_same_run_and_get_the_stored_events(runs_server, replies):
    owner = await signed_up(runs_server)
    http = await bearer(owner)
    conversation = await owner.create_conversation()
    replies.set("slow sse", slow_text_reply("w " * 200, chunks=60, delay=0.02))
    sock = await owner.socket(conversation)
    await sock.sync()
    got_sync = asyncio.Event()

    async def stream():
        items = []
        async with aconnect_sse(http, "GET", f"/api/conversations/{conversation}/stream/?until=complete") as source:
            async for sse in source.aiter_sse():
                items.append((sse.event, sse.id, json.loads(sse.data)))
                if sse.event == "sync":
                    got_sync.set()
        return items

    reader = asyncio.create_task(stream())
    await asyncio.wait_for(got_sync.wait(), 15)
    r = await http.post(f"/api/conversations/{conversation}/messages/", json={"content": "slow sse"})
    assert r.status_code == 202
    # A second message while it runs: 409.
    r = await http.post(f"/api/conversations/{conversation}/messages/", json={"content": "again"})
    assert (r.status_code, r.json()["error"]["code"]) == (409, "RUN_IN_PROGRESS")
    items = await asyncio.wait_for(reader, 30)
    ws_frames = events_only(await sock.until_complete())
    stored = await owner.events(conversation)
    assert frames_of(items) == stored == ws_frames
    seqs = [f["seq"] for f in stored]
    assert seqs == list(range(1, len(seqs) + 1))
    await sock.ws.close()
    await http.aclose()
    await owner.aclose()


async def test_refusals_carry_the_frame_codes(runs_server):
    owner, other = await signed_up(runs_server), await signed_up(runs_server)
    http, other_http = await bearer(owner), await bearer(other)
    conversation = await owner.create_conversation()
    path = f"/api/conversations/{conversation}/messages/"

    async def refused(client, body, status, code, *, raw=None, where=path):
        r = await client.post(where, content=raw) if raw is not None else await client.post(where, json=body)
        assert r.status_code == status, r.text
        assert r.json()["error"]["code"] == code and r.json()["error"]["message"]

    await refused(http, {"content": "x" * 101}, 413, "TOO_LARGE")
    await refused(http, {}, 400, "BAD_REQUEST")
    await refused(http, {"content": "   "}, 400, "BAD_REQUEST")
    await refused(http, {"content": 5}, 400, "BAD_REQUEST")
    await refused(http, None, 400, "BAD_REQUEST", raw=b'{"content": "bad \\ud800"}')
    await refused(http, {"content": "nul \x00"}, 400, "BAD_REQUEST")
    await refused(http, {"content": "hi", "parentSeq": True}, 400, "BAD_REQUEST")
    await refused(http, {"content": "hi", "parentSeq": 2**70}, 400, "BAD_REQUEST")
    await refused(http, {"content": "hi", "parentSeq": 99}, 400, "BAD_REQUEST")
    await refused(http, {"content": "hi", "attachments": "x"}, 400, "BAD_REQUEST")
    await refused(http, {"content": "hi", "attachments": ["../../etc/passwd"]}, 400, "BAD_REQUEST")
    await refused(http, None, 400, "BAD_REQUEST", raw=b"[1]")
    await refused(http, None, 400, "BAD_REQUEST", raw=b"{not json")
    await refused(http, None, 400, "BAD_REQUEST", raw=b"[" * 5000 + b"]" * 5000)
    # Another user's conversation is a missing one, on every route.
    await refused(other_http, {"content": "hi"}, 404, "NOT_FOUND")
    await refused(other_http, {}, 404, "NOT_FOUND", where=f"/api/conversations/{conversation}/cancel/")
    r = await other_http.get(f"/api/conversations/{conversation}/stream/")
    assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND"
    r = await httpx.AsyncClient(base_url=runs_server.base).get(f"/api/conversations/{conversation}/stream/")
    assert r.status_code == 401
    assert (await owner.events(conversation)) == []
    for client in (http, other_http, owner, other):
        await client.aclose()


async def test_rate_limit_and_quota_are_429(limited_server, quota_server, replies):
    owner = await signed_up(limited_server)
    http = await bearer(owner)
    conversation = await owner.create_conversation()
    items_path = f"/api/conversations/{conversation}/stream/?until=complete"
    assert (await http.post(f"/api/conversations/{conversation}/messages/", json={"content": "one"})).status_code == 202
    await read_sse(http, items_path)
    r = await http.post(f"/api/conversations/{conversation}/messages/", json={"content": "two"})
    assert (r.status_code, r.json()["error"]["code"]) == (429, "RATE_LIMITED")
    quota_owner = await signed_up(quota_server)
    quota_http = await bearer(quota_owner)
    conversation = await quota_owner.create_conversation()
    usage = {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}
    replies.set(
        "a", {"chunks": [{"delta": {"content": "hi"}}, {"delta": {}, "finish_reason": "stop"}, {"usage": usage}]}
    )
    assert (
        await quota_http.post(f"/api/conversations/{conversation}/messages/", json={"content": "a"})
    ).status_code == 202
    await read_sse(quota_http, f"/api/conversations/{conversation}/stream/?until=complete")
    r = await quota_http.post(f"/api/conversations/{conversation}/messages/", json={"content": "b"})
    assert (r.status_code, r.json()["error"]["code"]) == (429, "QUOTA_EXCEEDED")
    for client in (http, owner, quota_http, quota_owner):
        await client.aclose()


async def test_cancel_over_http_with_a_session_and_csrf(runs_server, replies):
    owner = await signed_up(runs_server)
    conversation = await owner.create_conversation()
    replies.set("cancel me", slow_text_reply("w " * 500, chunks=200, delay=0.05))
    # A session needs its CSRF token: without it, 403.
    r = await owner.http.post(owner.url(f"/api/conversations/{conversation}/messages/"), json={"content": "cancel me"})
    assert r.status_code == 403
    r = await owner.api("POST", f"/api/conversations/{conversation}/messages/", json_body={"content": "cancel me"})
    assert r.status_code == 202, r.text
    r = await owner.api("POST", f"/api/conversations/{conversation}/cancel/")
    assert (r.status_code, r.json()) == (202, {"cancelled": True, "cleared": 0})
    items = await read_sse(owner.http, owner.url(f"/api/conversations/{conversation}/stream/?until=complete"))
    assert items[-1][2]["status"] == "cancelled"
    await owner.aclose()


async def test_approval_answered_over_http(runs_server, replies):
    owner = await signed_up(runs_server)
    http = await bearer(owner)
    conversation = await owner.create_conversation()
    replies.set("approve http", tool_call_reply(("calculator", {"expression": "6*7"})), text_reply("done"))
    r = await http.post(f"/api/conversations/{conversation}/messages/", json={"content": "approve http"})
    run_id = r.json()["runId"]
    items = await read_sse(
        http, f"/api/conversations/{conversation}/stream/", stop=lambda got: got[-1][0] == "approval_request"
    )
    assert items[-1][2]["toolCallId"] == "call_0"
    path = f"/api/runs/{run_id}/approval/"
    r = await http.post(path, json={"toolCallId": "call_0", "decision": "maybe"})
    assert (r.status_code, r.json()["error"]["code"]) == (400, "BAD_REQUEST")
    r = await http.post(path, json={"toolCallId": "call_9", "decision": "approve"})
    assert (r.status_code, r.json()["error"]["code"]) == (400, "BAD_REQUEST")
    r = await http.post(path, json={"toolCallId": "call_0", "decision": "approve", "reason": "x" * 2000})
    assert (r.status_code, r.json()["error"]["code"]) == (413, "TOO_LARGE")
    r = await http.post(path, json={"toolCallId": "call_0", "decision": "approve", "reason": "fine"})
    assert r.status_code == 202, r.text
    items = await read_sse(http, f"/api/conversations/{conversation}/stream/?until=complete")
    kinds = [event for event, _, _ in items]
    assert "approval_result" in kinds and "tool_end" in kinds and items[-1][2]["status"] == "succeeded"
    r = await http.post(path, json={"toolCallId": "call_0", "decision": "deny"})
    assert (r.status_code, r.json()["error"]["code"]) == (409, "ALREADY_ANSWERED")
    other_http = await bearer(await signed_up(runs_server))
    r = await other_http.post(path, json={"toolCallId": "call_0", "decision": "deny"})
    assert r.status_code == 404
    # The next run asks with the same id (call_0 again): the first run's route cannot answer it.
    replies.set("approve again", tool_call_reply(("calculator", {"expression": "1+1"})), text_reply("done"))
    r = await http.post(f"/api/conversations/{conversation}/messages/", json={"content": "approve again"})
    second, after = r.json()["runId"], r.json()["seq"]
    await read_sse(
        http,
        f"/api/conversations/{conversation}/stream/?after={after}",
        stop=lambda got: got[-1][0] == "approval_request",
    )
    r = await http.post(path, json={"toolCallId": "call_0", "decision": "deny"})
    assert (r.status_code, r.json()["error"]["code"]) == (409, "ALREADY_ANSWERED")
    r = await http.post(f"/api/runs/{second}/approval/", json={"toolCallId": "call_0", "decision": "deny"})
    assert r.status_code == 202
    items = await read_sse(http, f"/api/conversations/{conversation}/stream/?after={after}&until=complete")
    results = [data for event, _, data in items if event == "approval_result"]
    assert [(f["runId"], f["decision"]) for f in results] == [(second, "denied")]
    await other_http.aclose()
    await http.aclose()
    await owner.aclose()


async def test_revoking_the_token_ends_its_stream(runs_server):
    owner = await signed_up(runs_server)
    http = await bearer(owner)
    conversation = await owner.create_conversation()
    synced = asyncio.Event()

    async def stream():
        async with aconnect_sse(http, "GET", f"/api/conversations/{conversation}/stream/") as source:
            async for sse in source.aiter_sse():
                if sse.event == "sync":
                    synced.set()

    reader = asyncio.create_task(stream())
    await asyncio.wait_for(synced.wait(), 15)
    r = await owner.api("DELETE", f"/api/tokens/{http.token_id}/")
    assert r.status_code in (200, 204), r.text
    await asyncio.wait_for(reader, 3)  # by the push: the re-check would take 5 s
    await http.aclose()
    await owner.aclose()


async def test_logging_out_ends_the_sessions_stream(runs_server):
    owner = await signed_up(runs_server)
    conversation = await owner.create_conversation()
    synced = asyncio.Event()

    async def stream():
        url = owner.url(f"/api/conversations/{conversation}/stream/")
        async with aconnect_sse(owner.http, "GET", url) as source:
            async for sse in source.aiter_sse():
                if sse.event == "sync":
                    synced.set()

    reader = asyncio.create_task(stream())
    await asyncio.wait_for(synced.wait(), 15)
    r = await owner.http.post(owner.url("/accounts/logout/"), headers=owner._unsafe_headers())
    assert r.status_code == 302
    await asyncio.wait_for(reader, 3)
    await owner.aclose()


@pytest.fixture(scope="module")
def fresh_server(databases, make_server):
    """A process that has run nothing yet: its first run is started by the request below."""
    return make_server(databases.new(), name="runs-http-fresh", AGENT_TOOL_RATE_LIMIT="60")


async def test_a_run_first_started_over_http_outlives_its_request(fresh_server, replies):
    """The run (and the start queue under it) must not keep the request's context: Django runs an
    async view under async_to_sync, whose thread executor quits with the request; a tool's
    database read (the per-user tool rate limit) then failed with "CurrentThreadExecutor already
    quit" (found by driving the demo with curl)."""
    owner = await signed_up(fresh_server)
    http = await bearer(owner)
    conversation = await owner.create_conversation()
    replies.set("first over http", tool_call_reply(("calculator", {"expression": "6*7"})), text_reply("42"))
    r = await http.post(f"/api/conversations/{conversation}/messages/", json={"content": "first over http"})
    assert r.status_code == 202, r.text
    items = await read_sse(http, f"/api/conversations/{conversation}/stream/?after=0&until=complete")
    ends = [data for event, _, data in items if event == "tool_end"]
    assert [(e["result"], e["isError"]) for e in ends] == [("42", False)]
    assert items[-1][2]["status"] == "succeeded"
    await http.aclose()
    await owner.aclose()


async def test_a_reconnect_by_last_event_id_in_the_middle_of_a_run_loses_and_doubles_nothing(runs_server, replies):
    """The stream drops mid-run and comes back with `Last-Event-ID` (as EventSource does), while a
    WebSocket watches the same run: both end with exactly the stored events."""
    owner = await signed_up(runs_server)
    http = await bearer(owner)
    conversation = await owner.create_conversation()
    replies.set("reconnect mid run", slow_text_reply("r " * 300, chunks=80, delay=0.03))
    sock = await owner.socket(conversation)
    await sock.sync()
    r = await http.post(f"/api/conversations/{conversation}/messages/", json={"content": "reconnect mid run"})
    assert r.status_code == 202
    first: list = []
    async with aconnect_sse(http, "GET", f"/api/conversations/{conversation}/stream/?after=0") as source:
        async for sse in source.aiter_sse():
            first.append((sse.event, sse.id, json.loads(sse.data)))
            if sum(event == "text" for event, _, _ in first) >= 5:
                break  # the connection drops here, in the middle of the run
    last_id = [i for event, i, _ in first if i][-1]
    assert not any(event == "complete" for event, _, _ in first)
    second = await read_sse(
        http, f"/api/conversations/{conversation}/stream/?until=complete", headers={"Last-Event-ID": last_id}
    )
    ws_frames = events_only(await sock.until_complete())
    stored = await owner.events(conversation)
    joined = frames_of(first) + frames_of(second)
    assert joined == stored == ws_frames
    assert [f["seq"] for f in joined] == list(range(1, len(stored) + 1))
    assert "".join(f["content"] for f in joined if f["type"] == "text") == "r " * 300
    await sock.ws.close()
    await http.aclose()
    await owner.aclose()
