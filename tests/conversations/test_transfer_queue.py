"""Export and import carry `queued` and `unqueued` (docs/protocol.md, "Queued messages" and
"Export and import"): their runId null, in their place among a run's events; and steers
(`steer`, `steer_applied`, the `queued` of one left waiting)."""

from __future__ import annotations

import json

import pytest

from chat.conversations.services import conversation_create
from chat.eventlog.append import events_append
from chat.eventlog.steers import steers_take
from chat.eventlog.types import Message, RunOutcome
from chat.models import Conversation, Event
from chat.runs.queue import message_queue, message_steer, message_unqueue
from chat.runs.starts import run_start
from tests.http_body import response_body

pytestmark = pytest.mark.django_db


def _with_a_withdrawn_message(alice) -> Conversation:
    conversation = conversation_create(owner=alice, title="queued")
    run, _ = run_start(conversation=conversation, user=alice, content="one", model="m", worker="")
    events_append(conversation_id=conversation.pk, run_id=run.pk, payloads=[{"type": "text", "content": "hal"}])
    queued, _ = message_queue(Message(conversation, alice, "later"))
    assert queued is not None
    message_unqueue(conversation_id=conversation.pk, queue_id=queued.queue_id)
    events_append(
        conversation_id=conversation.pk,
        run_id=run.pk,
        payloads=[{"type": "text", "content": "f"}, {"type": "complete", "status": "succeeded"}],
        outcome=RunOutcome("succeeded"),
    )
    return conversation


def test_queued_and_unqueued_round_trip(api, alice):
    conversation = _with_a_withdrawn_message(alice)
    exported = json.loads(response_body(api.get(f"/api/conversations/{conversation.pk}/export/")))
    kinds = [(e["type"], e["runId"] is None) for e in exported["events"]]
    assert kinds == [
        ("user_message", False),
        ("text", False),
        ("queued", True),
        ("unqueued", True),
        ("text", False),
        ("complete", False),
    ]
    response = api.generic(
        "POST", "/api/conversations/import/", json.dumps(exported).encode(), content_type="application/json"
    )
    assert response.status_code == 201, response.content
    created = Conversation.objects.get(pk=response.json()["id"])
    assert created.last_seq == 6
    copies = json.loads(response_body(api.get(f"/api/conversations/{created.pk}/export/")))["events"]
    strip = [{k: v for k, v in e.items() if k != "runId"} for e in exported["events"]]
    assert [{k: v for k, v in e.items() if k != "runId"} for e in copies] == strip
    assert [e["runId"] is None for e in copies] == [e["runId"] is None for e in exported["events"]]
    assert Event.objects.filter(conversation=created, run__isnull=True).count() == 2
    markdown = api.get(f"/api/conversations/{conversation.pk}/export/", {"format": "markdown"}).content.decode()
    assert "## You\n\none" in markdown and "later" not in markdown


@pytest.mark.parametrize(
    ("event", "why"),
    [
        ({"type": "queued", "queueId": "q", "content": "x", "runId": "r"}, "runId of queued must be null"),
        ({"type": "unqueued", "queueId": "q", "runId": None}, "lacks reason"),
        ({"type": "text", "content": "x", "runId": None}, "runId must be a non-empty string"),
    ],
)
def test_misplaced_conversation_events_are_refused(api, alice, event, why):
    conversation = _with_a_withdrawn_message(alice)
    exported = json.loads(response_body(api.get(f"/api/conversations/{conversation.pk}/export/")))
    exported["events"].insert(2, {**event, "seq": 3})
    for seq, frame in enumerate(exported["events"], start=1):
        frame["seq"] = seq
    response = api.generic(
        "POST", "/api/conversations/import/", json.dumps(exported).encode(), content_type="application/json"
    )
    assert response.status_code == 400 and why in response.content.decode()
    assert Conversation.objects.count() == 1


def test_steers_round_trip_with_the_one_left_waiting(api, alice):
    conversation = conversation_create(owner=alice, title="steered")
    run, _ = run_start(conversation=conversation, user=alice, content="one", model="m", worker="")
    taken, _ = message_steer(Message(conversation, alice, "read this"))
    (steer,) = steers_take(conversation_id=conversation.pk, run_id=run.pk)
    events_append(
        conversation_id=conversation.pk, run_id=run.pk, payloads=[{"type": "steer_applied", "queueId": steer.queue_id}]
    )
    late, _ = message_steer(Message(conversation, alice, "too late"))
    events_append(
        conversation_id=conversation.pk,
        run_id=run.pk,
        payloads=[{"type": "text", "content": "ok"}, {"type": "complete", "status": "succeeded"}],
        outcome=RunOutcome("succeeded"),
    )
    exported = json.loads(response_body(api.get(f"/api/conversations/{conversation.pk}/export/")))
    assert [(e["type"], e["runId"] is None) for e in exported["events"]] == [
        ("user_message", False),
        ("steer", False),
        ("steer_applied", False),
        ("steer", False),
        ("text", False),
        ("queued", True),
        ("complete", False),
    ]
    assert exported["events"][5]["steered"] is True and exported["events"][5]["queueId"] == late.queue_id
    response = api.generic(
        "POST", "/api/conversations/import/", json.dumps(exported).encode(), content_type="application/json"
    )
    assert response.status_code == 201, response.content
    created = Conversation.objects.get(pk=response.json()["id"])
    copies = json.loads(response_body(api.get(f"/api/conversations/{created.pk}/export/")))["events"]
    strip = [{k: v for k, v in e.items() if k != "runId"} for e in exported["events"]]
    assert [{k: v for k, v in e.items() if k != "runId"} for e in copies] == strip
    assert taken.queue_id == steer.queue_id
