"""chat.eventlog.inserts: the hot path's rows inserted without bulk_create store what bulk_create
would (on SQLite here, on PostgreSQL in CI's second pass), leave saved instances behind, and
fail as the database's IntegrityError that run starts rely on."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.db import IntegrityError, transaction

from chat.conversations.services import conversation_create
from chat.eventlog.append import EVENT_COLUMNS
from chat.eventlog.inserts import insert_objects, insert_rows
from chat.models import Event, Run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]

# Not UTC, and with microseconds: what the database keeps must be the same instant.
LOCAL = datetime(2026, 12, 5, 21, 30, 15, 123456, tzinfo=timezone(timedelta(hours=8)))


def _columns(run: Run) -> dict:
    return {f.attname: getattr(run, f.attname) for f in Run._meta.concrete_fields if f.attname != "id"}


def test_inserted_runs_read_back_as_bulk_created_ones(make_user):
    user = make_user("alice")
    first, second = conversation_create(owner=user), conversation_create(owner=user)
    values = dict(user=user, model="small-model", worker="w1", started_at=LOCAL, heartbeat_at=LOCAL, resumes=2)
    ours = Run(conversation=first, status="succeeded", cancel_requested=True, error="中文", **values)
    theirs = Run(conversation=second, status="succeeded", cancel_requested=True, error="中文", **values)

    insert_objects([ours])
    Run.objects.bulk_create([theirs])

    stored_ours, stored_theirs = Run.objects.get(pk=ours.pk), Run.objects.get(pk=theirs.pk)
    assert stored_ours.started_at == LOCAL and stored_ours.error == "中文" and stored_ours.cancel_requested is True
    assert stored_ours.agent_id is None and stored_ours.finished_at is None and stored_ours.total_tokens == 0
    assert {**_columns(stored_ours), "conversation_id": None} == {**_columns(stored_theirs), "conversation_id": None}


def test_an_inserted_instance_is_saved_so_save_updates_it(conversation):
    run = Run(conversation=conversation, user=conversation.owner, status="succeeded")
    insert_objects([run])
    assert run._state.adding is False and run._state.db == "default"

    run.model = "renamed"
    run.save()  # an UPDATE: an insert would meet the primary key already stored

    assert Run.objects.count() == 1 and Run.objects.get().model == "renamed"


def test_inserted_events_keep_their_payloads_times_and_order(conversation):
    run = Run.objects.create(conversation=conversation, user=conversation.owner)
    now = datetime(2026, 12, 5, 13, 30, 15, 654321, tzinfo=UTC)
    payloads = [
        {"type": "user_message", "content": "天气如何？ 🌤", "parentSeq": None, "attachments": [{"name": "a.png"}]},
        {"type": "text", "content": 'quotes " and \\ and\nnewlines', "nested": {"list": [1, 2.5, True, None]}},
        {"type": "complete", "status": "succeeded"},
    ]
    # Ids as the writer has them: a run's as a string, the conversation's as a UUID.
    rows = [(conversation.pk, str(run.pk), seq, p["type"], p, now) for seq, p in enumerate(payloads, 1)]

    insert_rows(Event, EVENT_COLUMNS, rows)

    stored = list(Event.objects.filter(run=run).order_by("seq"))
    assert [e.payload for e in stored] == payloads
    assert [e.seq for e in stored] == [1, 2, 3] and [e.type for e in stored] == ["user_message", "text", "complete"]
    assert {e.created_at for e in stored} == {now}
    assert len({e.pk for e in stored}) == 3 and all(e.pk for e in stored)


def test_no_rows_is_no_statement(conversation, django_assert_num_queries):
    with django_assert_num_queries(0):
        insert_rows(Event, EVENT_COLUMNS, [])
        insert_objects([])


def test_a_conflict_is_the_databases_integrity_error_and_stores_nothing(conversation):
    run = Run.objects.create(conversation=conversation, user=conversation.owner)
    row = (conversation.pk, run.pk, 1, "text", {"type": "text", "content": "a"}, datetime.now(UTC))
    insert_rows(Event, EVENT_COLUMNS, [row])

    with pytest.raises(IntegrityError), transaction.atomic():  # (conversation, seq) is unique
        insert_rows(Event, EVENT_COLUMNS, [(*row[:2], 2, *row[3:]), row])

    assert list(Event.objects.values_list("seq", flat=True)) == [1]
    with pytest.raises(IntegrityError), transaction.atomic():  # a run id no run has
        insert_rows(Event, EVENT_COLUMNS, [(conversation.pk, uuid.uuid4(), 5, *row[3:])])
