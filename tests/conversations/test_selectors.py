"""chat.conversations.selectors and chat.eventlog.reads: every read that takes a user returns only that user's data; event reads."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from unittest.mock import ANY

import pytest
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone

from chat.conversations.selectors import conversation_for_user, conversation_owned, conversations_for_user
from chat.conversations.services import conversation_create
from chat.eventlog.append import events_append
from chat.eventlog.reads import events_after, running_run, runs_memory_events, stale_runs
from chat.models import Run
from chat.runs.starts import run_start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def _start(conversation, content="hi"):
    return run_start(conversation=conversation, user=conversation.owner, content=content, model="m", worker="w")


def _finish(run):
    Run.objects.filter(pk=run.pk).update(status="succeeded")


def test_conversations_for_user_are_the_users_own_newest_first_with_running(make_user):
    alice, bob = make_user("alice"), make_user("bob")
    older = conversation_create(owner=alice, title="older")
    newer = conversation_create(owner=alice, title="newer")
    conversation_create(owner=bob, title="bob's")
    _start(older)  # bumps older's updated_at and makes it running

    listed = list(conversations_for_user(user=alice))
    assert [(c.title, c.running) for c in listed] == [("older", True), ("newer", False)]
    assert conversation_for_user(user=alice, conversation_id=newer.pk) == newer


@pytest.mark.parametrize("selector", [conversation_for_user, conversation_owned])
def test_another_users_or_a_missing_conversation_or_no_user_is_none(make_user, selector):
    import uuid

    alice, bob = make_user("alice"), make_user("bob")
    conversation = conversation_create(owner=alice)
    assert selector(user=alice, conversation_id=conversation.pk) == conversation
    assert selector(user=bob, conversation_id=conversation.pk) is None
    assert selector(user=alice, conversation_id=uuid.uuid4()) is None
    assert selector(user=AnonymousUser(), conversation_id=conversation.pk) is None
    assert selector(user=SimpleNamespace(), conversation_id=conversation.pk) is None


def test_events_after_pages_and_bounds_the_frames_in_order(conversation):
    run, first = _start(conversation)
    stored = first + events_append(
        conversation_id=conversation.pk, run_id=run.pk, payloads=[{"type": "text", "content": str(i)} for i in range(5)]
    )
    other = conversation_create(owner=conversation.owner)
    _start(other)

    assert events_after(conversation_id=conversation.pk) == stored
    assert events_after(conversation_id=conversation.pk, after=2) == stored[2:]
    assert events_after(conversation_id=conversation.pk, after=1, until=3) == stored[1:3]
    assert events_after(conversation_id=conversation.pk, after=1, limit=2) == stored[1:3]
    assert events_after(conversation_id=conversation.pk, after=6) == []
    assert stored[3] == {"type": "text", "content": "2", "seq": 4, "runId": str(run.pk), "ts": ANY}


def test_running_run_and_stale_runs(conversation):
    assert running_run(conversation_id=conversation.pk) is None
    run, _ = _start(conversation)
    assert running_run(conversation_id=conversation.pk) == run
    assert stale_runs(older_than=timezone.now() - timedelta(seconds=20)) == []
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=1))
    assert stale_runs(older_than=timezone.now() - timedelta(seconds=20)) == [run]
    _finish(run)
    assert stale_runs(older_than=timezone.now()) == []
    assert running_run(conversation_id=conversation.pk) is None


def test_a_runs_memory_is_its_conversations_finished_runs_and_its_own_events(make_user):
    alice = make_user("alice")
    conversation, other = (conversation_create(owner=alice) for _ in range(2))
    earlier, earlier_frames = _start(conversation, "first")
    earlier_frames += events_append(
        conversation_id=conversation.pk, run_id=earlier.pk, payloads=[{"type": "text", "content": "one"}]
    )
    _finish(earlier)
    current, current_frames = _start(conversation, "second")
    current_frames += events_append(
        conversation_id=conversation.pk, run_id=current.pk, payloads=[{"type": "text", "content": "partial"}]
    )
    elsewhere, _ = _start(other, "not mine")  # running, but another conversation's

    memory = runs_memory_events(runs={conversation.pk: current.pk, other.pk: elsewhere.pk})

    assert memory[conversation.pk] == earlier_frames + current_frames
    assert [f["content"] for f in memory[other.pk]] == ["not mine"]
