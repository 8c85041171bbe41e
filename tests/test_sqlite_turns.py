"""agentsite/sqlite: the writers of one process take turns by a lock held from BEGIN to the end of
the transaction, however it ends, and a turn that cannot be had in time does not hang the
writer. (SQLite only: the PostgreSQL pass of CI does not run this file.)"""

from __future__ import annotations

import threading

import pytest
from django.db import OperationalError, connection, connections, transaction

from agentsite.sqlite import base
from chat.models import Conversation

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_database_is_served_by_the_turn_taking_backend():
    assert isinstance(connections["default"], base.DatabaseWrapper) and connection.vendor == "sqlite"


def test_a_turn_is_held_from_begin_to_commit():
    assert not base._WRITING.locked()
    with transaction.atomic():
        assert base._WRITING.locked()
        with transaction.atomic():  # a savepoint: the same turn
            assert base._WRITING.locked()
        assert base._WRITING.locked()
    assert not base._WRITING.locked()


def test_a_rolled_back_failed_or_closed_transaction_gives_its_turn_back(make_user):
    with pytest.raises(ValueError), transaction.atomic():
        Conversation.objects.create(owner=make_user("alice"))
        raise ValueError("the caller's own failure")
    assert not base._WRITING.locked() and not Conversation.objects.exists()

    with transaction.atomic():
        transaction.set_rollback(True)
    assert not base._WRITING.locked()

    with pytest.raises(OperationalError), transaction.atomic():
        connection.cursor().execute("SELECT * FROM no_such_table")
    assert not base._WRITING.locked()

    with transaction.atomic():
        connection.close()  # as a broken connection is dropped mid-transaction
        assert not base._WRITING.locked()
    assert not base._WRITING.locked()


def test_another_threads_writer_begins_only_once_the_turn_is_given_back(make_user):
    owner = make_user("bob")
    began, wrote = threading.Event(), []

    def other_writer():
        try:
            with transaction.atomic():
                began.set()
                wrote.append(Conversation.objects.create(owner=owner, title="second").pk)
        finally:
            connections["default"].close()

    with transaction.atomic():
        Conversation.objects.create(owner=owner, title="first")
        thread = threading.Thread(target=other_writer)
        thread.start()
        assert not began.wait(0.3)  # waiting for the turn, not yet in a transaction of its own
    assert began.wait(10)
    thread.join(10)
    assert wrote and sorted(Conversation.objects.values_list("title", flat=True)) == ["first", "second"]
    assert not base._WRITING.locked()


def test_a_turn_not_had_in_time_leaves_the_wait_to_sqlite_rather_than_hanging():
    options = connection.settings_dict["OPTIONS"]
    connection.settings_dict["OPTIONS"] = {**options, "timeout": 0.2}
    base._WRITING.acquire()  # as if a writer of this process never gave its turn back
    try:
        with transaction.atomic():  # SQLite itself is free: the transaction goes ahead without a turn
            assert connection.in_atomic_block
        assert base._WRITING.locked()  # and gives back nothing it did not take
    finally:
        base._WRITING.release()
        connection.settings_dict["OPTIONS"] = options
