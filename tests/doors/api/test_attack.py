"""The attack pass of issue 22: hostile values of every field a user (or a staff member) sends to
the recent endpoints, through the real HTTP API. Each answer is a clear 4xx (or a 200 that shows
the bad input), never a 500 and never a traceback; and nothing is written by a refused request."""

from __future__ import annotations

import base64
import json
import uuid

import pytest
from django.test import Client

from chat.conversations.services import conversation_create
from chat.eventlog.append import events_append
from chat.eventlog.types import RunOutcome
from chat.models import Conversation, Event, Feedback, Run
from chat.runs.starts import run_start
from tests.ops.test_metrics import staff_client

pytestmark = [pytest.mark.django_db, pytest.mark.services]

NASTY_TEXT = [
    "\x00",
    "a\x00b",
    "\ud800",
    "x" * 100_000,
    "\u202e\u2066evil",
    "'; DROP TABLE chat_run; --",
    '"unterminated',
    "NEAR(a b) OR * AND NOT ^",
    "%_\\",
    "[" * 600,
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-14:00",
]
# In a query string: a lone surrogate cannot be sent, its UTF-8-looking bytes can (decoded as U+FFFD).
NASTY_QUERY = [value for value in NASTY_TEXT if value != "\ud800"]
NASTY_NUMBERS = ["-1", "0", "1e308", "nan", "inf", "-inf", "9" * 400, "1.5", "0x10", "²", "", " 1"]


@pytest.fixture
def alice(make_user):
    return make_user("alice")


@pytest.fixture
def api(alice):
    client = Client()
    client.force_login(alice)
    return client


@pytest.fixture
def finished_run(alice) -> Run:
    conversation = conversation_create(owner=alice, title="pancake recipe")
    run, _ = run_start(conversation=conversation, user=alice, content="pancake?", model="m", worker="")
    events_append(
        conversation_id=conversation.pk,
        run_id=run.pk,
        payloads=[{"type": "text", "content": "Flour and eggs."}, {"type": "complete", "status": "succeeded"}],
        outcome=RunOutcome(status="succeeded"),
    )
    return run


def _never_500(response) -> None:
    body = b"".join(response)  # a streamed body too (the events route)
    assert response.status_code < 500, body[:500]
    assert b"Traceback" not in body


def _cursor(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode("utf-8", "surrogatepass")).decode().rstrip("=")


@pytest.mark.parametrize("value", NASTY_QUERY, ids=range(len(NASTY_QUERY)))
def test_the_list_and_search_answer_any_parameter(api, finished_run, value):
    for params in (
        {"q": value},
        {"before": value},
        {"limit": value},
        {"before": _cursor(f"{value}|{uuid.uuid4()}")},
        {"before": _cursor(f"2026-01-01T00:00:00+00:00|{value}")},
        {"q": "pancake", "before": _cursor(f"{value}|{uuid.uuid4()}")},
    ):
        response = api.get("/api/conversations/", params)
        _never_500(response)
        assert response.status_code in (200, 400)
        if "q" in params and response.status_code == 200:
            assert isinstance(response.json()["conversations"], list)


@pytest.mark.parametrize("value", [*NASTY_QUERY, *NASTY_NUMBERS], ids=range(len(NASTY_QUERY) + len(NASTY_NUMBERS)))
def test_export_and_events_answer_any_parameter(api, finished_run, value):
    conversation = finished_run.conversation_id
    _never_500(api.get(f"/api/conversations/{conversation}/export/", {"format": value}))
    _never_500(api.get(f"/api/conversations/{conversation}/events/", {"after": value}))


@pytest.mark.parametrize(
    "body",
    [{"rating": value} for value in (0, 2, -2, "1", True, None, 1.0, 10**30, [], {}, "inf")]
    + [{"rating": 1, "comment": value} for value in ("\x00", "\ud800", 5, ["x"], "x" * 100_000)]
    + [{}, [], "x", None],
    ids=lambda body: json.dumps(body)[:40],
)
def test_feedback_refuses_any_bad_body_with_a_400(api, finished_run, body):
    before = Feedback.objects.count()
    response = api.post(f"/api/runs/{finished_run.pk}/feedback/", json.dumps(body), content_type="application/json")
    _never_500(response)
    if response.status_code < 300:  # a long comment is allowed; nothing else here is
        assert body.get("comment", "").startswith("x")
    else:
        assert response.status_code == 400 and Feedback.objects.count() == before


@pytest.mark.parametrize(
    "body",
    [{"title": value} for value in (*NASTY_TEXT, 5, None, [], {"a": 1})]
    + [{"agent": value} for value in ("\x00", "nope", 5, None, [], "x" * 10_000)],
    ids=lambda body: json.dumps(body, ensure_ascii=True)[:40],
)
def test_conversation_create_and_rename_answer_any_field(api, finished_run, body):
    created = api.post("/api/conversations/", json.dumps(body), content_type="application/json")
    _never_500(created)
    renamed = api.patch(
        f"/api/conversations/{finished_run.conversation_id}/", json.dumps(body), content_type="application/json"
    )
    _never_500(renamed)
    assert Conversation.objects.get(pk=finished_run.conversation_id).title in ("pancake recipe", body.get("title"))


