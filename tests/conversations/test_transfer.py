"""Export (JSON, Markdown) and import (chat.conversations.export and importing, POST /api/conversations/import/): a round
trip equal event for event, and hostile files refused with nothing created."""

from __future__ import annotations

import copy
import json

import pytest
from django.test import Client
from django.utils import timezone

from chat.conversations.selectors import conversation_for_user
from chat.conversations.services import conversation_create
from chat.eventlog.append import events_append
from chat.eventlog.types import RunOutcome
from chat.models import Conversation, Event, ModelCall, Run, SearchDocument, ToolRecord
from chat.runs.starts import run_start
from tests.http_body import response_body

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def run_with(conversation, user, content: str, payloads: list[dict], status: str = "succeeded") -> None:
    run, _ = run_start(conversation=conversation, user=user, content=content, model="m", worker="")
    # complete's usage is summed from the run's model calls when it is stored
    ModelCall.objects.create(
        run=run,
        iteration=1,
        attempt=1,
        started_at=timezone.now(),
        prompt_tokens=7,
        completion_tokens=3,
        total_tokens=10,
    )
    events_append(
        conversation_id=conversation.pk,
        run_id=run.pk,
        payloads=[*payloads, {"type": "complete", "status": status}],
        outcome=RunOutcome(status=status),
    )


@pytest.fixture
def rich(alice):
    """A conversation with every kind of event, unicode and a failed retry."""
    conversation = conversation_create(owner=alice, title="Rich — ünïcode ✓")
    run_with(
        conversation,
        alice,
        "What is 2+2? ```code``` <b>bold</b>",
        [
            {"type": "thinking", "content": "Let me think."},
            {"type": "text", "content": "lost attempt"},
            {"type": "error", "code": "LLM_CALL_FAILED", "message": "boom (1/3)", "detail": "503"},
            {
                "type": "tool_start",
                "toolName": "calculator",
                "toolCallId": "call-1",
                "arguments": '{"expression": "2+2"}',
            },
            {
                "type": "tool_end",
                "toolName": "calculator",
                "toolCallId": "call-1",
                "result": "4",
                "isError": False,
                "durationMs": 12,
            },
            {
                "type": "reference",
                "references": [{"title": "Maths", "url": "https://example.com/", "snippet": "2+2=4"}],
            },
            {"type": "text", "content": "It is **4** 🎉"},
        ],
    )
    run_with(
        conversation,
        alice,
        "and now fail",
        [{"type": "error", "code": "CANCELLED", "message": "stop", "detail": ""}],
        status="cancelled",
    )
    return conversation


def export(api, conversation, kind: str = "json"):
    response = api.get(f"/api/conversations/{conversation.pk}/export/", {"format": kind})
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment;")
    return response


def post_import(api, body):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return api.generic("POST", "/api/conversations/import/", raw, content_type="application/json")


def test_round_trip_equal_event_for_event(api, alice, rich):
    exported = json.loads(response_body(export(api, rich)))
    assert exported["conversation"]["title"] == rich.title
    response = post_import(api, exported)
    assert response.status_code == 201, response.content
    created = Conversation.objects.get(pk=response.json()["id"])
    assert created.pk != rich.pk and created.owner == alice and created.title == f"{rich.title} (imported)"
    again = json.loads(response_body(export(api, created)))
    originals, copies = exported["events"], again["events"]
    run_map = {o["runId"]: c["runId"] for o, c in zip(originals, copies)}
    assert len(run_map) == 2 and not set(run_map) & set(run_map.values())  # new run ids
    assert len(set(run_map.values())) == 2
    for original, copied in zip(originals, copies, strict=True):
        assert copied == {**original, "runId": run_map[original["runId"]]}
    assert created.last_seq == len(originals)
    statuses = dict(Run.objects.filter(conversation=created).values_list("pk", "status"))
    assert sorted(statuses.values()) == ["cancelled", "succeeded"]
    assert Run.objects.filter(conversation=created, total_tokens=10).count() == 2
    record = ToolRecord.objects.get(run__conversation=created)
    assert (record.tool_name, record.arguments, record.result, record.duration_ms) == (
        "calculator",
        '{"expression": "2+2"}',
        "4",
        12,
    )
    # Searchable at once, like the original, and the discarded attempt is not.
    hits = api.get("/api/conversations/", {"q": "4 🎉 is"}).json()["conversations"]
    assert {h["id"] for h in hits} == {str(rich.pk), str(created.pk)}
    assert api.get("/api/conversations/", {"q": "lost attempt"}).json()["conversations"] == []
    # The imported log can be continued: the next run gets the next seq.
    run, frames = run_start(conversation=created, user=alice, content="more", model="m", worker="")
    assert frames[0]["seq"] == len(originals) + 1


