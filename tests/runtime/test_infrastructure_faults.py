"""Faults of the database and the channel layer, in one process: a socket outlives them, a run
whose writes fail is handed over by its own process, and what the layer did not deliver reaches
the sockets as soon as it answers again. (The same faults on real services, restarted and
stopped under two daphnes: tests/e2e/test_faults.py.)"""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import psycopg
import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import OperationalError
from django.utils import timezone

from chat.doors.socket import consumers, tail_watch
from chat.doors.socket.tail_watch import get_watch
from chat.eventlog.append import events_append_many
from chat.eventlog.takeover import runs_release
from chat.models import Event, Run
from chat.runs import starter
from chat.runs.requests import StartRun
from chat.runs.starter import start_run
from chat.runs.starts import run_start
from chat.runtime import registry as registry_module
from chat.runtime import writer
from tests.asgi_socket import Socket
from tests.fakellm import text_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def _payloads(run_id) -> list[dict]:
    return list(Event.objects.filter(run_id=run_id).order_by("seq").values_list("payload", flat=True))


async def test_a_ping_while_the_database_fails_is_answered_and_the_socket_stays(conversation, registry, monkeypatch):
    """The socket is behind (the tail watch saw a run it was not told of) and the database goes
    away: the ping is answered all the same, the tail waits for the database."""
    sock = Socket(conversation.owner, conversation.pk)
    await sock.connect()
    await sock.history()
    run, frames = await sync_to_async(run_start)(
        conversation=conversation, user=conversation.owner, content="hi", model="m", worker=""
    )
    await get_watch().round()

    def down(**kwargs):
        raise OperationalError("the connection is closed")

    monkeypatch.setattr(consumers, "events_after", down)  # patched where the socket looks it up
    monkeypatch.setattr(tail_watch, "last_seqs", down)
    await get_watch().round()  # the watch's own read fails: logged, nothing else
    await sock.send({"type": "ping"})
    assert await sock.recv() == {"type": "pong"}
    assert await sock.silent()  # no close, no traceback frame
    monkeypatch.undo()
    await sock.send({"type": "ping"})
    assert await sock.recv() == {"type": "pong"}
    assert await sock.recv() == frames[0]  # the tail, once the database answers
    await sock.close()


async def test_a_message_while_the_database_fails_gets_unavailable_and_nothing_is_stored(
    conversation, registry, monkeypatch
):
    sock = Socket(conversation.owner, conversation.pk)
    await sock.connect()
    await sock.history()

    def down(**kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(starter, "runs_start", down)
    await sock.send({"type": "message", "content": "hello"})
    frame = await sock.recv()
    assert (frame["type"], frame["code"]) == ("error", "UNAVAILABLE") and "seq" not in frame
    assert not await sync_to_async(Event.objects.filter(conversation=conversation).exists)()
    await sock.send({"type": "ping"})  # still open
    assert await sock.recv() == {"type": "pong"}
    await sock.close()


async def test_a_run_whose_writes_fail_is_handed_over_by_its_own_process(
    conversation, registry, llm_settings, settings, monkeypatch
):
    """The writes fail for good (the database down), then the database answers: the run is resumed
    here at once, not closed `interrupted` nor left for another process's heartbeat timeout."""
    settings.AGENT_HEARTBEAT_TIMEOUT = 3600  # no reaper may take it for dead
    settings.AGENT_MAX_RESUMES = 1
    llm_settings.script(text_reply("First attempt, cut short.", piece=4, delay=0.02), text_reply("Resumed answer."))
    real = events_append_many
    failures = {"left": 0}

    def append(*, batches):
        if failures["left"] and not any(p["type"] == "user_message" for b in batches for p in b.payloads):
            failures["left"] -= 1
            raise OperationalError("server closed the connection unexpectedly")
        return real(batches=batches)

    monkeypatch.setattr(writer, "events_append_many", append)
    real_release = runs_release
    releases = {"refused": 2}

    def release(**kwargs):  # the database still down for the first tries
        if releases["refused"]:
            releases["refused"] -= 1
            raise OperationalError("connection refused")
        return real_release(**kwargs)

    monkeypatch.setattr(registry_module, "runs_release", release)
    sock = Socket(conversation.owner, conversation.pk)
    await sock.connect()
    await sock.history()
    failures["left"] = 2  # the round and its retry
    run, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content="go"))
    frames = await sock.until(lambda f: f.get("type") == "complete", timeout=20)
    stored = await sync_to_async(_payloads)(run.pk)
    types = [e["type"] for e in stored]
    assert types.count("complete") == 1
    assert [e for e in stored if e["type"] == "error" and e.get("resumed")]
    assert (await sync_to_async(Run.objects.get)(pk=run.pk)).status == "succeeded"
    assert "".join(f["content"] for f in frames if f["type"] == "text").endswith("Resumed answer.")
    await sock.close()


