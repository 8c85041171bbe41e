"""Conversation search (chat.eventlog.search): what matches, ownership, snippets, paging; on SQLite (FTS5)
and again on PostgreSQL (GIN over to_tsvector) in the services pass."""

from __future__ import annotations

import pytest
from django.test import Client

from chat.conversations.services import conversation_create, conversation_delete
from chat.eventlog.append import events_append
from chat.eventlog.search import MAX_DOCUMENT_CHARS
from chat.eventlog.takeover import run_interrupt
from chat.eventlog.types import RunOutcome
from chat.models import SearchDocument
from chat.runs.starts import run_start

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def finished_run(conversation, user, content: str, payloads: list[dict]) -> None:
    run, _ = run_start(conversation=conversation, user=user, content=content, model="m", worker="")
    events_append(
        conversation_id=conversation.pk,
        run_id=run.pk,
        payloads=[*payloads, {"type": "complete", "status": "succeeded"}],
        outcome=RunOutcome(status="succeeded"),
    )


def answer(text: str) -> list[dict]:
    return [{"type": "text", "content": part} for part in text.split("|")]


@pytest.fixture
def alice(make_user):
    return make_user("alice")


@pytest.fixture
def api(alice):
    client = Client()
    client.force_login(alice)
    return client


def search(api, q: str, **params) -> dict:
    response = api.get("/api/conversations/", {"q": q, **params})
    assert response.status_code == 200, response.content
    return response.json()


def titles(body: dict) -> list[str]:
    return [c["title"] for c in body["conversations"]]


def test_matches_messages_and_answers_not_thinking_or_tools(api, alice):
    weather = conversation_create(owner=alice, title="Weather")
    finished_run(weather, alice, "Will it rain in Lisbon?", answer("Expect light drizzle| in the afternoon."))
    tools = conversation_create(owner=alice, title="Tools")
    finished_run(
        tools,
        alice,
        "Compute something",
        [
            {"type": "thinking", "content": "pondering quaternions"},
            {"type": "tool_start", "toolName": "calculator", "toolCallId": "c1", "arguments": '{"x": "zebrafish"}'},
            {
                "type": "tool_end",
                "toolName": "calculator",
                "toolCallId": "c1",
                "result": "octopus",
                "isError": False,
                "durationMs": 1,
            },
            {"type": "text", "content": "The result is four."},
        ],
    )
    assert titles(search(api, "lisbon")) == ["Weather"]  # the user message
    assert titles(search(api, "drizzle afternoon")) == ["Weather"]  # the answer, across deltas
    assert titles(search(api, "DRIZ")) == ["Weather"]  # word prefix, any case
    assert titles(search(api, "result four")) == ["Tools"]
    assert titles(search(api, "drizzle four")) == []  # every word, within one run
    for hidden in ("quaternions", "zebrafish", "octopus"):  # thinking, arguments, results
        assert titles(search(api, hidden)) == []
    assert set(titles(search(api, ""))) == {"Weather", "Tools"}  # no query: the whole list


def test_title_matches_and_snippets(api, alice):
    renamed = conversation_create(owner=alice, title="Quarterly budget review")
    long = conversation_create(owner=alice, title="Long one")
    filler = " ".join(f"word{i}" for i in range(200))
    finished_run(long, alice, "Tell me a story", answer(f"{filler} the hidden treasure lies here {filler}"))
    hit = search(api, "budget")["conversations"]
    assert [c["id"] for c in hit] == [str(renamed.pk)] and "budget" in hit[0]["snippet"]
    (story,) = search(api, "treasure")["conversations"]
    snippet = story["snippet"]
    assert "hidden treasure lies here" in snippet
    assert len(snippet) <= 170 and snippet.startswith("…") and snippet.endswith("…")


def test_discarded_attempt_is_not_the_answer(api, alice):
    conversation = conversation_create(owner=alice, title="Retry")
    finished_run(
        conversation,
        alice,
        "hello",
        [
            {"type": "text", "content": "abandoned partial"},
            {"type": "error", "code": "LLM_CALL_FAILED", "message": "boom (1/3)", "detail": ""},
            {"type": "text", "content": "final words"},
        ],
    )
    assert titles(search(api, "final")) == ["Retry"]
    assert titles(search(api, "abandoned")) == []


def test_never_another_users_hits(api, alice, make_user):
    bob = make_user("bob")
    secret = conversation_create(owner=bob, title="Bob's plans")
    finished_run(secret, bob, "my secret marmalade recipe", answer("Use oranges."))
    mine = conversation_create(owner=alice, title="Mine")
    finished_run(mine, alice, "about marmalade", answer("Sure."))
    assert [c["id"] for c in search(api, "marmalade")["conversations"]] == [str(mine.pk)]
    assert search(api, "oranges")["conversations"] == []
    assert search(api, "Bob")["conversations"] == []


def test_search_is_paged_with_the_cursor(api, alice):
    for i in range(5):
        conversation = conversation_create(owner=alice, title=f"c{i}")
        finished_run(conversation, alice, f"pancake number {i}", answer("Syrup."))
    finished_run(conversation_create(owner=alice, title="other"), alice, "waffle", answer("No."))
    first = search(api, "pancake", limit=2)
    assert titles(first) == ["c4", "c3"] and first["next"]
    second = search(api, "pancake", limit=2, before=first["next"])
    third = search(api, "pancake", limit=2, before=second["next"])
    assert titles(second) == ["c2", "c1"] and titles(third) == ["c0"] and third["next"] is None


