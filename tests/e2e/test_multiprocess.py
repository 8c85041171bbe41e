"""Two daphne processes on one PostgreSQL database and one Redis: live frames cross
processes, a killed process loses no received frame and its run is reaped by the
other (closed `interrupted` when it may not resume), and a cancel reaches a run wherever it runs."""

from __future__ import annotations

import asyncio
import time

import pytest
from websockets.exceptions import ConnectionClosed

from tests.fakellm import tool_call_reply

from .conftest import ON_POSTGRES, REDIS_URL
from .harness import Client, answer_text, assert_contiguous, events_only, run_text, slow_text_reply

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.skipif(not (ON_POSTGRES and REDIS_URL), reason="needs DATABASE_URL=postgres://... and REDIS_URL"),
]


@pytest.fixture(scope="module")
def shared_database(databases):
    return databases.new()


@pytest.fixture(scope="module")
def server_a(shared_database, make_server):
    return make_server(shared_database, name="A")


@pytest.fixture(scope="module")
def server_b(shared_database, make_server):
    return make_server(shared_database, name="B")


@pytest.fixture
async def alice(server_a, server_b):
    client = await Client(server_a).signup()
    yield client
    await client.aclose()


async def test_a_watcher_on_b_sees_exactly_the_frames_of_a_run_started_on_a(alice, server_a, server_b, replies):
    answer = answer_text(80, "m")
    message = replies.set(
        "across processes",
        {
            "chunks": [
                {"delta": {"reasoning_content": "let me think "}},
                {
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_0",
                                "type": "function",
                                "function": {"name": "calculator", "arguments": ""},
                            }
                        ]
                    }
                },
                {"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"expression": "6*7"}'}}]}},
                {"delta": {}, "finish_reason": "tool_calls"},
            ],
            "delay": 0.01,
        },
        slow_text_reply(answer, chunks=80, delay=0.02),
    )
    conversation = await alice.create_conversation()
    on_a = await alice.socket(conversation, server=server_a)
    on_b = await alice.socket(conversation, server=server_b)
    await on_a.sync()
    await on_b.sync()

    await on_a.message(message)
    seen_a, seen_b = await asyncio.gather(on_a.until_complete(), on_b.until_complete())
    seen_a, seen_b = events_only(seen_a), events_only(seen_b)
    await on_a.close()
    await on_b.close()

    assert seen_b == seen_a
    assert_contiguous(seen_b)
    assert {"thinking", "tool_start", "tool_end", "text"} <= {f["type"] for f in seen_b}
    assert run_text(seen_b) == answer
    assert seen_b[-1]["status"] == "succeeded"
    assert seen_b == await alice.events(conversation, server=server_b)


async def test_cancel_through_b_stops_a_run_on_a(alice, server_a, server_b, replies):
    answer = answer_text(200, "q")
    message = replies.set("cancel across", slow_text_reply(answer, chunks=200, delay=0.05))  # ~10 s
    conversation = await alice.create_conversation()
    on_a = await alice.socket(conversation, server=server_a)
    on_b = await alice.socket(conversation, server=server_b)
    await on_a.sync()
    await on_b.sync()

    started = time.monotonic()
    await on_a.message(message)
    await on_b.until(lambda f: f.get("type") == "text", timeout=10)
    await on_b.send({"type": "cancel"})
    await asyncio.gather(on_a.until_complete(timeout=10), on_b.until_complete(timeout=10))
    elapsed = time.monotonic() - started
    seen_a, seen_b = events_only(on_a.frames), events_only(on_b.frames)
    await on_a.close()
    await on_b.close()

    assert elapsed < 7, f"the cancel did not stop the run on A (took {elapsed:.1f}s)"
    assert seen_a == seen_b
    assert [f["code"] for f in seen_b if f["type"] == "error"] == ["CANCELLED"]
    assert seen_b[-1] == {**seen_b[-1], "type": "complete", "status": "cancelled"}
    assert len(run_text(seen_b)) < len(answer)
    assert seen_b == await alice.events(conversation, server=server_b)


async def test_kill_9_of_a_loses_no_frame_and_b_reaps_the_run(databases, make_server, replies):
    # A pair of its own, so that B is the only process left that can reap A's run.
    database = databases.new()
    # No resume allowed: past AGENT_MAX_RESUMES a dead process's run is closed `interrupted`
    # (test_durable_runs.py has the runs that go on).
    doomed = make_server(database, name="A-doomed", AGENT_MAX_RESUMES="0")
    server_b = make_server(database, name="B-reaper", AGENT_MAX_RESUMES="0")
    client = await Client(doomed).signup()
    try:
        answer = answer_text(400, "z")
        message = replies.set("kill the server", slow_text_reply(answer, chunks=400, delay=0.05))  # ~20 s
        after_kill = replies.set("still usable?", slow_text_reply("Yes, still here.", chunks=4, delay=0.01))
        conversation = await client.create_conversation()
        on_a = await client.socket(conversation, server=doomed)
        watcher = await client.socket(conversation, server=server_b)
        await on_a.sync()
        await watcher.sync()

        await on_a.message(message)
        await on_a.until(lambda f: len([g for g in on_a.frames if g.get("type") == "text"]) >= 5, timeout=10)
        doomed.kill()
        killed_at = time.monotonic()
        try:  # frames already on their way before the kill still count as received
            while True:
                await on_a.recv(timeout=5)
        except (ConnectionClosed, TimeoutError):
            pass
        received_on_a = events_only(on_a.frames)

        # B's reaper closes the dead process's run; the watcher on B is told.
        await watcher.until_complete(timeout=30)
        reaped_in = time.monotonic() - killed_at
        seen_b = events_only(watcher.frames)
        stored = await client.events(conversation, server=server_b)

        # The conversation is usable through B.
        await watcher.message(after_kill)
        second_run = events_only(await watcher.until_complete(timeout=20))
        await watcher.close()
    finally:
        await client.aclose()

    assert len(received_on_a) >= 6
    assert all(stored[f["seq"] - 1] == f for f in received_on_a), "a frame the client received is not in the DB"
    assert reaped_in < 30
    assert f"closed run {received_on_a[0]['runId']} of a dead process" in server_b.log(tail=None)
    assert_contiguous(stored)
    assert seen_b == stored
    assert [e["type"] for e in stored].count("complete") == 1
    assert stored[-1] == {**stored[-1], "type": "complete", "status": "interrupted"}
    assert stored[-2] == {**stored[-2], "type": "error", "code": "INTERRUPTED"}
    assert len(run_text(stored)) < len(answer)

    assert second_run[0] == {**second_run[0], "type": "user_message", "content": after_kill}
    assert second_run[0]["seq"] == stored[-1]["seq"] + 1
    assert second_run[-1] == {**second_run[-1], "type": "complete", "status": "succeeded"}
    assert run_text(second_run) == "Yes, still here."


