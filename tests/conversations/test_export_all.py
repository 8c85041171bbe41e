"""Every conversation at once (GET /api/conversations/export/) and that file imported back
(POST /api/conversations/import/): a round trip equal event for event, a run in progress left out,
and a file with one bad conversation refused whole, with nothing created."""

from __future__ import annotations

import copy
import json

import pytest
from django.test import Client

from chat.conversations import importing
from chat.conversations.services import conversation_create
from chat.eventlog.reads import events_for_export
from chat.models import Conversation, Event, Run
from chat.runs.starts import run_start
from tests.conversations.test_transfer import run_with
from tests.http_body import response_body

pytestmark = [pytest.mark.django_db, pytest.mark.services]

# What an event frame holds that an import renews: the run's id.
RENEWED = ("runId",)


def answered(owner, title: str, question: str, answer: str) -> Conversation:
    conversation = conversation_create(owner=owner, title=title)
    run_with(conversation, owner, question, [{"type": "text", "content": answer}])
    return conversation


def comparable(conversation_id) -> list[dict]:
    return [
        {k: v for k, v in frame.items() if k not in RENEWED}
        for frame in events_for_export(conversation_id=conversation_id)
    ]


def test_every_conversation_exports_as_one_download_that_imports_back_whole(alice, api, make_user):
    first = answered(alice, "First ✓", "What is 2+2?", "It is **4**.")
    second = answered(alice, "Second", "And 3+3?", "Six.")
    run_with(second, alice, "And 4+4?", [{"type": "text", "content": "Eight."}])
    answered(make_user("bob"), "Bob's", "secret?", "yes")  # another user's: never in alice's file

    answer = api.get("/api/conversations/export/")
    assert answer.status_code == 200 and answer["Content-Type"] == "application/json"
    assert answer["Content-Disposition"].startswith('attachment; filename="agentsite-conversations-')
    raw = response_body(answer)  # a stream: read once
    exported = json.loads(raw)
    assert [doc["conversation"]["title"] for doc in exported["conversations"]] == ["First ✓", "Second"]
    assert [len(doc["events"]) for doc in exported["conversations"]] == [3, 6]
    # Each entry is exactly what the single export of that conversation gives.
    for conversation, document in zip((first, second), exported["conversations"], strict=True):
        assert document == json.loads(response_body(api.get(f"/api/conversations/{conversation.pk}/export/")))

    imported = api.post("/api/conversations/import/", raw, content_type="application/json")
    assert imported.status_code == 201, imported.content
    made = imported.json()["conversations"]
    assert [c["title"] for c in made] == ["First ✓ (imported)", "Second (imported)"]
    assert Conversation.objects.filter(owner=alice).count() == 4
    for original, new in zip((first, second), made, strict=True):
        assert comparable(new["id"]) == comparable(original.pk)
        assert (
            Run.objects.filter(conversation_id=new["id"], imported=True).count()
            == Run.objects.filter(conversation=original).count()
        )


def test_a_run_in_progress_and_a_conversation_without_an_answer_are_left_out(alice, api):
    answered(alice, "Done", "q", "a")
    busy = answered(alice, "Busy", "q1", "a1")
    run_start(conversation=busy, user=alice, content="still going", model="m", worker="")
    conversation_create(owner=alice, title="Empty")
    exported = json.loads(response_body(api.get("/api/conversations/export/")))
    assert [doc["conversation"]["title"] for doc in exported["conversations"]] == ["Done", "Busy"]
    busy_events = exported["conversations"][1]["events"]
    assert [e["type"] for e in busy_events] == ["user_message", "text", "complete"]
    # So the file imports back, although a run was going when it was taken.
    assert (
        api.post("/api/conversations/import/", json.dumps(exported), content_type="application/json").status_code == 201
    )


def test_a_user_without_conversations_gets_an_empty_list(api):
    assert json.loads(response_body(api.get("/api/conversations/export/"))) == {"conversations": []}


@pytest.mark.parametrize(
    "spoil, problem",
    [
        (lambda doc: doc["conversations"][1]["events"].pop(), "conversations[1]: the last run has no complete"),
        (lambda doc: doc["conversations"][2].pop("events"), "conversations[2]: "),
        (lambda doc: doc["conversations"].append("nope"), "conversations[3]: "),
        (lambda doc: doc.update(extra=1), '"conversations" (a list) only'),
        (lambda doc: doc.update(conversations={}), '"conversations" (a list) only'),
        (lambda doc: doc["conversations"].clear(), "no conversation"),
    ],
)
def test_a_file_with_one_bad_conversation_creates_none(alice, api, spoil, problem):
    for n in range(3):
        answered(alice, f"c{n}", "q", "a")
    document = json.loads(response_body(api.get("/api/conversations/export/")))
    before = (Conversation.objects.count(), Run.objects.count(), Event.objects.count())
    spoiled = copy.deepcopy(document)
    spoil(spoiled)
    answer = api.post("/api/conversations/import/", json.dumps(spoiled), content_type="application/json")
    assert answer.status_code == 400 and problem in answer.json()["message"], answer.json()
    assert (Conversation.objects.count(), Run.objects.count(), Event.objects.count()) == before


def test_a_failure_while_writing_the_third_conversation_leaves_none(alice, api, monkeypatch):
    """All or nothing also past the checks: a write that fails midway rolls back the ones before."""
    for n in range(3):
        answered(alice, f"c{n}", "q", "a")
    raw = response_body(api.get("/api/conversations/export/"))
    before = Conversation.objects.count()
    real, calls = importing.conversation_import, []

    def failing(**kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("disk full")
        return real(**kwargs)

    monkeypatch.setattr(importing, "conversation_import", failing)
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    answer = client.post("/api/conversations/import/", raw, content_type="application/json")
    assert answer.status_code == 500 and len(calls) == 3
    assert Conversation.objects.count() == before


def test_export_of_all_needs_a_sign_in(client, db):
    assert client.get("/api/conversations/export/").status_code == 401
