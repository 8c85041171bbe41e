"""The benchmarks' database query counter (bench/query_count.py): every connection opened after
it is installed is counted, by statement kind, and the counts are served at its stats path."""

from __future__ import annotations

import json
import threading

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from bench.query_count import STATS_PATH, QueryCounter, difference, statement_kind, with_stats


def test_a_statement_is_known_by_its_verb_and_its_own_table():
    sql = (
        'SELECT "c"."id", (SELECT U0."id" FROM "chat_run" U0 WHERE (U0."conversation_id" = ("c"."id"))) AS "r" '
        'FROM "chat_conversation" "c" WHERE ("c"."id" = %s)'
    )
    assert statement_kind(sql) == "SELECT chat_conversation"
    assert statement_kind('INSERT INTO "chat_event" ("seq") VALUES (%s)') == "INSERT chat_event"
    assert statement_kind('UPDATE "chat_conversation" SET "last_seq" = %s') == "UPDATE chat_conversation"
    assert statement_kind("BEGIN") == "BEGIN"


@pytest.mark.django_db(transaction=True)
def test_the_queries_of_a_connection_opened_after_install_are_counted():
    counter = QueryCounter().install()

    def work() -> None:  # a thread of its own: a new connection, as a server's ORM thread opens
        try:
            get_user_model().objects.create(username="counted")
            list(get_user_model().objects.filter(username="counted"))
            list(get_user_model().objects.filter(username="counted"))
        finally:
            connection.close()

    try:
        before = counter.counts()
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    finally:
        counter.uninstall()
    counted = difference(counter.counts(), before)
    assert counted["by_kind"]["INSERT auth_user"] == 1
    assert counted["by_kind"]["SELECT auth_user"] == 2
    assert counted["queries"] == sum(counted["by_kind"].values())


async def test_the_counts_are_served_and_everything_else_goes_to_the_application():
    counter = QueryCounter()
    counter.by_kind.update({"SELECT chat_event": 3})
    seen = []

    async def application(scope, receive, send):
        seen.append(scope["path"])

    served = with_stats(application, counter)
    sent = []

    async def send(message):
        sent.append(message)

    await served({"type": "http", "path": STATS_PATH}, None, send)
    await served({"type": "http", "path": "/healthz"}, None, send)
    assert sent[0]["status"] == 200
    assert json.loads(sent[1]["body"]) == {"queries": 3, "by_kind": {"SELECT chat_event": 3}}
    assert seen == ["/healthz"]
