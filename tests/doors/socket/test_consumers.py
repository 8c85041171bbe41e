"""The WebSocket protocol (docs/protocol.md, "The WebSocket") against the real ASGI application."""

from __future__ import annotations

import asyncio
import threading
from contextlib import asynccontextmanager

import pytest
from asgiref.sync import SyncToAsync, sync_to_async
from django.db import OperationalError

from chat.accounts import held_credentials
from chat.conversations.services import conversation_create, conversation_delete
from chat.eventlog.append import events_append
from chat.models import Event, Run, ToolRecord
from chat.runs.starts import run_start
from chat.runtime.doorbell import publish
from tests.fakellm import text_reply, tool_call_reply
from tests.stored import stored_frame

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def slow_reply(text: str, delay: float = 0.02) -> dict:
    return text_reply(text, piece=2, delay=delay)


def texts(frames) -> str:
    return "".join(f["content"] for f in frames if f["type"] == "text")


def check_run_invariants(frames) -> None:
    """docs/protocol.md, "Events": user_message first, each tool_start ended once, complete last and once."""
    assert frames[0]["type"] == "user_message"
    assert frames[-1]["type"] == "complete"
    assert sum(f["type"] == "complete" for f in frames) == 1
    starts = [f["toolCallId"] for f in frames if f["type"] == "tool_start"]
    ends = [f["toolCallId"] for f in frames if f["type"] == "tool_end"]
    assert sorted(starts) == sorted(ends)
    seqs = [f["seq"] for f in frames]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert len({f["runId"] for f in frames}) == 1


# --- refusals ---------------------------------------------------------------------


async def test_anonymous_is_closed_4401_without_a_frame(conversation):
    from tests.asgi_socket import Socket

    socket = Socket(None, conversation.pk)
    connected, _ = await socket.connect()
    assert connected  # accepted, then closed with the code: a handshake refusal would carry none
    assert await socket.comm.receive_output(timeout=2) == {"type": "websocket.close", "code": 4401}
    assert await socket.comm.receive_nothing(timeout=0.2)


async def test_other_users_and_missing_conversations_close_4404(conversation, make_user):
    import uuid

    from tests.asgi_socket import Socket

    mallory = await sync_to_async(make_user)("mallory")
    for conversation_id in (conversation.pk, uuid.uuid4()):
        socket = Socket(mallory, conversation_id)
        connected, _ = await socket.connect()
        assert connected
        assert await socket.comm.receive_output(timeout=2) == {"type": "websocket.close", "code": 4404}


async def test_foreign_origin_is_refused_at_handshake(conversation):
    from tests.asgi_socket import Socket

    socket = Socket(conversation.owner, conversation.pk, origin="http://evil.example")
    connected, _ = await socket.connect()
    assert not connected


# --- history, sync and runs ---------------------------------------------------------


async def test_empty_conversation_sends_only_sync(conversation, registry):
    from tests.asgi_socket import Socket

    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    assert await socket.recv() == {
        "type": "sync",
        "lastSeq": 0,
        "running": False,
        "runId": None,
        "pendingApprovals": [],
        "queue": [],
        "pendingSteers": [],
    }
    await socket.close()


async def test_message_runs_the_agent_and_everything_is_stored(conversation, registry, llm_settings):
    from tests.asgi_socket import Socket

    llm_settings.script(
        tool_call_reply(("calculator", {"expression": "6*7"})),
        text_reply("It is 42.", thinking="Let me compute."),
    )
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "what is 6*7?"})
    frames = await socket.run_to_end()
    check_run_invariants(frames)
    assert frames[0]["content"] == "what is 6*7?"
    types = [f["type"] for f in frames]
    runs_of_a_type = [kind for n, kind in enumerate(types) if n == 0 or types[n - 1] != kind]
    assert runs_of_a_type == ["user_message", "tool_start", "tool_end", "thinking", "text", "complete"]
    # Each stream's first delta is stored at once, the rest coalesced within the flush window
    # (whether the first write is still in flight when the rest arrives depends on the machine).
    assert 1 <= types.count("thinking") <= 2 and 1 <= types.count("text") <= 2, types
    assert "".join(f["content"] for f in frames if f["type"] == "thinking") == "Let me compute."
    assert frames[2]["result"] == "42" and frames[2]["isError"] is False
    assert texts(frames) == "It is 42."
    assert frames[-1]["status"] == "succeeded"

    stored = await sync_to_async(list)(Event.objects.filter(conversation=conversation).order_by("seq"))
    assert [stored_frame(e) for e in stored] == frames
    run = await Run.objects.aget(pk=frames[0]["runId"])
    assert run.status == "succeeded" and run.iterations == 2 and run.finished_at is not None
    record = await ToolRecord.objects.aget(run=run)
    assert (record.tool_name, record.arguments, record.result) == ("calculator", '{"expression": "6*7"}', "42")
    await socket.close()


