"""Notifications through real daphnes (docs/protocol.md, "Notifications"): a run that ends with
no socket of its conversation open is pushed to its owner's bell and to no other user's; marking
read pushes the new count; the bell refuses a stranger. With PostgreSQL and Redis, across two
processes: the run on one, the bell on the other; a socket watching on the other process keeps
the run from notifying."""

from __future__ import annotations

import asyncio

import pytest
from websockets.exceptions import ConnectionClosed

from .conftest import ON_POSTGRES, REDIS_URL
from .harness import Client, anonymous_socket, slow_text_reply

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def server(databases, make_server):
    return make_server(databases.new(), name="notifications")


async def unwatched_run(client: Client, replies, text: str, *, server=None) -> str:
    """A run started on `server` by a socket closed before it ends; its conversation's id."""
    message = replies.set(f"tell me {text}", slow_text_reply(text, chunks=20, delay=0.05))
    conversation = await client.create_conversation(title=f"About {text}")
    sock = await client.socket(conversation, server=server)
    await sock.sync()
    await sock.message(message)
    await sock.until(lambda f: f.get("type") == "user_message")
    await sock.close()
    return conversation


async def test_an_unwatched_run_rings_its_owners_bell_only(server, replies):
    alice, bob = await Client(server).signup(), await Client(server).signup()
    try:
        alices, bobs = await alice.bell(), await bob.bell()
        assert await alices.recv() == {"type": "unread", "count": 0}
        assert await bobs.recv() == {"type": "unread", "count": 0}
        conversation = await unwatched_run(alice, replies, "the weather")
        frame = await alices.recv(timeout=30)
        assert (frame["type"], frame["kind"], frame["conversationId"], frame["status"]) == (
            "notification",
            "run_finished",
            conversation,
            "succeeded",
        )
        assert (frame["title"], frame["body"], frame["read"]) == ("About the weather", "the weather", False)
        with pytest.raises(TimeoutError):
            await bobs.recv(timeout=1)
        r = await alice.api("GET", "/api/notifications/?unread=1")
        assert [n["id"] for n in r.json()["notifications"]] == [frame["id"]] and r.json()["unread"] == 1
        assert (await bob.api("GET", "/api/notifications/")).json() == {"notifications": [], "unread": 0, "next": None}
        r = await bob.api("POST", "/api/notifications/read/", json_body={"ids": [frame["id"]]})
        assert r.json() == {"unread": 0}
        assert (await alice.api("GET", "/api/notifications/")).json()["unread"] == 1  # bob marked nothing of hers
        r = await alice.api("POST", "/api/notifications/read/", json_body={"ids": [frame["id"]]})
        assert r.json() == {"unread": 0}
        assert await alices.recv() == {"type": "unread", "count": 0}
        await alices.send({"type": "ping"})
        assert await alices.recv() == {"type": "pong"}
        await alices.close()
        await bobs.close()
    finally:
        await alice.aclose()
        await bob.aclose()


async def test_a_stranger_gets_no_bell(server):
    sock = await anonymous_socket(server, "/ws/notifications/")
    with pytest.raises(ConnectionClosed):
        await sock.recv()
    assert sock.close_code == 4401


@pytest.fixture(scope="module")
def two(databases, make_server):
    database = databases.new()
    return make_server(database, name="bell-A"), make_server(database, name="bell-B")


@pytest.mark.multiprocess
@pytest.mark.skipif(not (ON_POSTGRES and REDIS_URL), reason="needs DATABASE_URL=postgres://... and REDIS_URL")
async def test_across_two_processes(two, replies):
    server_a, server_b = two
    alice, bob = await Client(server_a).signup(), await Client(server_a).signup()
    try:
        alices = await alice.bell(server=server_b)
        bobs = await bob.bell(server=server_b)
        assert (await alices.recv())["type"] == (await bobs.recv())["type"] == "unread"
        # Run on A, its socket gone; the bell on B hears of it, through Redis.
        conversation = await unwatched_run(alice, replies, "process A", server=server_a)
        frame = await alices.recv(timeout=30)
        assert (frame["kind"], frame["conversationId"]) == ("run_finished", conversation)
        with pytest.raises(TimeoutError):
            await bobs.recv(timeout=1)
        # Watched from B while it runs on A (started over HTTP on A): nobody is notified.
        watched = await alice.create_conversation(title="watched")
        watcher = await alice.socket(watched, server=server_b)
        await watcher.sync()
        message = replies.set("watched from afar", slow_text_reply("seen", chunks=10, delay=0.05))
        r = await alice.api("POST", f"/api/conversations/{watched}/messages/", json_body={"content": message})
        assert r.status_code == 202, r.text
        await watcher.until_complete()
        await asyncio.sleep(2)  # longer than the asking process waits for an answer
        listed = (await alice.api("GET", "/api/notifications/", server=server_b)).json()
        assert [n["conversationId"] for n in listed["notifications"]] == [conversation]
        with pytest.raises(TimeoutError):
            await alices.recv(timeout=0.5)
        # Marked read on A: the count reaches the bell on B.
        r = await alice.api("POST", "/api/notifications/read/", json_body={"all": True})
        assert r.json() == {"unread": 0}
        assert await alices.recv() == {"type": "unread", "count": 0}
        await watcher.close()
        await alices.close()
        await bobs.close()
        logs = server_a.log() + server_b.log()
        assert "Traceback" not in logs, logs[-3000:]
    finally:
        await alice.aclose()
        await bob.aclose()