def test_indexed_once_at_complete_and_hostile_queries(api, alice):
    conversation = conversation_create(owner=alice, title="")
    run, _ = run_start(conversation=conversation, user=alice, content="unfinished business", model="m", worker="")
    events_append(conversation_id=conversation.pk, run_id=run.pk, payloads=answer("still typing"))
    assert not SearchDocument.objects.exists()  # no work per delta
    events_append(
        conversation_id=conversation.pk,
        run_id=run.pk,
        payloads=[{"type": "complete", "status": "succeeded"}],
        outcome=RunOutcome(status="succeeded"),
    )
    assert SearchDocument.objects.get().body == "unfinished business\n\nstill typing"
    assert titles(search(api, "typing")) == ["unfinished business"]
    # Query syntax of either database is plain text here.
    for q in ['"', "a OR b", "NEAR(x y)", "foo:* & !bar", "'; DROP TABLE chat_event; --", "*", "^x", "%_"]:
        search(api, q)
    assert api.get("/api/conversations/", {"q": "x" * 201}).status_code == 400
    assert api.get("/api/conversations/", {"q": "a\x00b"}).status_code == 400


def test_a_long_answer_of_distinct_words_is_indexed_up_to_the_cap(api, alice):
    """A few MB of distinct words once made PostgreSQL refuse the document's tsvector (past 1 MB),
    and with it the run's `complete`: the document keeps MAX_DOCUMENT_CHARS of the text."""
    words = [f"{i:x}" for i in range(600_000)]  # about 3.3 MB, every word its own lexeme
    conversation = conversation_create(owner=alice, title="")
    finished_run(conversation, alice, "count in hex", [{"type": "text", "content": " ".join(words)}])
    document = SearchDocument.objects.get()
    assert len(document.body) == MAX_DOCUMENT_CHARS
    # The densest text at the cap: short distinct words, one per two or three characters.
    dense = conversation_create(owner=alice, title="")
    finished_run(dense, alice, "dense", [{"type": "text", "content": " ".join(words[:40_000])}])
    assert titles(search(api, "1f3a")) == ["dense", "count in hex"]  # a word inside the cap
    assert titles(search(api, "8f000")) == []  # past it


def test_interrupted_run_is_indexed(alice):
    conversation = conversation_create(owner=alice)
    run, _ = run_start(conversation=conversation, user=alice, content="crashing soon", model="m", worker="w")
    run_interrupt(run_id=run.pk, message="gone")
    assert SearchDocument.objects.get(run=run).body == "crashing soon"


def test_deleting_a_conversation_removes_its_hits(api, alice):
    conversation = conversation_create(owner=alice, title="temp")
    finished_run(conversation, alice, "ephemeral note", answer("ok"))
    conversation_delete(conversation=conversation)
    assert search(api, "ephemeral")["conversations"] == []
    other = conversation_create(owner=alice, title="kept")
    finished_run(other, alice, "ephemeral again", answer("ok"))
    assert titles(search(api, "ephemeral")) == ["kept"]


def test_a_hit_in_the_users_words_ranks_above_one_in_an_answer(api, alice):
    """Newest first would put the answers' boilerplate first: two newer conversations only
    mention "deploy" in a stock closing line; the user's own question about it comes first,
    then the title hit's tier-mate, across pages, then the boilerplate hits, newest first."""
    asked = conversation_create(owner=alice, title="Servers")
    finished_run(asked, alice, "How do I deploy the staging server?", answer("Run the playbook."))
    titled = conversation_create(owner=alice, title="Deployment notes")
    finished_run(titled, alice, "What did we change?", answer("Nothing yet."))
    for name in ("Soup", "Bread"):
        conversation = conversation_create(owner=alice, title=name)
        finished_run(conversation, alice, f"A recipe for {name.lower()}", answer("Here it is.| Ask me to deploy it."))
    assert titles(search(api, "deploy")) == ["Deployment notes", "Servers", "Bread", "Soup"]
    # Paged with a cursor that keeps the tier: nothing repeated, nothing skipped.
    first = search(api, "deploy", limit=1)
    pages = [first]
    while pages[-1]["next"]:
        pages.append(search(api, "deploy", limit=1, before=pages[-1]["next"]))
    assert [t for page in pages for t in titles(page)] == ["Deployment notes", "Servers", "Bread", "Soup"]
    # A cursor of the whole list is not one of a search, and the other way round.
    plain = api.get("/api/conversations/", {"limit": 1}).json()["next"]
    assert api.get("/api/conversations/", {"q": "deploy", "before": plain}).status_code == 400
    assert api.get("/api/conversations/", {"before": first["next"]}).status_code == 400
    # The snippet of a conversation the user asked in comes from their words.
    (hit,) = [c for c in search(api, "deploy staging")["conversations"]]
    assert hit["snippet"] == "How do I deploy the staging server?"


def test_snippets_are_text_not_markdown(api, alice):
    conversation = conversation_create(owner=alice, title="Code")
    finished_run(
        conversation,
        alice,
        "How do I **reverse** a list?",
        answer(
            "Use `reversed(items)` or the [slice](https://docs.python.org/3/) `items[::-1]`:|\n\n```python\nprint(items[::-1])\n```\n\n- *fast*\n- <b>safe</b>"
        ),
    )
    (hit,) = search(api, "slice")["conversations"]
    # Code spans and blocks keep their content, a link its text; typed HTML stays text.
    assert hit["snippet"].endswith("Use reversed(items) or the slice items[::-1]: print(items[::-1]) fast <b>safe</b>")
    assert [mark for mark in ("`", "**", "](", "http") if mark in hit["snippet"]] == []
    (asked,) = search(api, "reverse")["conversations"]
    assert asked["snippet"] == "How do I reverse a list?"