async def test_reconnect_with_after_gets_exactly_the_rest(conversation, registry, llm_settings):
    from tests.asgi_socket import Socket

    llm_settings.script(text_reply("one two three four"))
    first = Socket(conversation.owner, conversation.pk)
    await first.connect()
    await first.history()
    await first.send({"type": "message", "content": "count"})
    all_frames = await first.run_to_end()
    await first.close()
    for after in range(0, len(all_frames) + 1):
        again = Socket(conversation.owner, conversation.pk, after=after)
        await again.connect()
        replay = await again.history()
        assert replay[:-1] == all_frames[after:]
        assert replay[-1] == {
            "type": "sync",
            "lastSeq": len(all_frames),
            "running": False,
            "runId": None,
            "pendingApprovals": [],
            "queue": [],
            "pendingSteers": [],
        }
        await again.close()


async def test_resume_by_seq_is_exact_while_the_windows_grow(conversation, registry, llm_settings, settings):
    """A socket that leaves mid-stream and comes back with `after` gets exactly what it missed,
    the live rest once, and the whole run equals its replay, whatever the window was."""
    from tests.asgi_socket import Socket

    settings.AGENT_STREAM_FLUSH_MS, settings.AGENT_STREAM_FLUSH_MAX_MS = 20, 200
    answer = "".join(f"w{i:03d} " for i in range(150))
    # 1.5 s: windows 20 ... 200 ms. The second delta comes 0.3 s after the first, so that the
    # first is seen alone however busy the loop (CI's load once made the two one flush).
    llm_settings.script({**text_reply(answer, piece=5, delay=0.01), "delays": [0.01, 0.3]})
    first = Socket(conversation.owner, conversation.pk)
    await first.connect()
    await first.history()
    await first.send({"type": "message", "content": "count slowly"})
    seen = await first.until(lambda f: f["type"] == "text" and "w030" in texts([f]))
    assert seen[1]["type"] == "text" and seen[1]["content"] == "w000 "  # the first delta alone, at once
    await first.close()
    await asyncio.sleep(0.3)  # the run goes on, in the longer windows, with no one watching
    again = Socket(conversation.owner, conversation.pk, after=seen[-1]["seq"])
    await again.connect()
    rest = await again.until(lambda f: f["type"] == "complete")
    live = seen + [f for f in rest if f["type"] != "sync"]
    check_run_invariants(live)
    assert texts(live) == answer
    replay = Socket(conversation.owner, conversation.pk)
    await replay.connect()
    assert (await replay.history())[:-1] == live
    texts_stored = [f for f in live if f["type"] == "text"]
    assert len(texts_stored) < 40  # 150 deltas in a few growing windows (at 20 ms: ~75)
    await again.close()
    await replay.close()


async def test_second_message_while_running_is_refused_and_not_stored(conversation, registry, llm_settings):
    from tests.asgi_socket import Socket

    llm_settings.script(slow_reply("a slow answer " * 5))
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "first"})
    await socket.until(lambda f: f["type"] == "user_message")
    await socket.send({"type": "message", "content": "second"})
    frames = await socket.until(lambda f: f["type"] == "error" and "seq" not in f)
    refusal = frames[-1]
    assert refusal["code"] == "RUN_IN_PROGRESS" and set(refusal) == {"type", "code", "message", "detail"}
    await socket.run_to_end()
    contents = await sync_to_async(list)(
        Event.objects.filter(conversation=conversation, type="user_message").values_list("payload__content", flat=True)
    )
    assert contents == ["first"]
    assert await Event.objects.filter(type="error").acount() == 0
    await socket.close()