async def test_a_message_queued_through_b_starts_on_a_after_its_run(alice, server_a, server_b, replies):
    """docs/protocol.md, "Queued messages": a message queued through B behind a run on A starts
    in A's transaction of that run's complete (A stores it); an unqueue through B of another one
    wins against it; both sockets see the same log."""
    first = replies.set("queue across", slow_text_reply(answer_text(60, "w"), chunks=60, delay=0.05))  # ~3 s
    waiting = replies.set("queued through b", slow_text_reply("After the first.", chunks=3))
    conversation = await alice.create_conversation()
    on_a = await alice.socket(conversation, server=server_a)
    on_b = await alice.socket(conversation, server=server_b)
    await on_a.sync()
    await on_b.sync()
    await on_a.message(first)
    await on_b.until(lambda f: f.get("type") == "text", timeout=10)
    await on_b.send({"type": "message", "content": waiting, "whileRunning": "queue"})
    queued = (await on_b.until(lambda f: f.get("type") == "queued"))[-1]
    await on_b.send({"type": "message", "content": "withdrawn", "whileRunning": "queue"})
    withdrawn = (await on_b.until(lambda f: f.get("type") == "queued" and f["content"] == "withdrawn"))[-1]
    await on_b.send({"type": "unqueue", "queueId": withdrawn["queueId"]})
    both = [on_a, on_b]
    await asyncio.gather(
        *(s.until(lambda f, s=s: [g.get("type") for g in s.frames].count("complete") >= 2, timeout=30) for s in both)
    )
    seen_a, seen_b = events_only(on_a.frames), events_only(on_b.frames)
    await on_a.close()
    await on_b.close()
    assert seen_a == seen_b == await alice.events(conversation, server=server_b)
    assert_contiguous(seen_b)
    completes = [f for f in seen_b if f["type"] == "complete"]
    start = next(f for f in seen_b if f["type"] == "user_message" and f.get("queueId"))
    assert (start["queueId"], start["content"], start["seq"]) == (queued["queueId"], waiting, completes[0]["seq"] + 1)
    assert [(f["queueId"], f["reason"]) for f in seen_b if f["type"] == "unqueued"] == [
        (withdrawn["queueId"], "withdrawn")
    ]
    assert [f["content"] for f in seen_b if f["type"] == "user_message"] == [first, waiting]
    assert run_text([f for f in seen_b if f["runId"] == start["runId"]]) == "After the first."


async def test_a_steer_sent_through_b_is_taken_in_by_the_run_on_a(alice, server_a, server_b, replies):
    """docs/protocol.md, "Steering": the steer's row and `steer` event are stored by B; the run on
    A claims it from the database before its next model call, whose request holds it."""
    first = replies.set("steer across", tool_call_reply(("calculator", {"expression": "2*21"}), delay=0.5))
    steer = replies.set("answer in words", slow_text_reply("Forty-two.", chunks=2))
    conversation = await alice.create_conversation()
    on_a = await alice.socket(conversation, server=server_a)
    on_b = await alice.socket(conversation, server=server_b)
    await on_a.sync()
    await on_b.sync()
    await on_a.message(first)
    await on_b.until(lambda f: f.get("type") == "user_message", timeout=10)
    await on_b.send({"type": "message", "content": steer, "whileRunning": "steer"})
    await asyncio.gather(*(s.until(lambda f: f.get("type") == "complete", timeout=30) for s in (on_a, on_b)))
    seen_a, seen_b = events_only(on_a.frames), events_only(on_b.frames)
    await on_a.close()
    await on_b.close()
    assert seen_a == seen_b == await alice.events(conversation, server=server_a)
    kinds = [f["type"] for f in seen_b]
    assert kinds.index("tool_end") < kinds.index("steer_applied") < kinds.index("text")
    steered = next(f for f in seen_b if f["type"] == "steer")
    applied = next(f for f in seen_b if f["type"] == "steer_applied")
    assert steered["queueId"] == applied["queueId"] and steered["runId"] == applied["runId"] == seen_b[0]["runId"]
    assert run_text(seen_b) == "Forty-two." and seen_b[-1]["status"] == "succeeded"
