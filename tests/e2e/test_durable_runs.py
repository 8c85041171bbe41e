"""Durable runs (docs/protocol.md, "Run lifecycle") across real daphne processes on PostgreSQL + Redis: a
process killed (kill -9) or stopped (SIGTERM) mid-run, and its run continues in another
process under the same runId, which a client watching through that process sees finish with
the right answer; what it saw live is exactly what is stored and replayed."""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.exceptions import ConnectionClosed

from tests.fakellm import tool_call_reply

from .conftest import ON_POSTGRES, REDIS_URL
from .harness import Client, Socket, answer_text, assert_contiguous, events_only, shell, slow_text_reply
from .test_runs_http import frames_of, read_sse

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.skipif(not (ON_POSTGRES and REDIS_URL), reason="needs DATABASE_URL=postgres://... and REDIS_URL"),
]


def final_answer(frames: list[dict]) -> str:
    """The run's answer: its text after the last error (a failed model call or a resume)."""
    last_error = max((i for i, f in enumerate(frames) if f["type"] == "error"), default=-1)
    return "".join(f["content"] for f in frames[last_error + 1 :] if f["type"] == "text")


def resumed_errors(frames: list[dict]) -> list[dict]:
    return [f for f in frames if f["type"] == "error" and f.get("resumed")]


async def drain_until_closed(sock: Socket) -> None:
    """Whatever the socket still receives before its server is gone."""
    try:
        while True:
            await sock.recv(timeout=5)
    except (ConnectionClosed, TimeoutError):
        pass


async def text_frames(sock: Socket, n: int) -> None:
    await sock.until(lambda f: len([g for g in sock.frames if g.get("type") == "text"]) >= n, timeout=15)


async def check_run(client: Client, conversation: str, watched: list[dict], *, answer: str, resumes: int) -> list[dict]:
    """What a watcher saw live is the whole stored run, and a fresh socket replays exactly that."""
    stored = await client.events(conversation)
    assert watched == stored
    assert_contiguous(stored)
    assert len({f["runId"] for f in stored}) == 1
    assert [f["type"] for f in stored].count("complete") == 1
    assert stored[-1] == {**stored[-1], "type": "complete", "status": "succeeded"}
    assert len(resumed_errors(stored)) == resumes
    assert final_answer(stored) == answer
    starts = [f["toolCallId"] for f in stored if f["type"] == "tool_start"]
    assert sorted(starts) == sorted(f["toolCallId"] for f in stored if f["type"] == "tool_end")
    replay_socket = await client.socket(conversation)
    replay, sync = await replay_socket.sync()
    await replay_socket.close()
    assert replay == stored and sync["running"] is False
    return stored


def stop(*servers) -> None:
    """Free the servers' database connections now rather than at the end of the session."""
    for server in servers:
        server.stop()


@pytest.fixture
async def pair(databases, make_server):
    """Two processes on a database of their own: no other server may take their runs."""
    database = databases.new()
    a = make_server(database, name="A-durable")
    b = make_server(database, name="B-durable")
    client = await Client(a).signup()
    yield a, b, client
    await client.aclose()
    stop(a, b)


async def test_kill_9_mid_stream_the_other_process_finishes_the_run(pair, replies):
    a, b, client = pair
    message = replies.set(
        "durable: kill mid-stream",
        slow_text_reply(answer_text(400, "x"), chunks=400, delay=0.05),  # ~20 s
        slow_text_reply("The resumed answer.", chunks=5, delay=0.01),
    )
    conversation = await client.create_conversation()
    on_a = await client.socket(conversation, server=a)
    on_b = await client.socket(conversation, server=b)
    await on_a.sync()
    await on_b.sync()

    await on_a.message(message)
    await text_frames(on_a, 5)
    a.kill()
    await drain_until_closed(on_a)
    await on_b.until_complete(timeout=40)
    await on_b.close()
    client.server = b

    stored = await check_run(client, conversation, events_only(on_b.frames), answer="The resumed answer.", resumes=1)
    received_on_a = events_only(on_a.frames)
    assert received_on_a == stored[: len(received_on_a)], "a frame the client received is not in the database"
    assert f"resuming run {stored[0]['runId']} of a dead process" in b.log(tail=None)