@pytest.mark.parametrize(
    "frame, code",
    [
        ("not json", "BAD_REQUEST"),
        ("[1, 2]", "BAD_REQUEST"),
        ({"content": "no type"}, "BAD_REQUEST"),
        ({"type": 7}, "BAD_REQUEST"),
        ({"type": "dance"}, "BAD_REQUEST"),
        ({"type": "message"}, "BAD_REQUEST"),
        ({"type": "message", "content": 42}, "BAD_REQUEST"),
        ({"type": "message", "content": "   "}, "BAD_REQUEST"),
        ({"type": "message", "content": "x" * 32001}, "TOO_LARGE"),
    ],
)
async def test_bad_frames_get_an_error_frame_and_the_socket_stays_open(conversation, registry, frame, code):
    from tests.asgi_socket import Socket

    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send(frame)
    error = await socket.recv()
    assert error["type"] == "error" and error["code"] == code and "seq" not in error
    assert error["message"]
    await socket.send({"type": "ping"})
    assert await socket.recv() == {"type": "pong"}
    assert await Event.objects.acount() == 0
    await socket.close()


async def test_rate_limit(conversation, registry, llm_settings, settings):
    from tests.asgi_socket import Socket

    settings.AGENT_MESSAGES_PER_MINUTE = 1
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "one"})
    await socket.run_to_end()
    await socket.send({"type": "message", "content": "two"})
    error = await socket.recv()
    assert error["code"] == "RATE_LIMITED" and "seq" not in error
    await socket.close()


async def test_cancel_from_another_socket(conversation, registry, llm_settings):
    from tests.asgi_socket import Socket

    llm_settings.script(slow_reply("never finished " * 50, delay=0.05))
    sender, other = Socket(conversation.owner, conversation.pk), Socket(conversation.owner, conversation.pk)
    for socket in (sender, other):
        await socket.connect()
        await socket.history()
    await sender.send({"type": "message", "content": "go"})
    await other.until(lambda f: f["type"] == "text")
    await other.send({"type": "cancel"})
    frames_sender = await sender.run_to_end()
    assert [f["type"] for f in frames_sender[-2:]] == ["error", "complete"]
    assert frames_sender[-2]["code"] == "CANCELLED" and frames_sender[-1]["status"] == "cancelled"
    run = await Run.objects.aget(pk=frames_sender[0]["runId"])
    assert run.status == "cancelled"
    for socket in (sender, other):
        await socket.close()


async def test_run_goes_on_when_every_socket_closes(conversation, registry, llm_settings):
    from tests.asgi_socket import Socket

    llm_settings.script(slow_reply("finished without anyone watching", delay=0.01))
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "go"})
    await socket.until(lambda f: f["type"] == "user_message")
    await socket.close()
    await registry.wait_idle()
    later = Socket(conversation.owner, conversation.pk)
    await later.connect()
    frames = await later.history()
    check_run_invariants(frames[:-1])
    assert texts(frames) == "finished without anyone watching"
    assert frames[-2]["status"] == "succeeded"
    await later.close()


async def test_connecting_during_a_run_misses_nothing_and_repeats_nothing(conversation, registry, llm_settings):
    from tests.asgi_socket import Socket

    answer = "".join(f"w{i} " for i in range(150))
    llm_settings.script(text_reply(answer, piece=3, delay=0.004))
    starter = Socket(conversation.owner, conversation.pk)
    await starter.connect()
    await starter.history()
    await starter.send({"type": "message", "content": "go"})
    seen_first = await starter.until(lambda f: f["type"] == "text")
    late = []
    for _ in range(3):  # join at several points while events are being produced
        socket = Socket(conversation.owner, conversation.pk)
        await socket.connect()
        late.append(socket)
        await asyncio.sleep(0.05)
    reference = seen_first + await starter.run_to_end()
    stored = await sync_to_async(list)(Event.objects.filter(conversation=conversation).order_by("seq"))
    full = [stored_frame(e) for e in stored]
    for socket in late:
        frames = [f for f in await socket.run_to_end() if f["type"] != "sync"]
        assert frames == full
    assert texts(full) == answer
    assert reference == full  # the starter, connected before the run, saw every frame live
    for socket in [starter, *late]:
        await socket.close()


