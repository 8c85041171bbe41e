"""Queued messages are durable (docs/protocol.md, "Queued messages"): a message waiting behind a
run whose process died starts when the process that takes the run over stores its `complete`,
whether it closes the run `interrupted` or resumes it to its end."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from chat.eventlog import followups
from chat.eventlog.append import events_append
from chat.eventlog.types import Message, RunOutcome
from chat.models import Event, QueuedMessage, Run
from chat.runs.queue import message_queue
from chat.runs.starts import run_start
from tests.fakellm import text_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def _dead_run_with_waiting(conversation, texts: list[str]) -> tuple[Run, list[str]]:
    """A run whose process died mid-answer, with messages queued behind it."""
    run, _ = run_start(
        conversation=conversation, user=conversation.owner, content="first", model="m", worker="runs.dead!x"
    )
    events_append(conversation_id=conversation.pk, run_id=run.pk, payloads=[{"type": "text", "content": "half an ans"}])
    ids = []
    for text in texts:
        queued, _ = message_queue(Message(conversation, conversation.owner, text))
        assert queued is not None
        ids.append(queued.queue_id)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=60))
    return run, ids


def _log(conversation) -> list[dict]:
    return [
        {**payload, "seq": seq, "runId": run_id}
        for seq, run_id, payload in Event.objects.filter(conversation=conversation)
        .order_by("seq")
        .values_list("seq", "run_id", "payload")
    ]


async def _until_done(registry, runs: int) -> None:
    async with asyncio.timeout(15):
        while await Run.objects.exclude(status="running").acount() < runs:
            await registry.wait_idle()
            await asyncio.sleep(0.05)


async def test_a_closed_dead_run_starts_what_waits_behind_it(conversation, registry, llm_settings, settings):
    settings.AGENT_MAX_RESUMES = 0
    llm_settings.script(text_reply("second answer"), text_reply("third answer"))
    dead, ids = await sync_to_async(_dead_run_with_waiting)(conversation, ["second", "third"])
    assert await registry.reap_once() == 1
    await _until_done(registry, 3)
    log = await sync_to_async(_log)(conversation)
    completes = [e for e in log if e["type"] == "complete"]
    assert [(c["runId"], c["status"]) for c in completes][0] == (dead.pk, "interrupted")
    assert [c["status"] for c in completes[1:]] == ["succeeded", "succeeded"]
    starts = [e for e in log if e["type"] == "user_message"]
    assert [(s["content"], s.get("queueId")) for s in starts] == [
        ("first", None),
        ("second", ids[0]),
        ("third", ids[1]),
    ]
    by_seq = {e["seq"]: e for e in log}
    for start in starts[1:]:
        assert by_seq[start["seq"] - 1]["type"] == "complete"
    runs = {r.pk: r for r in await sync_to_async(list)(Run.objects.all())}
    assert all(runs[s["runId"]].worker == registry.channel for s in starts[1:])
    assert not await QueuedMessage.objects.aexists()


async def test_a_resumed_dead_run_starts_what_waits_when_it_ends(conversation, registry, llm_settings, settings):
    settings.AGENT_MAX_RESUMES = 1
    llm_settings.script(text_reply("resumed answer"), text_reply("second answer"))
    dead, ids = await sync_to_async(_dead_run_with_waiting)(conversation, ["second"])
    assert await registry.reap_once() == 1
    await _until_done(registry, 2)
    log = await sync_to_async(_log)(conversation)
    completes = [e for e in log if e["type"] == "complete"]
    assert [(c["runId"], c["status"]) for c in completes] == [
        (dead.pk, "succeeded"),
        (completes[1]["runId"], "succeeded"),
    ]
    start = next(e for e in log if e.get("queueId") == ids[0] and e["type"] == "user_message")
    assert start["seq"] == completes[0]["seq"] + 1
    assert any(e["type"] == "error" and e.get("resumed") for e in log)


async def test_messages_left_waiting_with_no_run_are_started_by_the_next_reaper_pass(
    conversation, registry, llm_settings
):
    """A `complete` stored by a stopping process starts nothing (no run could begin there): the
    next reaper pass of a process that goes on starts what waits."""
    llm_settings.script(text_reply("late answer"))
    run, ids = await sync_to_async(_dead_run_with_waiting)(conversation, ["waited"])
    await sync_to_async(events_append)(  # no one collects: as a stopping process's writer
        conversation_id=conversation.pk,
        run_id=run.pk,
        payloads=[{"type": "complete", "status": "interrupted"}],
        outcome=RunOutcome("interrupted"),
    )
    assert await QueuedMessage.objects.acount() == 1
    assert not await Run.objects.filter(status="running").aexists()
    await registry.reap_once()
    await _until_done(registry, 2)
    log = await sync_to_async(_log)(conversation)
    start = [e for e in log if e["type"] == "user_message"][-1]
    assert (start["content"], start["queueId"]) == ("waited", ids[0])
    assert log[-1]["type"] == "complete" and log[-1]["status"] == "succeeded"
    assert not await QueuedMessage.objects.aexists()


async def test_a_start_that_breaks_keeps_the_complete_and_the_next_pass_starts_it(
    conversation, registry, llm_settings, monkeypatch
):
    """A bug in a waiting message's start does not take the run's `complete` down with it."""
    llm_settings.script(text_reply("second answer"))
    broken = [True]
    real = followups._starter[0]

    def starter(ids, worker):
        if broken[0]:
            broken[0] = False
            raise RuntimeError("a bug")
        return real(ids, worker)

    monkeypatch.setattr(followups, "_starter", [starter])
    run, ids = await sync_to_async(_dead_run_with_waiting)(conversation, ["second"])
    monkeypatch.setattr("django.conf.settings.AGENT_MAX_RESUMES", 0)
    # The take-over closes the run interrupted: its start breaks, its complete stays; the same
    # pass's sweep for messages left waiting then starts it.
    await registry.reap_once()
    assert (await Run.objects.aget(pk=run.pk)).status == "interrupted"
    assert broken == [False]
    await _until_done(registry, 2)
    log = await sync_to_async(_log)(conversation)
    assert [e["status"] for e in log if e["type"] == "complete"] == ["interrupted", "succeeded"]
    starts = [e for e in log if e["type"] == "user_message"]
    assert starts[-1]["queueId"] == ids[0]