@pytest.mark.parametrize(
    ("title", "language", "imported"),
    [
        ("Plans", "en", "Plans (imported)"),
        ("  two\n lines ", "en", "two lines (imported)"),
        ("", "en", "Imported conversation"),
        ("计划", "zh-hans", "计划（已导入）"),
        ("", "zh-hans", "导入的对话"),
        ("y" * 200, "en", "y" * 189 + " (imported)"),  # cut to keep the mark within the title limit
    ],
)
def test_an_import_is_marked_as_imported_in_the_users_language(api, alice, title, language, imported):
    conversation = conversation_create(owner=alice, title="")
    run_with(conversation, alice, "hi", [{"type": "text", "content": "hello"}])  # an import needs a run
    Conversation.objects.filter(pk=conversation.pk).update(title=title)  # not retitled by its message
    exported = json.loads(response_body(export(api, conversation)))
    raw = json.dumps(exported).encode()
    response = api.generic(
        "POST",
        "/api/conversations/import/",
        raw,
        content_type="application/json",
        headers={"accept-language": language},
    )
    assert response.status_code == 201, response.content
    assert response.json()["title"] == imported
    assert Conversation.objects.get(pk=response.json()["id"]).title == imported


def test_markdown_transcript(api, rich):
    response = export(api, rich, "markdown")
    assert response["Content-Type"].startswith("text/markdown")
    text = response.content.decode()
    assert text.startswith("# Rich — ünïcode ✓\n")
    assert "## You\n\nWhat is 2+2? ```code``` <b>bold</b>" in text
    assert "<details><summary>Tool call: calculator</summary>" in text
    assert '"expression": "2+2"' in text and "It is **4** 🎉" in text
    assert "<details><summary>Thinking</summary>\n\nLet me think." in text
    assert "*The run ended: cancelled.*" in text


def test_export_is_owner_only_and_format_checked(api, make_user, rich):
    bob = Client()
    bob.force_login(make_user("bob"))
    assert bob.get(f"/api/conversations/{rich.pk}/export/").status_code == 404
    assert Client().get(f"/api/conversations/{rich.pk}/export/").status_code == 401
    assert api.get(f"/api/conversations/{rich.pk}/export/", {"format": "pdf"}).status_code == 400


