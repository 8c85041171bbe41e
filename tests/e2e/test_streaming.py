"""One daphne, real sockets: resume, fan-out, replay, API parity, runs outliving sockets, cancel."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.fakellm import text_reply, tool_call_reply

from .harness import answer_text, assert_contiguous, events_only, run_text, slow_text_reply

pytestmark = pytest.mark.services


async def _run_to_completion(sock) -> list[dict]:
    """Events of a socket that just synced on an idle conversation, through one whole run."""
    return events_only(await sock.until_complete(timeout=30))


async def test_reconnect_with_after_mid_stream_gives_every_event_exactly_once(user, replies):
    answer = answer_text(100, "r")
    message = replies.set("resume test", slow_text_reply(answer, chunks=100, delay=0.02))
    conversation = await user.create_conversation()

    seen: list[dict] = []
    sock = await user.socket(conversation)
    _, sync = await sock.sync()
    assert sync["lastSeq"] == 0 and sync["running"] is False
    await sock.message(message)
    drops = 0
    while True:
        # Read a few events (the growing windows make ~10 of the run), then drop the socket in the
        # middle of the run and resume.
        frames = await sock.until(
            lambda f, sock=sock: (
                "seq" in f and (f["type"] == "complete" or len([g for g in sock.frames if "seq" in g]) >= 3)
            ),
            timeout=15,
        )
        seen += events_only(frames)
        if seen[-1]["type"] == "complete":
            break
        await sock.close()
        drops += 1
        sock = await user.socket(conversation, after=seen[-1]["seq"])
        replay, sync = await sock.sync()
        seen += replay
        assert sync["lastSeq"] == seen[-1]["seq"]
        if replay and replay[-1]["type"] == "complete":
            break
    await sock.close()

    assert drops >= 2, "the stream ended before the socket could be dropped mid-run"
    assert_contiguous(seen)
    assert seen[0]["type"] == "user_message" and seen[0]["content"] == message
    assert [f["type"] for f in seen].count("complete") == 1
    assert seen[-1] == {**seen[-1], "type": "complete", "status": "succeeded"}
    assert run_text(seen) == answer
    assert seen == await user.events(conversation)


async def test_second_socket_sees_the_same_frames(user, replies):
    answer = answer_text(60, "t")
    message = replies.set("two sockets", slow_text_reply(answer, chunks=60, delay=0.02))
    conversation = await user.create_conversation()
    first, second = await user.socket(conversation), await user.socket(conversation)
    await first.sync()
    await second.sync()

    await first.message(message)
    got_first, got_second = await asyncio.gather(_run_to_completion(first), _run_to_completion(second))

    assert len(got_first) > 5
    assert got_first == got_second
    assert_contiguous(got_first)
    assert run_text(got_first) == answer
    await first.close()
    await second.close()


async def test_replay_equals_what_live_sockets_saw(user, replies):
    message = replies.set(
        "replay test",
        tool_call_reply(("calculator", {"expression": "6*7"})),
        slow_text_reply(answer_text(40, "p"), chunks=40, delay=0.02),
    )
    conversation = await user.create_conversation()
    live = await user.socket(conversation)
    await live.sync()
    await live.message(message)
    seen = await _run_to_completion(live)
    await live.close()

    types = [f["type"] for f in seen]
    assert "tool_start" in types and "tool_end" in types
    tool_end = next(f for f in seen if f["type"] == "tool_end")
    assert tool_end["result"] == "42" and tool_end["isError"] is False

    fresh = await user.socket(conversation, after=0)
    replay, sync = await fresh.sync()
    await fresh.close()
    assert replay == seen
    assert sync == {
        "type": "sync",
        "lastSeq": seen[-1]["seq"],
        "running": False,
        "runId": None,
        "pendingApprovals": [],
        "queue": [],
        "pendingSteers": [],
    }


async def test_api_events_after_equals_websocket_replay_after(user, replies):
    message = replies.set(
        "api parity",
        tool_call_reply(("calculator", {"expression": "2+3"}), ("current_time", {})),
        text_reply("The answer is 5.", piece=2),
    )
    conversation = await user.create_conversation()
    sock = await user.socket(conversation)
    await sock.sync()
    await sock.message(message)
    seen = await _run_to_completion(sock)
    await sock.close()
    last = seen[-1]["seq"]
    assert last >= 6

    for after in sorted({0, 1, 2, last // 2, last - 1, last, last + 5}):
        ws = await user.socket(conversation, after=after)
        replay, sync = await ws.sync()
        await ws.close()
        api = await user.events(conversation, after=after)
        assert api == replay, f"after={after}"
        assert [f["seq"] for f in api] == list(range(after + 1, last + 1))
        if after <= last:
            assert sync["lastSeq"] == last


async def test_run_goes_on_when_every_socket_closes(user, replies):
    answer = answer_text(50, "c")
    message = replies.set("nobody watching", slow_text_reply(answer, chunks=50, delay=0.02))
    conversation = await user.create_conversation()
    sock = await user.socket(conversation)
    await sock.sync()
    await sock.message(message)
    await sock.close()  # right after sending: nobody listens to the run

    deadline = time.monotonic() + 20
    while not any(e["type"] == "complete" for e in await user.events(conversation)):
        assert time.monotonic() < deadline, "the run did not complete without a socket"
        await asyncio.sleep(0.2)

    later = await user.socket(conversation, after=0)
    replay, sync = await later.sync()
    await later.close()
    assert sync["running"] is False
    assert_contiguous(replay)
    assert replay[0] == {**replay[0], "type": "user_message", "content": message}
    assert replay[-1] == {**replay[-1], "type": "complete", "status": "succeeded"}
    assert run_text(replay) == answer


async def test_cancel_from_a_second_socket_stops_the_run(user, replies):
    answer = answer_text(200, "x")
    message = replies.set("cancel me", slow_text_reply(answer, chunks=200, delay=0.05))  # ~10 s
    conversation = await user.create_conversation()
    starter, canceller = await user.socket(conversation), await user.socket(conversation)
    await starter.sync()
    await canceller.sync()

    started = time.monotonic()
    await starter.message(message)
    await canceller.until(lambda f: f.get("type") == "text", timeout=10)
    await canceller.send({"type": "cancel"})
    got_starter, got_canceller = await asyncio.gather(
        starter.until_complete(timeout=10), canceller.until_complete(timeout=10)
    )
    elapsed = time.monotonic() - started
    events = events_only(starter.frames)

    assert elapsed < 7, f"the run was not stopped by cancel (took {elapsed:.1f}s)"
    assert events == events_only(canceller.frames)
    assert events[-1] == {**events[-1], "type": "complete", "status": "cancelled"}
    errors = [f for f in events if f["type"] == "error"]
    assert [e["code"] for e in errors] == ["CANCELLED"]
    assert len(run_text(events)) < len(answer)
    assert events == await user.events(conversation)

    sync_after = await user.socket(conversation)
    _, sync = await sync_after.sync()
    assert sync["running"] is False
    await asyncio.gather(starter.close(), canceller.close(), sync_after.close())