async def test_a_gap_in_the_doorbell_is_filled_from_the_database(conversation, registry):
    from tests.asgi_socket import Socket

    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    run, first = await sync_to_async(run_start)(
        conversation=conversation, user=conversation.owner, content="hi", model="m", worker=""
    )
    frames = first + await sync_to_async(events_append)(
        conversation_id=conversation.pk,
        run_id=run.pk,
        payloads=[{"type": "text", "content": "a"}, {"type": "text", "content": "b"}, {"type": "text", "content": "c"}],
    )
    await publish(conversation.pk, frames[-1:])  # the layer "lost" the first three
    received = [await socket.recv() for _ in range(4)]
    assert received == frames
    assert await socket.silent()
    await socket.close()


@asynccontextmanager
async def orm_thread_held():
    """The thread every ORM call shares, held until the block ends; yields the release event
    (set once the block has ended)."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        held.set()
        release.wait(10)

    blocker = asyncio.ensure_future(sync_to_async(hold)())
    try:
        assert await asyncio.to_thread(held.wait, 5)
        yield release
    finally:
        release.set()
        await blocker


async def test_a_frame_is_not_held_behind_a_busy_orm_thread(conversation, registry):
    """Channels hops to the ORM thread before every client frame (to close stale connections);
    ours go straight to their handler, so that a burst of messages is not queued frame by frame
    behind the run starts that thread is storing (the starts close stale connections themselves)."""
    from tests.asgi_socket import Socket

    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    async with orm_thread_held() as release:
        await socket.send({"type": "ping"})
        assert await socket.recv(timeout=3) == {"type": "pong"}
        assert not release.is_set()  # answered while the thread was still held
    await socket.close()


async def test_a_socket_is_accepted_before_its_sign_in_reaches_the_orm_thread(conversation, registry):
    """A restarted server's pages reconnect at once and their sign-ins queue on the ORM thread:
    the handshake is answered at once (daphne drops one not accepted within 5 s, and the page's
    retry joins the queue again), and the socket waits its turn for `sync`."""
    from channels.testing import WebsocketCommunicator

    from agentsite.asgi import application
    from tests.asgi_socket import session_cookie

    cookie = await sync_to_async(session_cookie)(conversation.owner)
    headers = [(b"host", b"localhost"), (b"origin", b"http://localhost"), (b"cookie", f"sessionid={cookie}".encode())]
    comm = WebsocketCommunicator(application, f"/ws/chat/{conversation.pk}/", headers=headers)
    async with orm_thread_held() as release:
        connected, _ = await comm.connect(timeout=5)
        assert connected and not release.is_set()  # accepted while the thread was still held
        assert await comm.receive_nothing(timeout=0.2)  # nothing before the sign-in
    assert (await comm.receive_json_from(timeout=5))["type"] == "sync"
    await comm.disconnect()


async def test_ping_catches_up_a_lost_tail(conversation, registry):
    """The tail watch has read the conversation past the socket: the ping's pong, then the tail."""
    from chat.doors.socket.tail_watch import get_watch
    from tests.asgi_socket import Socket

    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    run, frames = await sync_to_async(run_start)(
        conversation=conversation, user=conversation.owner, content="hi", model="m", worker=""
    )
    # Nothing published at all: only a read of the database can deliver it.
    await get_watch().round()
    await socket.send({"type": "ping"})
    assert await socket.recv() == {"type": "pong"}
    assert await socket.recv() == frames[0]
    await socket.close()


async def test_a_lost_last_doorbell_is_caught_up_by_the_tail_watch_without_a_ping(conversation, registry, make_user):
    """One read of the last seqs a round for every socket of the process; a socket still short of
    the previous round's seq reads what it missed, one that is not reads nothing."""
    from chat.doors.socket import consumers
    from chat.doors.socket.tail_watch import get_watch
    from tests.asgi_socket import Socket

    bob = await sync_to_async(make_user)("bob")
    quiet = await sync_to_async(conversation_create)(owner=bob)
    socket, other = Socket(conversation.owner, conversation.pk), Socket(bob, quiet.pk)
    for each in (socket, other):
        await each.connect()
        await each.history()
    run, frames = await sync_to_async(run_start)(
        conversation=conversation, user=conversation.owner, content="hi", model="m", worker=""
    )
    reads = []
    real = consumers.events_after

    def counting(**kwargs):
        reads.append(kwargs["conversation_id"])
        return real(**kwargs)

    consumers.events_after = counting
    try:
        watch = get_watch()
        await watch.round()  # reads the seq; a doorbell may still be on its way
        assert watch.known(conversation.pk) == frames[-1]["seq"] and watch.known(quiet.pk) == 0
        assert await socket.silent()
        await watch.round()  # a whole round later the socket is still short of it: lost
        assert await socket.recv() == frames[0]
        assert await other.silent()
        assert reads == [conversation.pk]
    finally:
        consumers.events_after = real
    for each in (socket, other):
        await each.close()
    assert get_watch().sockets == {}