@pytest.mark.parametrize(
    ("title", "disposition"),
    [
        # Not ASCII: RFC 5987 `filename*`, UTF-8 percent-encoded, which browsers decode.
        ("Rich — ünïcode ✓", "attachment; filename*=utf-8''Rich%20%E2%80%94%20%C3%BCn%C3%AFcode%20%E2%9C%93.{suffix}"),
        ("部署 计划", "attachment; filename*=utf-8''%E9%83%A8%E7%BD%B2%20%E8%AE%A1%E5%88%92.{suffix}"),
        # Separators, characters file systems refuse, control characters and a leading dot go.
        ('../etc/passwd: "a"\tb*?<x>|\x1b', 'attachment; filename="etc passwd a b x.{suffix}"'),
        ("  What is 6*7?  ", 'attachment; filename="What is 6 7.{suffix}"'),
        ("x" * 200, 'attachment; filename="' + "x" * 80 + '.{suffix}"'),
        # Nothing left to name it by: the id's first characters.
        ("", 'attachment; filename="conversation-{prefix}.{suffix}"'),
        ("../..", 'attachment; filename="conversation-{prefix}.{suffix}"'),
    ],
)
@pytest.mark.parametrize(("kind", "suffix"), [("json", "json"), ("markdown", "md")])
def test_export_is_named_after_the_title(api, alice, title, disposition, kind, suffix):
    conversation = conversation_create(owner=alice, title="")
    Conversation.objects.filter(pk=conversation.pk).update(title=title)  # as stored, unchecked
    conversation.refresh_from_db()
    response = export(api, conversation, kind)
    assert response["Content-Disposition"] == disposition.format(prefix=str(conversation.pk)[:8], suffix=suffix)


def good_file(api, rich) -> dict:
    return json.loads(response_body(export(api, rich)))


def broken(document: dict, change) -> dict:
    document = copy.deepcopy(document)
    change(document)
    return document


HOSTILE = {
    "not json": b"{nope",
    "a list": b"[]",
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "no events": lambda d: d.update(events=[]),
    "events not a list": lambda d: d.update(events={"0": 1}),
    "extra top-level key": lambda d: d.update(owner=1),
    "title wrong type": lambda d: d["conversation"].update(title=5),
    "title too long": lambda d: d["conversation"].update(title="x" * 201),
    "title with NUL": lambda d: d["conversation"].update(title="a\x00b"),
    "seq gap": lambda d: d["events"][3].update(seq=99),
    "seq as string": lambda d: d["events"][0].update(seq="1"),
    "seq as bool": lambda d: d["events"][0].update(seq=True),
    "unknown type": lambda d: d["events"][1].update(type="root_shell"),
    "content wrong type": lambda d: d["events"][0].update(content=["hi"]),
    "missing field": lambda d: d["events"][4].pop("toolCallId"),
    "isError wrong type": lambda d: d["events"][5].update(isError="no"),
    "surrogate": lambda d: d["events"][0].update(content="x\ud800y"),
    "NUL in an unknown field": lambda d: d["events"][0].update(extraNote="a\x00"),
    "huge integer": lambda d: d["events"][0].update(extraNote=10**30),
    "bad field name": lambda d: d["events"][0].update({"$where": 1}),
    "bad ts": lambda d: d["events"][0].update(ts="yesterday"),
    "runId missing": lambda d: d["events"][0].pop("runId"),
    "run left running": lambda d: d.update(events=d["events"][:-1]),
    "first run left running": lambda d: [e.update(runId=d["events"][0]["runId"]) for e in d["events"][:-1]],
    "run not starting with user_message": lambda d: d["events"][0].update(type="text"),
    "bad complete status": lambda d: d["events"][-1].update(status="running"),
    "tool call never ended": lambda d: d["events"][5].update(toolCallId="other"),
    "run split apart": lambda d: d["events"][-1].update(runId=d["events"][0]["runId"]),
    # Valid ISO times out of Python's range once made UTC: an OverflowError, not a ValueError.
    "ts before year 1 in UTC": lambda d: d["events"][0].update(ts="0001-01-01T00:00:00+14:00"),
    "ts after year 9999 in UTC": lambda d: d["events"][-1].update(ts="9999-12-31T23:59:59-14:00"),
    "ts without a zone": lambda d: d["events"][0].update(ts="2026-01-01T00:00:00"),
    # Strings that hold JSON nested past the limit of frames: no page could pretty-print them.
    "arguments nested 50,000 deep": lambda d: d["events"][4].update(arguments="[" * 50_000 + "]" * 50_000),
    "result nested 50,000 deep": lambda d: d["events"][5].update(result='{"a":' * 50_000 + "1" + "}" * 50_000),
    "a message holding deep JSON": lambda d: d["events"][0].update(content="[" * 600),
    "file nested past the limit": lambda d: d["events"][0].update(extraNote=_deep_list(600)),
}


