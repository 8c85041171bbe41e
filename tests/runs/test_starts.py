"""chat.runs.starts: a start stored as a Run and its user_message in one transaction, a group of
starts together with each message its own answer, one way (a single start is a group of one)."""

from __future__ import annotations

from unittest.mock import ANY

import pytest

from chat.conversations.services import conversation_create
from chat.eventlog.append import events_append
from chat.eventlog.types import Message, RunStart
from chat.exceptions import RateLimited, RunInProgress
from chat.models import Conversation, Event, Run
from chat.runs.starts import run_start, runs_start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def _start(conversation, content="hi", worker=""):
    return run_start(conversation=conversation, user=conversation.owner, content=content, model="m", worker=worker)


def _starts(pairs, worker="w"):
    return [
        RunStart(Message(conversation, conversation.owner, content), "m", worker) for conversation, content in pairs
    ]


def test_one_running_run_per_conversation(conversation):
    _start(conversation, "a")
    with pytest.raises(RunInProgress):
        _start(conversation, "b")
    assert Event.objects.count() == 1


def test_the_database_constraint_refuses_a_second_running_run_the_queries_missed(conversation):
    # As when another process inserted its run between our check and our insert.
    Run.objects.create(conversation=conversation, user=conversation.owner)
    Run.objects.filter(conversation=conversation).update(status="running")
    with pytest.raises(RunInProgress):
        _start(conversation)


def test_starting_a_group_gives_each_message_its_own_answer(make_user, settings):
    settings.AGENT_MESSAGES_PER_MINUTE = 2
    alice, bob, carol = make_user("alice"), make_user("bob"), make_user("carol")
    a1, a2, a3 = (conversation_create(owner=alice) for _ in range(3))
    b1 = conversation_create(owner=bob, title="kept")
    busy = conversation_create(owner=carol)
    _start(busy, "earlier")
    events_append(
        conversation_id=busy.pk,
        run_id=Run.objects.get(conversation=busy).pk,
        payloads=[{"type": "text", "content": "x"}],
    )

    results = runs_start(
        starts=_starts(
            [
                (a1, "  first   message  "),
                (a1, "same conversation again"),
                (a2, "second"),
                (a3, "third: over the limit"),
                (b1, "bob"),
                (busy, "while running"),
            ]
        )
    )

    (run_a1, frames_a1), in_progress, (run_a2, _), limited, (run_b1, frames_b1), busy_result = results
    assert isinstance(in_progress, RunInProgress) and isinstance(busy_result, RunInProgress)
    assert isinstance(limited, RateLimited)
    assert frames_a1 == [
        {
            "type": "user_message",
            "content": "  first   message  ",
            "parentSeq": None,
            "agent": "default",
            "agentName": "Default",
            "model": "m",
            "seq": 1,
            "runId": str(run_a1.pk),
            "ts": ANY,
        }
    ]
    assert frames_b1[0]["seq"] == 1 and frames_b1[0]["runId"] == str(run_b1.pk)
    assert {r.conversation_id for r in Run.objects.filter(status="running")} == {a1.pk, a2.pk, b1.pk, busy.pk}
    assert run_a1.worker == "w" and run_a1.resumes == 0
    assert Event.objects.filter(conversation=busy).count() == 2  # nothing stored for the refused message
    titles = {c.pk: c.title for c in Conversation.objects.all()}
    assert titles[a1.pk] == "first message" and titles[a2.pk] == "second" and titles[a3.pk] == ""
    assert titles[b1.pk] == "kept"


def test_a_group_the_database_refuses_is_started_one_by_one(conversation):
    other = conversation_create(owner=conversation.owner)
    gone = conversation_create(owner=conversation.owner)
    starts = _starts([(conversation, "a"), (gone, "b"), (other, "c")])
    gone.delete()  # after the caller looked it up: the group's insert fails, each start is tried alone

    first, missing, third = runs_start(starts=starts)

    assert first[1][0]["content"] == "a" and third[1][0]["content"] == "c"
    assert isinstance(missing, Exception) and not isinstance(missing, RunInProgress)
    assert Run.objects.count() == 2 and Event.objects.count() == 2


def test_a_single_start_is_a_batch_of_one_with_the_same_rules(make_user, settings):
    settings.AGENT_MESSAGES_PER_MINUTE = 1
    conversation = conversation_create(owner=make_user("dora"))
    run, frames = _start(conversation, "hello  there")
    assert frames == [
        {
            "type": "user_message",
            "content": "hello  there",
            "parentSeq": None,
            "agent": "default",
            "agentName": "Default",
            "model": "m",
            "seq": 1,
            "runId": str(run.pk),
            "ts": ANY,
        }
    ]
    conversation.refresh_from_db()
    assert conversation.title == "hello there"
    Run.objects.filter(pk=run.pk).update(status="succeeded")
    with pytest.raises(RateLimited):
        _start(conversation, "again")
