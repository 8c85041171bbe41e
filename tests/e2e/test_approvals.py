"""Approvals through a real daphne (docs/protocol.md, "Approvals"): the fake model calls `calculator`, which
AGENT_APPROVAL_TOOLS gates; the owner's sockets answer with `approve` frames."""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.exceptions import ConnectionClosed

from tests.fakellm import text_reply, tool_call_reply

from .conftest import ON_POSTGRES, REDIS_URL
from .harness import Client, events_only

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def gated(databases, make_server):
    return make_server(databases.new(), name="approvals", AGENT_APPROVAL_TOOLS="calc*", AGENT_APPROVAL_TIMEOUT="120")


@pytest.fixture(scope="module")
def hasty(databases, make_server):
    """Requests expire after 2 s."""
    return make_server(databases.new(), name="approvals-hasty", AGENT_APPROVAL_TOOLS="calculator",
                       AGENT_APPROVAL_TIMEOUT="2")  # fmt: skip


@pytest.fixture
async def owner(gated):
    client = await Client(gated).signup()
    yield client
    await client.aclose()


def is_type(kind):
    return lambda f: f.get("type") == kind and "seq" in f


async def sync_of(owner, conversation) -> dict:
    """The sync frame a socket connecting now gets."""
    sock = await owner.socket(conversation)
    _, sync = await sock.sync()
    await sock.ws.close()
    return sync


async def start(owner, replies, message, *calls, answer="done", asked=None):
    """A conversation whose run waits on approval; returns (conversation, socket, requests)."""
    replies.set(message, tool_call_reply(*calls), text_reply(answer))
    conversation = await owner.create_conversation()
    sock = await owner.socket(conversation)
    await sock.sync()
    await sock.message(message)
    asked = len(calls) if asked is None else asked
    frames = await sock.until(lambda f: sum(1 for g in sock.frames if is_type("approval_request")(g)) == asked)
    return conversation, sock, [f for f in frames if is_type("approval_request")(f)]


async def test_approve_runs_the_tool(owner, replies, e2e_llm):
    conversation, sock, [req] = await start(owner, replies, "approve 6*7", ("calculator", {"expression": "6*7"}))
    assert (req["toolName"], req["toolCallId"], json.loads(req["arguments"])) == (
        "calculator",
        "call_0",
        {"expression": "6*7"},
    )
    assert req["expiresAt"].endswith("Z")
    await sock.send({"type": "approve", "toolCallId": "call_0", "decision": "approve"})
    events = events_only(await sock.until_complete())
    kinds = [e["type"] for e in events]
    assert kinds[:3] == ["approval_result", "tool_start", "tool_end"]
    assert events[0]["decision"] == "approved"
    assert events[2]["result"] == "42" and not events[2]["isError"]
    assert events[-1]["status"] == "succeeded"
    # A second answer, now that the request is closed, is refused.
    await sock.send({"type": "approve", "toolCallId": "call_0", "decision": "deny"})
    error = await sock.recv()
    assert (error["type"], error["code"], "seq" in error) == ("error", "ALREADY_ANSWERED", False)
    await sock.ws.close()
    stored = await owner.events(conversation)
    assert [e["type"] for e in stored].count("approval_result") == 1


async def test_deny_with_a_reason_reaches_the_model(owner, replies, e2e_llm):
    conversation, sock, _ = await start(owner, replies, "deny 1+1", ("calculator", {"expression": "1+1"}))
    await sock.send({"type": "approve", "toolCallId": "call_0", "decision": "deny", "reason": "use your head"})
    events = events_only(await sock.until_complete())
    await sock.ws.close()
    assert [e["type"] for e in events][:2] == ["approval_result", "tool_end"]
    assert (events[0]["decision"], events[0]["reason"]) == ("denied", "use your head")
    denial = json.dumps({"error": "denied by the user: use your head"})
    assert (events[1]["result"], events[1]["isError"]) == (denial, True)
    assert "tool_start" not in [e["type"] for e in events]
    assert events[-1]["status"] == "succeeded"
    followup = [r for r in e2e_llm.requests if any(m.get("content") == "deny 1+1" for m in r["messages"])][-1]
    assert followup["messages"][-1] == {"role": "tool", "tool_call_id": "call_0", "content": denial}
    assert followup["messages"][-2]["tool_calls"][0]["function"]["name"] == "calculator"