def _deep_list(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize("case", HOSTILE)
def test_hostile_imports_are_refused_and_create_nothing(api, rich, case):
    hostile = HOSTILE[case]
    body = hostile if isinstance(hostile, bytes) else broken(good_file(api, rich), hostile)
    counts = (Conversation.objects.count(), Run.objects.count(), Event.objects.count(), SearchDocument.objects.count())
    response = post_import(api, body)
    assert response.status_code == 400, (case, response.content)
    assert response.json()["error"] == "bad_request" and response.json()["message"]
    assert counts == (
        Conversation.objects.count(),
        Run.objects.count(),
        Event.objects.count(),
        SearchDocument.objects.count(),
    )


def test_over_the_size_limit_is_413(api, rich, settings):
    settings.AGENT_MAX_IMPORT_BYTES = 1000
    body = good_file(api, rich)
    body["events"][0]["content"] = "x" * 2000
    assert post_import(api, body).status_code == 413
    assert Conversation.objects.count() == 1


def test_large_import_beyond_django_memory_limit(api, alice, settings):
    """Files up to AGENT_MAX_IMPORT_BYTES are read, whatever DATA_UPLOAD_MAX_MEMORY_SIZE says."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    conversation = conversation_create(owner=alice, title="big")
    run_with(conversation, alice, "y" * 5000, [])
    response = post_import(api, json.loads(response_body(export(api, conversation))))
    assert response.status_code == 201, response.content


def test_foreign_ids_are_not_trusted(api, alice, make_user):
    bob = make_user("bob")
    bobs = conversation_create(owner=bob, title="Bob's")
    run_with(bobs, bob, "private", [])
    bob_run = Run.objects.get(conversation=bobs)
    document = {
        "conversation": {"id": str(bobs.pk), "title": "Hijack"},
        "events": [
            {"seq": 1, "runId": str(bob_run.pk), "type": "user_message", "content": "mine now"},
            {"seq": 2, "runId": str(bob_run.pk), "type": "complete", "status": "succeeded"},
        ],
    }
    response = post_import(api, document)
    assert response.status_code == 201
    created = Conversation.objects.get(pk=response.json()["id"])
    assert created.pk != bobs.pk and created.owner == alice
    assert Run.objects.get(conversation=created).pk != bob_run.pk
    assert Event.objects.filter(conversation=bobs).count() == 2  # Bob's log untouched
    assert Event.objects.get(run=bob_run, type="user_message").payload["content"] == "private"
    assert conversation_for_user(user=bob, conversation_id=created.pk) is None


def test_import_requires_login_and_post(api):
    assert Client().post("/api/conversations/import/", b"{}", content_type="application/json").status_code == 401
    assert api.get("/api/conversations/import/").status_code == 405


def test_import_of_many_runs_indexes_every_one(api):
    """Runs are indexed in chunks (an import may hold more runs than SQLite takes parameters in
    one statement): every chunk is written."""
    events = []
    for i in range(1200):
        run_id = f"run-{i}"
        events += [
            {"seq": 2 * i + 1, "runId": run_id, "type": "user_message", "content": f"question {i} token{i}"},
            {"seq": 2 * i + 2, "runId": run_id, "type": "complete", "status": "succeeded"},
        ]
    response = post_import(api, {"conversation": {"title": "many"}, "events": events})
    assert response.status_code == 201, response.content
    assert SearchDocument.objects.filter(conversation_id=response.json()["id"]).count() == 1200
    assert [c["title"] for c in api.get("/api/conversations/", {"q": "token1199"}).json()["conversations"]] == [
        "many (imported)"
    ]


def test_markdown_marks_edited_messages_and_regenerated_answers(api, alice):
    conversation = conversation_create(owner=alice, title="Versions")

    def turn(answer: str, **version) -> int:
        run, frames = run_start(
            conversation=conversation, user=alice, content=version.pop("content", ""), model="m", worker="", **version
        )
        events_append(
            conversation_id=conversation.pk,
            run_id=run.pk,
            payloads=[{"type": "text", "content": answer}, {"type": "complete", "status": "succeeded"}],
            outcome=RunOutcome(status="succeeded"),
        )
        return frames[0]["seq"]

    one = turn("First answer.", content="first question")
    two = turn("Second answer, take 1.", content="second question")
    turn("Follow-up answer.", content="follow-up")
    again = turn("Second answer, take 2.", regenerates=two)
    turn("Second answer, take 3.", regenerates=again)
    turn("Answer to the edit.", edits=two, content="second question, edited")
    assert one == 1
    text = export(api, conversation, "markdown").content.decode()
    # The question is written once; its answers follow it, each marked, then the edit.
    assert text.count("second question\n") == 1
    expected = [
        "## You\n\nfirst question",
        "## You (version 1 of 2)\n\nsecond question",
        "## Assistant (answer 1 of 3)\n\nSecond answer, take 1.",
        "## You\n\nfollow-up",  # what continued from answer 1
        "## Assistant (answer 2 of 3)\n\nSecond answer, take 2.",
        "## Assistant (answer 3 of 3)\n\nSecond answer, take 3.",
        "## You (edited: version 2 of 2)\n\nsecond question, edited",
        "## Assistant\n\nAnswer to the edit.",
    ]
    places = [text.find(part) for part in expected]
    assert -1 not in places, [part for part, place in zip(expected, places) if place == -1]
    assert places == sorted(places)


def test_markdown_shows_a_compaction_as_its_summary_row_after_the_turns_it_summarized(api, alice):
    """As the chat page draws it: a folded "Earlier conversation summarized" after the newest turn
    it summarized (throughSeq), the automatic one's run going on below it; a compaction run (on
    demand, no user_message) shows only as its row."""
    conversation = conversation_create(owner=alice, title="Long")
    run_with(conversation, alice, "first question", [{"type": "text", "content": "First answer."}])
    first_end = Event.objects.filter(conversation=conversation).order_by("-seq").values_list("seq", flat=True)[0]
    compaction = {
        "type": "compaction",
        "summary": "The user asked a first question.",
        "throughSeq": first_end,
        "previousSeq": None,
        "turns": 1,
        "tokensBefore": 900,
        "tokensAfter": 120,
        "trigger": "auto",
    }
    run_with(conversation, alice, "second question", [compaction, {"type": "text", "content": "Second answer."}])
    second_end = Event.objects.filter(conversation=conversation).order_by("-seq").values_list("seq", flat=True)[0]
    manual = Run.objects.create(conversation=conversation, user=alice, model="m", status="running")
    events_append(
        conversation_id=conversation.pk,
        run_id=manual.pk,
        payloads=[
            {**compaction, "summary": "Two questions so far.", "throughSeq": second_end, "turns": 2},
            {"type": "complete", "status": "succeeded"},
        ],
        outcome=RunOutcome(status="succeeded"),
    )
    text = export(api, conversation, "markdown").content.decode()
    row = "<details><summary>Earlier conversation summarized ({})</summary>\n\n{}\n\n</details>"
    expected = [
        "## You\n\nfirst question",
        "First answer.",
        row.format("1 turn", "The user asked a first question."),
        "## You\n\nsecond question",
        "Second answer.",
        row.format("2 turns", "Two questions so far."),
    ]
    places = [text.find(part) for part in expected]
    assert -1 not in places, [part for part, place in zip(expected, places) if place == -1]
    assert places == sorted(places)
    assert text.count("Earlier conversation summarized") == 2
    assert text.rstrip().endswith("</details>")  # the compaction run shows nothing but its row
