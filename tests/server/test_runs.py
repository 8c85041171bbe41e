"""Seq allocation, heartbeat and the reaper of dead processes' runs."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.utils import timezone

from chat import services
from chat.models import Event, Run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def test_concurrent_writers_get_gap_free_unique_seqs(conversation):
    run, _ = services.run_start(conversation=conversation, user=conversation.owner, content="hi", model="m", worker="")
    errors = []

    def write(n):
        try:
            for _ in range(20):
                services.events_append(conversation_id=conversation.pk, run_id=run.pk,
                                       payloads=[{"type": "text", "content": str(n)}] * 3)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    seqs = list(Event.objects.filter(conversation=conversation).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, 1 + 1 + 4 * 20 * 3))
    conversation.refresh_from_db()
    assert conversation.last_seq == seqs[-1]


def test_one_running_run_per_conversation(conversation):
    services.run_start(conversation=conversation, user=conversation.owner, content="a", model="m", worker="")
    with pytest.raises(services.RunInProgress):
        services.run_start(conversation=conversation, user=conversation.owner, content="b", model="m", worker="")
    assert Event.objects.count() == 1


def _stale_run(conversation, *, age: float):
    run, _ = services.run_start(conversation=conversation, user=conversation.owner, content="hi", model="m",
                                worker="runs.dead!x")
    services.events_append(conversation_id=conversation.pk, run_id=run.pk, payloads=[
        {"type": "tool_start", "toolName": "calculator", "toolCallId": "c1", "arguments": "{}"},
        {"type": "tool_start", "toolName": "calculator", "toolCallId": "c2", "arguments": "{}"},
        {"type": "tool_end", "toolName": "calculator", "toolCallId": "c2", "result": "1", "isError": False,
         "durationMs": 1},
    ])
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=age))
    return run


async def test_reaper_closes_dead_runs_and_spares_live_ones(conversation, registry, settings, make_user):
    settings.AGENT_HEARTBEAT_TIMEOUT = 20
    dead = await sync_to_async(_stale_run)(conversation, age=60)
    other = await sync_to_async(services.conversation_create)(owner=conversation.owner)
    live = await sync_to_async(_stale_run)(other, age=5)
    assert await registry.reap_once() == 1
    assert await registry.reap_once() == 0  # closed once, never twice
    tail = await sync_to_async(list)(Event.objects.filter(run_id=dead.pk).order_by("seq").values_list("payload", flat=True))
    assert tail[-3:] == [
        {"type": "tool_end", "toolName": "calculator", "toolCallId": "c1",
         "result": '{"error": "interrupted: the server running this tool stopped"}', "isError": True, "durationMs": 0},
        {"type": "error", "code": "INTERRUPTED", "message": "The server running this run stopped before it finished.",
         "detail": "runs.dead!x"},
        {"type": "complete", "status": "interrupted"},
    ]
    assert (await Run.objects.aget(pk=dead.pk)).status == "interrupted"
    assert (await Run.objects.aget(pk=live.pk)).status == "running"


async def test_heartbeat_reports_runs_to_stop(conversation, registry):
    run, _ = await sync_to_async(services.run_start)(
        conversation=conversation, user=conversation.owner, content="hi", model="m", worker="")
    assert await sync_to_async(services.runs_heartbeat)(run_ids=[run.pk]) == set()
    await sync_to_async(services.run_request_cancel)(run_id=run.pk)
    assert await sync_to_async(services.runs_heartbeat)(run_ids=[run.pk]) == {run.pk}


def _starts(pairs):
    return [services.RunStart(conversation, conversation.owner, content, "m", "w") for conversation, content in pairs]


def test_starting_a_group_gives_each_message_its_own_answer(make_user, settings):
    settings.AGENT_MESSAGES_PER_MINUTE = 2
    alice, bob, carol = make_user("alice"), make_user("bob"), make_user("carol")
    a1, a2, a3 = (services.conversation_create(owner=alice) for _ in range(3))
    b1 = services.conversation_create(owner=bob, title="kept")
    busy = services.conversation_create(owner=carol)
    services.run_start(conversation=busy, user=carol, content="earlier", model="m", worker="")
    services.events_append(conversation_id=busy.pk, run_id=Run.objects.get(conversation=busy).pk,
                           payloads=[{"type": "text", "content": "x"}])

    results = services.runs_start_many(starts=_starts([
        (a1, "  first   message  "), (a1, "same conversation again"), (a2, "second"), (a3, "third: over the limit"),
        (b1, "bob"), (busy, "while running"),
    ]))

    (run_a1, frames_a1), in_progress, (run_a2, _), limited, (run_b1, frames_b1), busy_result = results
    assert isinstance(in_progress, services.RunInProgress) and isinstance(busy_result, services.RunInProgress)
    assert isinstance(limited, services.RateLimited)
    assert frames_a1 == [{"type": "user_message", "content": "  first   message  ", "seq": 1, "runId": str(run_a1.pk)}]
    assert frames_b1[0]["seq"] == 1 and frames_b1[0]["runId"] == str(run_b1.pk)
    assert {r.conversation_id for r in Run.objects.filter(status="running")} == {a1.pk, a2.pk, b1.pk, busy.pk}
    assert Event.objects.filter(conversation=busy).count() == 2  # nothing stored for the refused message
    titles = {c.pk: c.title for c in type(a1).objects.all()}
    assert titles[a1.pk] == "first message" and titles[a2.pk] == "second" and titles[a3.pk] == ""
    assert titles[b1.pk] == "kept"


def test_a_group_the_database_refuses_is_started_one_by_one(conversation, make_user):
    other = services.conversation_create(owner=conversation.owner)
    gone = services.conversation_create(owner=conversation.owner)
    starts = _starts([(conversation, "a"), (gone, "b"), (other, "c")])
    gone.delete()  # after the caller looked it up: the group's insert fails, each start is tried alone

    first, missing, third = services.runs_start_many(starts=starts)

    assert first[1][0]["content"] == "a" and third[1][0]["content"] == "c"
    assert isinstance(missing, Exception) and not isinstance(missing, services.RunInProgress)
    assert Run.objects.count() == 2 and Event.objects.count() == 2


async def test_messages_arriving_together_start_in_one_group_and_all_run(make_user, registry, llm_settings,
                                                                         monkeypatch):
    groups = []
    start_many = services.runs_start_many
    monkeypatch.setattr(services, "runs_start_many", lambda *, starts: groups.append(len(starts)) or start_many(starts=starts))
    user = await sync_to_async(make_user)("dave")
    conversations = [await sync_to_async(services.conversation_create)(owner=user) for _ in range(6)]
    await registry.ensure_started()  # (its first call may wait on the channel layer)
    started = await asyncio.gather(*(registry.start(conversation=c, user=user, content="hello") for c in conversations))
    await registry.wait_idle()
    assert groups == [6]  # all six were waiting when the starter first ran: one trip to the database
    statuses = await sync_to_async(lambda: {r.pk: r.status for r in Run.objects.all()})()
    assert all(statuses[run.pk] == "succeeded" for run in started)


async def test_a_model_that_stalls_is_stopped_by_the_llm_timeout(conversation, registry, llm_settings,
                                                               settings):
    # The model client has no per-read timeout of its own: the whole call is bounded instead.
    from tests.fakellm import text_reply

    settings.AGENT_LLM_TIMEOUT = 0.5
    settings.AGENT_MAX_RETRIES = 0
    llm_settings.script(text_reply("words that come too slowly", delay=3))
    started = time.monotonic()
    run = await registry.start(conversation=conversation, user=conversation.owner, content="hi")
    await registry.wait_idle()
    assert time.monotonic() - started < 2.5
    events = await sync_to_async(lambda: [e.payload for e in Event.objects.filter(run=run).order_by("seq")])()
    errors = [e for e in events if e["type"] == "error"]
    assert errors and "did not finish within 0.5 s" in errors[0]["detail"]
    assert events[-1] == {"type": "complete", "status": "failed"}
