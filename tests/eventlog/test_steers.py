"""chat.eventlog.steers: a run claims its steers, leaves those it did not take in as waiting
messages in the transaction of its `complete`, and gets back, when taken over, those whose
`steer_applied` never reached the log (docs/protocol.md, "Steering")."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from chat.eventlog.append import events_append
from chat.eventlog.steers import steers_take
from chat.eventlog.takeover import run_interrupt
from chat.models import Event, QueuedMessage, Run
from tests.eventlog.test_writes import _dead_run

pytestmark = pytest.mark.django_db


def _steer(conversation, run, content: str) -> QueuedMessage:
    (frame,) = events_append(
        conversation_id=conversation.pk, run_id=run.pk, payloads=[{"type": "steer", "queueId": "x", "content": content}]
    )
    return QueuedMessage.objects.create(
        conversation=conversation, user=conversation.owner, content=content, seq=frame["seq"], steer_run=run
    )


def test_a_claim_takes_each_steer_once_in_order(conversation):
    run = _dead_run(conversation)
    first, second = _steer(conversation, run, "a"), _steer(conversation, run, "b")
    taken = steers_take(conversation_id=conversation.pk, run_id=run.pk)
    assert [(s.queue_id, s.content) for s in taken] == [(str(first.pk), "a"), (str(second.pk), "b")]
    assert steers_take(conversation_id=conversation.pk, run_id=run.pk) == []
    assert QueuedMessage.objects.filter(taken=True).count() == 2


def test_a_complete_leaves_the_untaken_steers_waiting_before_it_and_drops_the_taken(conversation):
    run = _dead_run(conversation)
    taken = _steer(conversation, run, "taken")
    steers_take(conversation_id=conversation.pk, run_id=run.pk)
    late = _steer(conversation, run, "late")
    frames = events_append(
        conversation_id=conversation.pk,
        run_id=run.pk,
        payloads=[{"type": "text", "content": "bye"}, {"type": "complete", "status": "succeeded"}],
    )
    assert [(f["type"], f["runId"]) for f in frames] == [
        ("text", str(run.pk)),
        ("queued", None),
        ("complete", str(run.pk)),
    ]
    assert (frames[1]["queueId"], frames[1]["content"], frames[1]["steered"]) == (str(late.pk), "late", True)
    assert [f["seq"] for f in frames] == [frames[0]["seq"], frames[0]["seq"] + 1, frames[0]["seq"] + 2]
    stored = Event.objects.get(seq=frames[1]["seq"], conversation=conversation)
    assert stored.run_id is None and stored.type == "queued"
    assert not QueuedMessage.objects.filter(pk=taken.pk).exists()
    row = QueuedMessage.objects.get(pk=late.pk)
    assert (row.steer_run_id, row.steered, row.taken) == (None, True, False)
    assert list(QueuedMessage.objects.waiting()) == [row]


def test_a_take_over_gives_back_the_steers_whose_applied_event_was_lost(conversation):
    run = _dead_run(conversation)
    applied, lost = _steer(conversation, run, "applied"), _steer(conversation, run, "lost")
    steers_take(conversation_id=conversation.pk, run_id=run.pk)
    events_append(
        conversation_id=conversation.pk, run_id=run.pk, payloads=[{"type": "steer_applied", "queueId": str(applied.pk)}]
    )
    cutoff = timezone.now() - timedelta(seconds=20)
    assert run_interrupt(run_id=run.pk, stale_before=cutoff, message="gone", worker="runs.new", max_resumes=1).resumed
    again = steers_take(conversation_id=conversation.pk, run_id=run.pk)
    assert [(s.queue_id, s.content) for s in again] == [(str(lost.pk), "lost")]
    assert Run.objects.get(pk=run.pk).status == "running"