async def test_a_ping_makes_no_trip_to_the_orm_thread(conversation, registry, monkeypatch):
    """10,000 idle sockets ping 500 times a second: a ping is answered from memory, whatever the
    credential's re-check window (a revocation is pushed, and the frames that act re-check)."""
    from chat.doors.socket import consumers
    from tests.asgi_socket import Socket

    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    trips = []
    real = consumers.database_sync_to_async

    def counting(func):
        trips.append(getattr(func, "__name__", repr(func)))
        return real(func)

    monkeypatch.setattr(consumers, "database_sync_to_async", counting)
    monkeypatch.setattr(held_credentials, "SESSION_RECHECK_SECONDS", 0.0)
    for _ in range(3):
        await socket.send({"type": "ping"})
        assert await socket.recv() == {"type": "pong"}
    assert trips == []
    await socket.close()


async def test_memory_carries_earlier_turns(conversation, registry, llm_settings):
    from tests.asgi_socket import Socket

    llm_settings.script(
        tool_call_reply(("calculator", {"expression": "2+2"})),
        text_reply("Four."),
        text_reply("You asked about 2+2."),
    )
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "2+2?"})
    await socket.run_to_end()
    await socket.send({"type": "message", "content": "what did I ask?"})
    await socket.run_to_end()
    sent = llm_settings.requests[-1]["messages"]
    assert sent[0]["role"] == "system"
    assert sent[1:] == [
        {"role": "user", "content": "2+2?"},
        {
            "role": "assistant",
            "content": "",  # not null: llama-cpp-python refuses null (issue 23)
            "tool_calls": [
                {
                    "id": "call_0",
                    "type": "function",
                    "function": {"name": "calculator", "arguments": '{"expression": "2+2"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_0", "content": "4"},
        {"role": "assistant", "content": "Four."},
        {"role": "user", "content": "what did I ask?"},
    ]
    await socket.close()


async def test_failed_model_calls_are_visible_and_the_run_fails(conversation, registry, llm_settings, settings):
    from tests.asgi_socket import Socket

    settings.AGENT_MAX_RETRIES = 2
    error = {"status": 500, "body": {"error": {"message": "upstream down"}}}
    llm_settings.script(error, error, error)
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "hi"})
    frames = await socket.run_to_end()
    errors = [f for f in frames if f["type"] == "error"]
    assert [e["message"][-5:] for e in errors[:2]] == ["(1/2)", "(2/2)"]
    # The cause in the server's words; the endpoint's own text stays in the server log.
    assert all(e["code"] == "LLM_CALL_FAILED" for e in errors)
    assert {e["detail"] for e in errors} == {"The model endpoint failed with a server error (HTTP 500)."}
    assert len(errors) == 3 and frames[-1]["status"] == "failed"
    run = await Run.objects.aget(pk=frames[0]["runId"])
    assert run.status == "failed" and run.error.startswith("LLM_CALL_FAILED")
    await socket.close()


async def test_an_after_past_the_end_is_clamped(conversation, registry, llm_settings):
    from tests.asgi_socket import Socket

    llm_settings.script(text_reply("fresh"))
    socket = Socket(conversation.owner, conversation.pk, after=999)
    await socket.connect()
    assert await socket.recv() == {
        "type": "sync",
        "lastSeq": 0,
        "running": False,
        "runId": None,
        "pendingApprovals": [],
        "queue": [],
        "pendingSteers": [],
    }
    await socket.send({"type": "message", "content": "hi"})
    frames = await socket.run_to_end()
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    assert texts(frames) == "fresh"
    await socket.close()


# --- hardening: hostile frames, a vanished conversation, too many sockets -------------------


@pytest.mark.parametrize("frame", ["[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000])
async def test_deeply_nested_json_is_a_bad_request_not_a_crash(conversation, registry, frame):
    from tests.asgi_socket import Socket

    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send(frame)
    error = await socket.recv()
    assert (error["type"], error["code"]) == ("error", "BAD_REQUEST") and "seq" not in error
    await socket.send({"type": "ping"})
    assert await socket.recv() == {"type": "pong"}
    await socket.close()


async def test_a_deleted_conversation_closes_its_socket_4404(conversation, registry, llm_settings):
    from tests.asgi_socket import Socket

    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await sync_to_async(conversation_delete)(conversation=conversation)  # pushed to its group
    closed = await socket.comm.receive_output(timeout=5)
    assert (closed["type"], closed["code"]) == ("websocket.close", 4404)


async def test_a_message_to_a_deleted_conversation_gets_not_found_and_the_socket_stays_sane(
    conversation, registry, llm_settings, monkeypatch
):
    from chat.realtime import deletion
    from tests.asgi_socket import Socket

    monkeypatch.setattr(deletion, "push", lambda group, message: None)  # a push the layer lost
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await sync_to_async(conversation_delete)(conversation=conversation)
    await socket.send({"type": "message", "content": "anyone there?"})
    error = await socket.recv()
    assert (error["type"], error["code"]) == ("error", "NOT_FOUND") and "seq" not in error
    assert set(error) == {"type", "code", "message", "detail"}
    await socket.send({"type": "ping"})
    assert await socket.recv() == {"type": "pong"}
    await socket.send({"type": "message", "content": "again"})
    assert (await socket.recv())["code"] == "NOT_FOUND"
    assert await Run.objects.acount() == 0 and await Event.objects.acount() == 0
    await socket.close()


async def test_sockets_over_the_per_user_cap_are_closed_4429(conversation, registry, settings, make_user):
    from tests.asgi_socket import Socket

    settings.AGENT_MAX_SOCKETS_PER_USER = 2
    first, second = Socket(conversation.owner, conversation.pk), Socket(conversation.owner, conversation.pk)
    for socket in (first, second):
        await socket.connect()
        await socket.history()
    third = Socket(conversation.owner, conversation.pk)
    assert (await third.connect())[0]
    assert await third.comm.receive_output(timeout=2) == {"type": "websocket.close", "code": 4429}
    # The cap is per user: someone else still gets in.
    bob = await sync_to_async(make_user)("bob")
    bobs = await sync_to_async(conversation_create)(owner=bob)
    other = Socket(bob, bobs.pk)
    await other.connect()
    assert (await other.history())[-1]["type"] == "sync"
    # A closed socket frees its place.
    await first.close()
    again = Socket(conversation.owner, conversation.pk)
    await again.connect()
    assert (await again.history())[-1]["type"] == "sync"
    for socket in (second, other, again):
        await socket.close()


async def test_a_connect_that_fails_does_not_hold_a_place_under_the_cap(conversation, registry, settings, monkeypatch):
    from chat.accounts import sockets
    from chat.doors.socket import arrivals, consumers
    from chat.eventlog.reads import last_seqs
    from tests.asgi_socket import Socket

    settings.AGENT_MAX_SOCKETS_PER_USER = 1
    real = last_seqs  # read after the socket is counted

    def broken(*args, **kwargs):
        raise OperationalError("the database went away for a moment")

    monkeypatch.setattr(arrivals, "last_seqs", broken)
    failed = Socket(conversation.owner, conversation.pk)
    # Closed with the code the page reconnects on, not by an exception (Channels' 1011).
    assert await failed.connect() == (True, None)
    assert await failed.comm.receive_output(timeout=5) == {"type": "websocket.close", "code": consumers.CLOSE_TRY_AGAIN}
    monkeypatch.setattr(arrivals, "last_seqs", real)
    assert sockets.user_sockets(conversation.owner.pk) == 0
    monkeypatch.setattr(arrivals, "session_users", broken)  # the sign-in's trip fails alike
    early = Socket(conversation.owner, conversation.pk)
    assert await early.connect() == (True, None)
    assert await early.comm.receive_output(timeout=5) == {"type": "websocket.close", "code": consumers.CLOSE_TRY_AGAIN}
    monkeypatch.undo()
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    assert (await socket.history())[-1]["type"] == "sync"
    await socket.close()


# --- the handshake's trips to the ORM thread ------------------------------------------


@pytest.fixture
def orm_trips(monkeypatch):
    """The functions each trip to the one ORM thread (sync_to_async, database_sync_to_async) ran."""
    trips: list[str] = []
    call = SyncToAsync.__call__

    async def counted(self, *args, **kwargs):
        trips.append(getattr(self.func, "__name__", repr(self.func)))
        return await call(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", counted)
    return trips


async def test_a_handshake_takes_two_trips_to_the_orm_thread(conversation, registry, orm_trips):
    """Sign-in and conversation in one, history and run state in the other, by session or by
    token: in a reconnect storm every trip more is a turn more in the ORM thread's queue for
    every socket."""
    from chat.accounts.tokens import token_create
    from tests.asgi_socket import Socket

    warm = Socket(conversation.owner, conversation.pk)  # the registry starts with the first socket
    await warm.connect()
    await warm.history()
    run, first = await sync_to_async(run_start)(
        conversation=conversation, user=conversation.owner, content="hi", model="m", worker=""
    )
    _, value = await sync_to_async(token_create)(user=conversation.owner, name="bot")
    session = Socket(conversation.owner, conversation.pk, after=0)
    token = Socket(None, conversation.pk, after=0, origin=None, token=value)
    for socket in (session, token):
        orm_trips.clear()
        await socket.connect()
        frames = await socket.history()
        assert [t for t in orm_trips if t != "session_cookie"] == ["_sign_in", "_resume"]
        sync = {"type": "sync", "lastSeq": first[-1]["seq"], "running": True, "runId": str(run.pk)}
        assert frames == [*first, {**sync, "pendingApprovals": [], "queue": [], "pendingSteers": []}]
    for socket in (warm, session, token):
        await socket.close()


async def test_sockets_connecting_together_share_their_trips(conversation, registry, orm_trips, make_user):
    """A reconnect storm: the handshakes that wait while a round is read form the next round, and
    so do the resumes; each socket still gets its own history, sync and refusals."""
    from tests.asgi_socket import Socket

    run, first = await sync_to_async(run_start)(
        conversation=conversation, user=conversation.owner, content="hi", model="m", worker=""
    )
    mallory = await sync_to_async(make_user)("mallory")
    sockets = [Socket(conversation.owner, conversation.pk, after=after) for after in (0, 1, 99, 0, 1, 0)]
    stranger = Socket(mallory, conversation.pk)
    orm_trips.clear()
    await asyncio.gather(*(s.connect() for s in [*sockets, stranger]))
    assert await stranger.comm.receive_output(timeout=5) == {"type": "websocket.close", "code": 4404}
    for socket, after in zip(sockets, (0, 1, 99, 0, 1, 0)):
        frames = await socket.history()
        assert frames[:-1] == [f for f in first if f["seq"] > min(after, first[-1]["seq"])]
        assert frames[-1]["type"] == "sync" and frames[-1]["runId"] == str(run.pk)
    assert 1 <= orm_trips.count("_sign_in") <= 2 and 1 <= orm_trips.count("_resume") <= 2
    for socket in sockets:
        await socket.close()


async def test_an_expired_session_or_a_deactivated_user_is_closed_4401(conversation, registry):
    """Deactivated with a queryset update (no signal, no push): the handshake's own check refuses."""
    from channels.testing import WebsocketCommunicator
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from agentsite.asgi import application
    from chat.models import UserSession
    from tests.asgi_socket import session_cookie

    owner = conversation.owner

    async def close_code(cookie: str):
        headers = [
            (b"host", b"localhost"),
            (b"origin", b"http://localhost"),
            (b"cookie", f"sessionid={cookie}".encode()),
        ]
        comm = WebsocketCommunicator(application, f"/ws/chat/{conversation.pk}/", headers=headers)
        await comm.connect(timeout=5)
        out = await comm.receive_output(timeout=2)
        await comm.disconnect()
        return out.get("code") if out["type"] == "websocket.close" else out["type"]

    live, stale = await sync_to_async(session_cookie)(owner), await sync_to_async(session_cookie)(owner)
    assert await close_code(live) == "websocket.send"  # signed in: its sync comes
    await sync_to_async(UserSession.objects.filter(session_key=stale).update)(expire_date=timezone.now())
    assert await close_code(stale) == 4401
    await sync_to_async(get_user_model().objects.filter(pk=owner.pk).update)(is_active=False)
    assert await close_code(live) == 4401
