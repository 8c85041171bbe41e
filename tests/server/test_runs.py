"""Seq allocation, heartbeat and the reaper of dead processes' runs."""

from __future__ import annotations

import threading
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