async def test_a_second_tab_answers_and_both_see_it_and_a_late_answer_is_refused(owner, replies):
    conversation, first, _ = await start(owner, replies, "two tabs", ("calculator", {"expression": "2*2"}))
    second = await owner.socket(conversation)
    replay, sync = await second.sync()
    assert sync["running"] is True and sync["pendingApprovals"] == ["call_0"]
    assert replay[-1]["type"] == "approval_request"
    await second.send({"type": "approve", "toolCallId": "call_0", "decision": "approve"})
    await second.send({"type": "approve", "toolCallId": "call_0", "decision": "deny"})
    late = await second.until(lambda f: f.get("type") == "error" and "seq" not in f)
    assert late[-1]["code"] == "ALREADY_ANSWERED"
    for sock in (first, second):
        events = events_only(await sock.until_complete())
        assert [e for e in sock.frames if is_type("approval_result")(e)][0]["decision"] == "approved"
        assert events[-1]["status"] == "succeeded"
        await sock.ws.close()


async def test_reconnect_while_pending_then_answer(owner, replies):
    conversation, sock, [req] = await start(owner, replies, "reconnect", ("calculator", {"expression": "3*3"}))
    await sock.ws.close()
    again = await owner.socket(conversation, after=req["seq"])
    replay, sync = await again.sync()
    assert replay == [] and sync["pendingApprovals"] == ["call_0"] and sync["lastSeq"] == req["seq"]
    await again.send({"type": "approve", "toolCallId": "call_0", "decision": "approve"})
    events = events_only(await again.until_complete())
    assert events[0]["type"] == "approval_result" and events[-1]["status"] == "succeeded"
    after = await sync_of(owner, conversation)
    assert after["running"] is False and after["pendingApprovals"] == []
    await again.ws.close()


async def test_two_parallel_approvals_are_asked_together(owner, replies, e2e_llm):
    conversation, sock, requests = await start(
        owner,
        replies,
        "two at once",
        ("calculator", {"expression": "1+2"}),
        ("current_time", {}),
        ("calculator", {"expression": "3+4"}),
        asked=2,
    )
    assert [r["toolCallId"] for r in requests] == ["call_0", "call_2"]
    sync = await sync_of(owner, conversation)
    assert sync["pendingApprovals"] == ["call_0", "call_2"]
    # Nothing starts before both are answered, not even the call that needs no approval.
    assert not [f for f in sock.frames if f.get("type") == "tool_start"]
    await sock.send({"type": "approve", "toolCallId": "call_2", "decision": "approve"})
    await sock.until(is_type("approval_result"))
    await asyncio.sleep(0.3)
    assert not [f for f in sock.frames if f.get("type") == "tool_start"]
    await sock.send({"type": "approve", "toolCallId": "call_0", "decision": "deny"})
    events = events_only(await sock.until_complete())
    await sock.ws.close()
    starts = [e["toolCallId"] for e in events if e["type"] == "tool_start"]
    ends = {e["toolCallId"]: e for e in events if e["type"] == "tool_end"}
    assert sorted(starts) == ["call_1", "call_2"]
    assert ends["call_2"]["result"] == "7"
    assert ends["call_0"]["result"] == json.dumps({"error": "denied by the user: no reason given"})
    followup = [r for r in e2e_llm.requests if any(m.get("content") == "two at once" for m in r["messages"])][-1]
    assert {m["tool_call_id"] for m in followup["messages"] if m["role"] == "tool"} == {"call_0", "call_1", "call_2"}


async def test_cancel_while_waiting(owner, replies):
    conversation, sock, _ = await start(owner, replies, "cancel me", ("calculator", {"expression": "5*5"}))
    await sock.send({"type": "cancel"})
    events = events_only(await sock.until_complete())
    assert [(e["type"], e.get("decision") or e.get("code") or e.get("status")) for e in events] == [
        ("approval_result", "denied"),
        ("tool_end", None),
        ("error", "CANCELLED"),
        ("complete", "cancelled"),
    ]
    await sock.send({"type": "approve", "toolCallId": "call_0", "decision": "approve"})
    assert (await sock.recv())["code"] == "ALREADY_ANSWERED"
    sync = await sync_of(owner, conversation)
    assert sync["pendingApprovals"] == [] and sync["running"] is False
    await sock.ws.close()


