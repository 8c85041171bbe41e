"""SIGTERM of daphne during a run: the run is handed over (docs/protocol.md, "Run lifecycle") and the next
process to start continues it; with no resume allowed, the dying server closes it `interrupted`."""

from __future__ import annotations

import asyncio
import time

import pytest
from websockets.exceptions import ConnectionClosed

from .harness import Client, answer_text, assert_contiguous, events_only, run_text, slow_text_reply

pytestmark = pytest.mark.services


async def test_sigterm_without_resumes_closes_the_running_run_as_interrupted(databases, make_server, replies):
    database = databases.new()  # its own: no other server's reaper may close the run for it
    server = make_server(database, name="sigterm", AGENT_MAX_RESUMES="0")
    client = await Client(server).signup()
    try:
        answer = answer_text(300, "k")
        message = replies.set("stop the server", slow_text_reply(answer, chunks=300, delay=0.05))  # ~15 s
        conversation = await client.create_conversation()
        sock = await client.socket(conversation)
        await sock.sync()
        await sock.message(message)
        await sock.until(lambda f: len([g for g in sock.frames if g.get("type") == "text"]) >= 3, timeout=10)

        started = time.monotonic()
        code = await asyncio.to_thread(server.terminate, 15)
        stopped_in = time.monotonic() - started
        try:  # whatever the socket still received before the server went away
            while True:
                await sock.recv(timeout=5)
        except (ConnectionClosed, TimeoutError):
            pass
        received = events_only(sock.frames)

        # A server on the same database whose reaper cannot have closed the run: whatever
        # closed it was the dying server itself.
        restarted = make_server(database, name="sigterm-restarted", AGENT_HEARTBEAT_TIMEOUT="3600")
        client.server = restarted
        events = await client.events(conversation)
    finally:
        await client.aclose()

    assert stopped_in < 12, f"daphne took {stopped_in:.1f}s to stop (exit {code})"
    assert_contiguous(events)
    assert events[: len(received)] == received, "a frame the client received is not in the database"
    assert [e["type"] for e in events].count("complete") == 1
    assert events[-1] == {**events[-1], "type": "complete", "status": "interrupted"}
    assert events[-2] == {**events[-2], "type": "error", "code": "INTERRUPTED"}
    assert len("".join(e["content"] for e in events if e["type"] == "text")) < len(answer)

    detail = await _conversation(restarted, client, conversation)
    assert detail["running"] is False


async def test_sigterm_hands_the_run_over_and_the_restarted_server_finishes_it(databases, make_server, replies):
    database = databases.new()
    server = make_server(database, name="sigterm-release")
    restarted = None
    client = await Client(server).signup()
    try:
        message = replies.set(
            "stop and resume",
            slow_text_reply(answer_text(300, "r"), chunks=300, delay=0.05),
            slow_text_reply("Finished after the restart.", chunks=4, delay=0.01),
        )
        conversation = await client.create_conversation()
        sock = await client.socket(conversation)
        await sock.sync()
        await sock.message(message)
        await sock.until(lambda f: len([g for g in sock.frames if g.get("type") == "text"]) >= 3, timeout=10)
        await asyncio.to_thread(server.terminate, 15)
        try:
            while True:
                await sock.recv(timeout=5)
        except (ConnectionClosed, TimeoutError):
            pass
        received = events_only(sock.frames)

        # An hour of heartbeat timeout: only the release lets the new process take the run, at start.
        restarted = make_server(database, name="sigterm-resumer", AGENT_HEARTBEAT_TIMEOUT="3600")
        client.server = restarted
        watcher = await client.socket(conversation)
        seen = events_only(await watcher.until_complete(timeout=30))
        await watcher.close()
        events = await client.events(conversation)
    finally:
        await client.aclose()
        for process in (server, restarted):
            if process:
                process.stop()  # its database connections now rather than at the end of the session

    assert seen == events  # the reconnected client saw the whole run, the resumed end live or replayed
    assert_contiguous(events)
    assert events[: len(received)] == received
    assert [e["type"] for e in events].count("complete") == 1
    assert events[-1] == {**events[-1], "type": "complete", "status": "succeeded"}
    resumed = [i for i, e in enumerate(events) if e["type"] == "error"]
    assert len(resumed) == 1 and events[resumed[0]]["code"] == "INTERRUPTED" and events[resumed[0]]["resumed"]
    assert run_text(events[resumed[0] :]) == "Finished after the restart."
    assert len({e["runId"] for e in events}) == 1


async def _conversation(server, client: Client, conversation: str) -> dict:
    fresh = Client(server, username=client.username)
    try:
        await fresh.login()
        r = await fresh.api("GET", f"/api/conversations/{conversation}/")
        assert r.status_code == 200
        return r.json()
    finally:
        await fresh.aclose()


async def test_a_stopping_server_closes_its_model_client(databases, make_server, replies):
    # The model client's aiohttp session, left to the garbage collector, logged
    # "ERROR Unclosed client session" on every stop of daphne.
    server = make_server(databases.new(), name="sigterm-client")
    client = await Client(server).signup()
    try:
        conversation = await client.create_conversation()
        sock = await client.socket(conversation)
        await sock.sync()
        await sock.message(replies.set("open the model client", slow_text_reply("Done.", chunks=2, delay=0)))
        await sock.until_complete()
        await sock.close()
    finally:
        await client.aclose()
    await asyncio.to_thread(server.terminate, 15)
    log = server.log(tail=None)
    assert "Starting server" in log  # daphne's own log, read whole
    assert "Unclosed client session" not in log and "Unclosed connector" not in log, log[-2000:]