async def test_kill_9_mid_tool_call_closes_the_call_and_the_model_goes_on(databases, make_server, e2e_llm, replies):
    called = asyncio.Event()

    async def hang(reader, writer):  # a page that never comes: the tool is running when A dies
        called.set()
        await reader.read()
        writer.close()

    slow_site = await asyncio.start_server(hang, "127.0.0.1", 0)
    port = slow_site.sockets[0].getsockname()[1]
    database = databases.new()
    tools = {"AGENT_TOOLS": "calculator,fetch_url", "AGENT_FETCH_ALLOWED_HOSTS": "127.0.0.1"}
    a = make_server(database, name="A-tool", **tools)
    b = make_server(database, name="B-tool", **tools)
    client = await Client(a).signup()
    try:
        message = replies.set(
            "durable: kill mid-tool",
            {
                "chunks": [
                    {"delta": {"content": "Fetching it."}},
                    {
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "call_fetch",
                                    "type": "function",
                                    "function": {"name": "fetch_url", "arguments": ""},
                                }
                            ]
                        }
                    },
                    {
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "function": {"arguments": json.dumps({"url": f"http://127.0.0.1:{port}/slow"})},
                                }
                            ]
                        }
                    },
                    {"delta": {}, "finish_reason": "tool_calls"},
                ]
            },
            slow_text_reply("The page did not load, so here is my answer.", chunks=6, delay=0.01),
        )
        conversation = await client.create_conversation()
        on_a = await client.socket(conversation, server=a)
        on_b = await client.socket(conversation, server=b)
        await on_a.sync()
        await on_b.sync()

        await on_a.message(message)
        await on_b.until(lambda f: f.get("type") == "tool_start", timeout=15)
        await asyncio.wait_for(called.wait(), 15)
        a.kill()
        await drain_until_closed(on_a)
        await on_b.until_complete(timeout=40)
        await on_b.close()
        client.server = b

        stored = await check_run(
            client,
            conversation,
            events_only(on_b.frames),
            answer="The page did not load, so here is my answer.",
            resumes=1,
        )
    finally:
        await client.aclose()
        slow_site.close()
        stop(a, b)

    tool_end = next(f for f in stored if f["type"] == "tool_end")
    assert tool_end == {**tool_end, "toolCallId": "call_fetch", "result": '{"error": "interrupted"}', "isError": True}
    types = [f["type"] for f in stored]
    assert types[:5] == ["user_message", "text", "tool_start", "tool_end", "error"]
    assert set(types[5:-1]) == {"text"}
    # The resumed model call had the partial memory: the message, the call and its result.
    resumed_call = [
        r
        for r in e2e_llm.requests
        if r["messages"][-1].get("role") == "tool" and r["messages"][-1].get("tool_call_id") == "call_fetch"
    ]
    assert resumed_call and resumed_call[-1]["messages"][-3:] == [
        {"role": "user", "content": message},
        {
            "role": "assistant",
            "content": "Fetching it.",
            "tool_calls": [
                {
                    "id": "call_fetch",
                    "type": "function",
                    "function": {
                        "name": "fetch_url",
                        "arguments": json.dumps({"url": f"http://127.0.0.1:{port}/slow"}),
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_fetch", "content": '{"error": "interrupted"}'},
    ]


async def test_sigterm_hands_the_run_over_at_once(databases, make_server, replies):
    database = databases.new()
    a = make_server(database, name="A-sigterm")
    # B's own reaper passes only when it starts, and would wait an hour for a heartbeat:
    # only A's release and its ring can make B take the run.
    b = make_server(database, name="B-rung", AGENT_HEARTBEAT_SECONDS="3600", AGENT_HEARTBEAT_TIMEOUT="7200")
    client = await Client(a).signup()
    try:
        message = replies.set(
            "durable: sigterm",
            slow_text_reply(answer_text(300, "s"), chunks=300, delay=0.05),  # ~15 s
            slow_text_reply("Answered after the deploy.", chunks=5, delay=0.01),
        )
        conversation = await client.create_conversation()
        on_a = await client.socket(conversation, server=a)
        on_b = await client.socket(conversation, server=b)
        await on_a.sync()
        await on_b.sync()

        await on_a.message(message)
        await text_frames(on_a, 3)
        await asyncio.to_thread(a.terminate, 15)
        await drain_until_closed(on_a)
        await on_b.until_complete(timeout=20)
        await on_b.close()
        client.server = b

        stored = await check_run(
            client, conversation, events_only(on_b.frames), answer="Answered after the deploy.", resumes=1
        )
    finally:
        await client.aclose()
        stop(a, b)
    received_on_a = events_only(on_a.frames)
    assert received_on_a == stored[: len(received_on_a)]
    assert "released 1 run(s)" in a.log(tail=None)


async def test_both_processes_killed_in_turn(databases, make_server, replies):
    database = databases.new()
    resumes = {"AGENT_MAX_RESUMES": "2"}
    a = make_server(database, name="A-first", **resumes)
    b = make_server(database, name="B-second", **resumes)
    a_again = None
    client = await Client(a).signup()
    try:
        message = replies.set(
            "durable: two deaths",
            slow_text_reply(answer_text(400, "p"), chunks=400, delay=0.05),
            slow_text_reply(answer_text(400, "q"), chunks=400, delay=0.05),
            slow_text_reply("Third time lucky.", chunks=5, delay=0.01),
        )
        conversation = await client.create_conversation()
        on_a = await client.socket(conversation, server=a)
        on_b = await client.socket(conversation, server=b)
        await on_a.sync()
        await on_b.sync()

        await on_a.message(message)
        await text_frames(on_a, 5)
        a.kill()
        await drain_until_closed(on_a)
        # B resumes the run and streams the second attempt; then B dies too.
        await on_b.until(lambda f: f.get("type") == "text" and len(resumed_errors(on_b.frames)) == 1, timeout=40)
        a_again = make_server(database, name="A-restarted", **resumes)
        on_a_again = await client.socket(conversation, server=a_again)
        await text_frames(on_b, len([f for f in on_b.frames if f.get("type") == "text"]) + 3)
        b.kill()
        await drain_until_closed(on_b)
        await on_a_again.until_complete(timeout=40)
        await on_a_again.close()
        client.server = a_again

        stored = await check_run(
            client, conversation, events_only(on_a_again.frames), answer="Third time lucky.", resumes=2
        )
    finally:
        await client.aclose()
        stop(*(server for server in (a, b, a_again) if server))
    for watcher in (on_a, on_b):  # what each dead process's client saw is in the log, in place
        received = events_only(watcher.frames)
        assert received == stored[: len(received)]
    errors = resumed_errors(stored)
    assert [f["detail"] for f in errors] == ["", ""]  # which processes died is for the log, not the user
    by_seq = {f["seq"]: f for f in stored}
    # Each resume names the first text of the attempt that died: A's, then B's.
    assert [by_seq[f["discards"]]["content"][:5] for f in errors] == ["pw000", "qw000"]


async def test_kill_9_with_a_message_waiting_the_taking_process_starts_it(pair, replies):
    """docs/protocol.md, "Queued messages": a message queued behind a run whose process is
    killed starts in the process that takes the run over, right after the run's complete."""
    a, b, client = pair
    message = replies.set(
        "durable: kill with a message waiting",
        slow_text_reply(answer_text(400, "q"), chunks=400, delay=0.05),  # ~20 s
        slow_text_reply("The resumed answer.", chunks=5, delay=0.01),
    )
    waiting = replies.set("durable: the waiting message", slow_text_reply("The waiting one's answer.", chunks=3))
    conversation = await client.create_conversation()
    on_a = await client.socket(conversation, server=a)
    on_b = await client.socket(conversation, server=b)
    await on_a.sync()
    await on_b.sync()
    await on_a.message(message)
    await text_frames(on_a, 5)
    await on_a.send({"type": "message", "content": waiting, "whileRunning": "queue"})
    queued = (await on_a.until(lambda f: f.get("type") == "queued"))[-1]
    a.kill()
    await drain_until_closed(on_a)
    await on_b.until(lambda f: [g.get("type") for g in on_b.frames].count("complete") >= 2, timeout=60)
    await on_b.close()
    client.server = b
    stored = await client.events(conversation)
    assert_contiguous(stored)
    completes = [f for f in stored if f["type"] == "complete"]
    assert [c["status"] for c in completes] == ["succeeded", "succeeded"]
    start = next(f for f in stored if f["type"] == "user_message" and f.get("queueId") == queued["queueId"])
    assert start["seq"] == completes[0]["seq"] + 1 and start["content"] == waiting
    assert final_answer([f for f in stored if f["runId"] == start["runId"]]) == "The waiting one's answer."
    assert f"resuming run {completes[0]['runId']} of a dead process" in b.log(tail=None)


async def test_kill_9_during_a_child_run_the_other_process_resumes_it_and_its_parent(pair, replies):
    """docs/protocol.md, "Sub-agents": a dead process's top-level run and its running child run
    are taken over together; the child goes on, and its parent's delegate call ends with its
    outcome; each run completes once; a watcher on the other process sees what is stored."""
    a, b, client = pair
    shell(
        a,
        "from chat.models import AgentProfile\n"
        "helper = AgentProfile.objects.create(slug='helper', name='Helper', model='helper-1', everyone=True)\n"
        "boss = AgentProfile.objects.create(slug='boss', name='Boss', model='boss-1', everyone=True)\n"
        "boss.delegates.add(helper)",
    )
    task = "durable: the helper's long task"
    replies.set(task, slow_text_reply(answer_text(400, "h"), chunks=400, delay=0.05), slow_text_reply("Helped."))
    message = replies.set(
        "durable: kill during a child run",
        tool_call_reply(("agent__helper", {"task": task})),
        slow_text_reply("The boss read: Helped.", chunks=4, delay=0.01),
    )
    conversation = await client.create_conversation()
    assert (
        await client.api("PATCH", f"/api/conversations/{conversation}/", json_body={"agent": "boss"})
    ).status_code == 200
    on_a = await client.socket(conversation, server=a)
    on_b = await client.socket(conversation, server=b)
    await on_a.sync()
    await on_b.sync()

    await on_a.message(message)
    await text_frames(on_a, 5)  # the child's: the boss says nothing before its call
    a.kill()
    await drain_until_closed(on_a)
    await on_b.until(lambda f: f.get("type") == "complete" and "parentRunId" not in f, timeout=60)
    await on_b.close()
    client.server = b

    stored = await client.events(conversation)
    assert events_only(on_b.frames) == stored
    assert_contiguous(stored)
    parent_id = stored[0]["runId"]
    child = [f for f in stored if f.get("parentRunId") == parent_id]
    parent = [f for f in stored if f["runId"] == parent_id]
    assert {f["runId"] for f in stored} == {parent_id, child[0]["runId"]}
    assert [f["type"] for f in child].count("complete") == 1 and child[-1]["status"] == "succeeded"
    assert [f["type"] for f in parent].count("complete") == 1 and parent[-1]["status"] == "succeeded"
    assert len(resumed_errors(child)) == 1 and len(resumed_errors(parent)) == 1
    (end,) = [f for f in parent if f["type"] == "tool_end"]
    assert (end["result"], end["isError"]) == ("Helped.", False)
    assert child[-1]["seq"] < end["seq"]
    assert final_answer(parent) == "The boss read: Helped."
    assert f"resuming run {parent_id} of a dead process" in b.log(tail=None)
    # The replays: a fresh socket and SSE give exactly what is stored; SSE's until=complete
    # ends on the top-level run's complete, not on the child's.
    replay_socket = await client.socket(conversation)
    replay, _ = await replay_socket.sync()
    await replay_socket.close()
    assert replay == stored
    items = await read_sse(client.http, client.url(f"/api/conversations/{conversation}/stream/?after=0&until=complete"))
    assert frames_of(items) == stored