async def test_bad_approve_frames(owner, replies):
    conversation, sock, _ = await start(owner, replies, "bad frames", ("calculator", {"expression": "8*8"}))
    bad = [
        ({"type": "approve", "decision": "approve"}, "BAD_REQUEST"),
        ({"type": "approve", "toolCallId": "call_0", "decision": "yes"}, "BAD_REQUEST"),
        ({"type": "approve", "toolCallId": "call_0", "decision": "deny", "reason": 3}, "BAD_REQUEST"),
        ({"type": "approve", "toolCallId": "call_0", "decision": "deny", "reason": "x" * 1001}, "TOO_LARGE"),
        ({"type": "approve", "toolCallId": "nope", "decision": "approve"}, "BAD_REQUEST"),
    ]
    for frame, code in bad:
        await sock.send(frame)
        reply = await sock.recv()
        assert (reply["type"], reply["code"]) == ("error", code), frame
    sync = await sync_of(owner, conversation)
    assert sync["pendingApprovals"] == ["call_0"]  # none of them answered it
    await sock.send({"type": "approve", "toolCallId": "call_0", "decision": "approve"})
    assert events_only(await sock.until_complete())[-1]["status"] == "succeeded"
    await sock.ws.close()


async def test_another_user_cannot_connect_to_answer(owner, replies, gated):
    conversation, sock, _ = await start(owner, replies, "not yours", ("calculator", {"expression": "9*9"}))
    stranger = await Client(gated).signup()
    try:
        theirs = await stranger.socket(conversation)
        with pytest.raises(ConnectionClosed) as closed:
            await theirs.recv(timeout=5)
        assert closed.value.rcvd.code == 4404
        assert theirs.frames == []
        with pytest.raises(ConnectionClosed):
            await theirs.send({"type": "approve", "toolCallId": "call_0", "decision": "approve"})
    finally:
        await stranger.aclose()
    sync = await sync_of(owner, conversation)
    assert sync["pendingApprovals"] == ["call_0"]
    await sock.send({"type": "approve", "toolCallId": "call_0", "decision": "deny"})
    await sock.until_complete()
    await sock.ws.close()


async def test_an_unanswered_request_expires_as_denied(hasty, replies, e2e_llm):
    client = await Client(hasty).signup()
    try:
        conversation, sock, _ = await start(client, replies, "nobody answers", ("calculator", {"expression": "1"}))
        events = events_only(await sock.until_complete(timeout=30))
        await sock.send({"type": "approve", "toolCallId": "call_0", "decision": "approve"})
        assert (await sock.recv())["code"] == "ALREADY_ANSWERED"
        await sock.ws.close()
    finally:
        await client.aclose()
    assert (events[0]["type"], events[0]["decision"]) == ("approval_result", "expired")
    expired = json.dumps({"error": "denied: nobody approved the call within 2 s"})
    assert (events[1]["type"], events[1]["result"], events[1]["isError"]) == ("tool_end", expired, True)
    assert events[-1]["status"] == "succeeded"


@pytest.mark.multiprocess
@pytest.mark.skipif(not (ON_POSTGRES and REDIS_URL), reason="needs DATABASE_URL=postgres://... and REDIS_URL")
async def test_an_answer_on_another_process_reaches_the_run(databases, make_server, replies):
    """The run waits on A; the owner answers on B, first with an approval, then too late."""
    shared = databases.new()
    a = make_server(shared, name="approvals-A", AGENT_APPROVAL_TOOLS="calculator")
    b = make_server(shared, name="approvals-B", AGENT_APPROVAL_TOOLS="calculator")
    client = await Client(a).signup()
    try:
        conversation, on_a, _ = await start(client, replies, "across processes", ("calculator", {"expression": "6*7"}))
        on_b = await client.socket(conversation, server=b)
        _, sync = await on_b.sync()
        assert sync["pendingApprovals"] == ["call_0"]
        await on_b.send({"type": "approve", "toolCallId": "call_0", "decision": "approve", "reason": "from B"})
        await on_b.send({"type": "approve", "toolCallId": "call_0", "decision": "deny"})
        refused = await on_b.until(lambda f: f.get("type") == "error" and "seq" not in f)
        assert refused[-1]["code"] == "ALREADY_ANSWERED"
        for sock in (on_a, on_b):
            events = events_only(await sock.until_complete())
            assert events[-1]["status"] == "succeeded"
            await sock.ws.close()
        stored = await client.events(conversation)
    finally:
        await client.aclose()
    result = next(e for e in stored if e["type"] == "approval_result")
    assert (result["decision"], result["reason"]) == ("approved", "from B")
    assert next(e for e in stored if e["type"] == "tool_end")["result"] == "42"