INSPECTOR_FIELDS = ["conversation", "user", "status", "model", "since", "until", "errors", "slower_than",
                    "feedback", "origin", "sort", "page", "window"]  # fmt: skip


@pytest.mark.parametrize("value", [*NASTY_QUERY, *NASTY_NUMBERS, "0001-01-01", "9999-12-31", "2026-02-30"])
def test_the_inspector_answers_any_filter(finished_run, value):
    staff = staff_client()
    for field in INSPECTOR_FIELDS:
        _never_500(staff.get("/inspect/", {field: value}))
        _never_500(staff.get("/inspect/dashboard/", {field: value}))


def test_query_bytes_that_are_not_utf8_are_no_500(api, finished_run):
    for raw in ("q=%ED%A0%80", "q=%FF", "before=%00", "limit=%ED%A0%80"):
        _never_500(api.get(f"/api/conversations/?{raw}"))
    _never_500(staff_client().get("/inspect/?user=%ED%A0%80&model=%00"))


def test_the_inspector_and_the_trace_answer_any_run_id(finished_run):
    staff = staff_client()
    for run_id in (uuid.uuid4(), "not-a-uuid", "%00", "0" * 10_000):
        _never_500(staff.get(f"/inspect/runs/{run_id}/"))
        _never_500(staff.get(f"/api/runs/{run_id}/trace/"))
    assert staff.get(f"/api/runs/{finished_run.pk}/trace/").status_code == 200


@pytest.mark.parametrize("header", ["Bearer \x00", "Bearer " + "x" * 10_000, "Basic Zm9v", "Bearer", "\ud800"])
def test_metrics_answer_any_authorization(settings, header):
    settings.METRICS_TOKEN = "s3cret"
    response = Client().get("/metrics", HTTP_AUTHORIZATION=header)
    assert response.status_code == 404


def test_refused_requests_write_nothing(api, finished_run):
    counts = (Conversation.objects.count(), Run.objects.count(), Event.objects.count())
    for body in (b"[" * 100_000, b'{"title": "\\u0000"}', b"\xff\xfe", b'{"events": 1}'):
        _never_500(api.post("/api/conversations/import/", body, content_type="application/json"))
    assert counts == (Conversation.objects.count(), Run.objects.count(), Event.objects.count())


# --- WebSocket frames: versions (edit, regenerate), messages, approvals --------------------------
HOSTILE_SEQS = ["1", 1.5, True, -1, 2**70, None, [], {}, 10**400, 0]
HOSTILE_FRAMES = (
    [{"type": "edit", "seq": seq, "content": "x"} for seq in HOSTILE_SEQS]
    + [{"type": "regenerate", "seq": seq} for seq in HOSTILE_SEQS]
    + [{"type": "edit", "seq": 1, "content": value} for value in (5, None, ["x"], "\x00", "\ud800", "x" * 40_000)]
    + [{"type": "message", "content": "x", "parentSeq": seq} for seq in HOSTILE_SEQS if seq is not None]
    + [{"type": "message", "content": "x", "attachments": value}
       for value in ("a", [5], ["../../etc/passwd"], [None], ["x" * 10_000], [{"path": "a"}], ["\x00"])]
    + [{"type": "approve", "toolCallId": value, "decision": "approve"} for value in (5, None, "", "x" * 10_000, "\x00", [])]
    + [{"type": "approve", "toolCallId": "call_0", "decision": value} for value in ("maybe", 1, None, "APPROVE", "")]
    + [{"type": "approve", "toolCallId": "call_0", "decision": "deny", "reason": value} for value in (5, "\x00", [])]
)  # fmt: skip


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("frame", HOSTILE_FRAMES, ids=lambda f: json.dumps(f, ensure_ascii=True)[:60])
async def test_hostile_frames_get_an_error_frame_and_start_nothing(conversation, registry, frame):
    from asgiref.sync import sync_to_async

    from tests.asgi_socket import Socket

    runs = await Run.objects.acount()
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    text = json.dumps(frame) if "\ud800" not in str(frame) else json.dumps(frame, ensure_ascii=True)
    await socket.send(text)
    error = await socket.recv()
    assert error["type"] == "error" and "seq" not in error, error
    assert error["code"] in ("BAD_REQUEST", "TOO_LARGE"), error
    await socket.send({"type": "ping"})
    assert await socket.recv() == {"type": "pong"}  # still open
    await socket.close()
    assert await Run.objects.acount() == runs
    assert await sync_to_async(Event.objects.filter(conversation=conversation).count)() == 0