async def test_a_run_the_database_refuses_for_good_ends_once_and_is_not_resumed(
    conversation, registry, llm_settings, monkeypatch
):
    """A refusal that storing again would meet again (PostgreSQL's class 54, as a tsvector past
    1 MB was): the run ends with a server error, where a hand-over resumed it to fail again."""
    llm_settings.script(text_reply("An answer the database refuses."), text_reply("Never asked."))
    real = events_append_many

    def append(*, batches):
        if any(p["type"] == "complete" for b in batches for p in b.payloads):
            try:
                raise psycopg.errors.ProgramLimitExceeded("string is too long for tsvector")
            except psycopg.Error as cause:
                raise OperationalError("string is too long for tsvector") from cause
        return real(batches=batches)

    monkeypatch.setattr(writer, "events_append_many", append)
    sock = Socket(conversation.owner, conversation.pk)
    await sock.connect()
    await sock.history()
    run, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content="go"))
    frames = await sock.until(lambda f: f.get("type") == "complete", timeout=20)
    assert frames[-1]["status"] != "succeeded"
    assert any(f["type"] == "error" and "server error" in f["message"] for f in frames)
    stored = await sync_to_async(_payloads)(run.pk)
    assert [e["type"] for e in stored].count("complete") == 1
    assert not [e for e in stored if e.get("resumed")]
    assert len(llm_settings.requests) == 1  # not asked again
    await sock.close()


async def test_a_lost_run_that_its_own_reaper_resumed_first_is_not_released_again(
    conversation, registry, llm_settings, settings, monkeypatch
):
    """The database comes back after the run's heartbeat went stale: this process's reaper resumes
    the run before its hand-over gets to release it. The release is of the attempt that was lost,
    not of the resumed one running here (released, another reaper took it with no resume left and
    closed it `interrupted`: seen in CI)."""
    settings.AGENT_HEARTBEAT_TIMEOUT = 3600
    settings.AGENT_MAX_RESUMES = 1
    llm_settings.script(
        text_reply("First attempt, cut short.", piece=4, delay=0.02),
        text_reply("Resumed answer.", piece=3, delay=0.3),  # still running when the release comes
    )
    real = events_append_many
    failures = {"left": 0}

    def append(*, batches):
        if failures["left"] and not any(p["type"] == "user_message" for b in batches for p in b.payloads):
            failures["left"] -= 1
            raise OperationalError("server closed the connection unexpectedly")
        return real(batches=batches)

    monkeypatch.setattr(writer, "events_append_many", append)
    real_release = runs_release
    tried, database_back = threading.Event(), threading.Event()
    released: list[int] = []

    def release(**kwargs):
        if not database_back.is_set():
            tried.set()
            raise OperationalError("connection refused")
        released.append(real_release(**kwargs))
        return released[-1]

    monkeypatch.setattr(registry_module, "runs_release", release)
    failures["left"] = 2  # the round and its retry
    run, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content="go"))
    while not tried.is_set():
        await asyncio.sleep(0.02)
    stale = timezone.now() - timedelta(hours=2)
    await sync_to_async(Run.objects.filter(pk=run.pk).update)(heartbeat_at=stale)
    assert await registry.reap_once() == 1  # resumed here, before the hand-over's release
    database_back.set()
    while not released:
        await asyncio.sleep(0.02)
    assert released == [0]
    assert await sync_to_async(Run.objects.filter(pk=run.pk, worker=registry.channel, status="running").exists)()
    while registry.holds(run.pk):
        await asyncio.sleep(0.05)
    stored = await sync_to_async(_payloads)(run.pk)
    errors = [e for e in stored if e["type"] == "error"]
    assert [(e["code"], e.get("resumed")) for e in errors] == [("INTERRUPTED", True)]
    assert (await sync_to_async(Run.objects.get)(pk=run.pk)).status == "succeeded"
    assert "".join(e["content"] for e in stored if e["type"] == "text").endswith("Resumed answer.")


async def test_a_publish_that_failed_reaches_the_sockets_when_the_layer_answers_again(
    conversation, registry, llm_settings, monkeypatch
):
    """No ping: the layer probe notices the doorbell it missed and rings again."""
    sock = Socket(conversation.owner, conversation.pk)
    await sock.connect()
    await sock.history()
    layer = get_channel_layer()
    real = layer.group_send

    async def down(group, message):
        if group.startswith("conversation."):
            raise ConnectionError("Redis is restarting")
        await real(group, message)

    monkeypatch.setattr(layer, "group_send", down)
    llm_settings.script(text_reply("Stored while the layer was down."))
    run, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content="go"))
    await registry.wait_idle()
    assert await sock.silent()  # nothing reached the socket
    monkeypatch.setattr(layer, "group_send", real)
    frames = await sock.until(lambda f: f.get("type") == "complete", timeout=10)
    stored = await sync_to_async(_payloads)(run.pk)
    assert [f["type"] for f in frames] == [e["type"] for e in stored]
    assert [f["seq"] for f in frames] == list(range(1, len(stored) + 1))
    await sock.close()


async def test_healthz_reports_the_event_writers_connection(client, monkeypatch):
    assert (await sync_to_async(client.get)("/healthz")).json()["event_writer"] == "ok"

    def down():
        raise OperationalError("the connection is closed")

    monkeypatch.setattr(writer, "_check_connection_now", down)
    response = await sync_to_async(client.get)("/healthz")
    assert response.status_code == 503
    assert response.json()["event_writer"] == "error: OperationalError"
