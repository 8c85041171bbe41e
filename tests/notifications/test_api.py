"""`/api/notifications/` (docs/protocol.md, "Notifications"): the list field by field, newest
first, `unread`, `limit` and the `before` cursor; marking read by ids or all; owner-only (another
user's notifications are never listed nor marked); refusals."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client

from chat.accounts.tokens import token_create
from chat.conversations.services import conversation_create
from chat.models import Notification, Run
from chat.notifications.services import KEEP, notification_create

pytestmark = pytest.mark.django_db


def post(client, path, body, **extra):
    return client.post(path, data=json.dumps(body), content_type="application/json", **extra)


@pytest.fixture
def bob(make_user):
    return make_user("bob")


def made(owner, n: int = 1, **fields) -> list[Notification]:
    return [
        notification_create(owner_id=owner.pk, kind="schedule_failed", title=f"n{i}", code="RATE_LIMITED", **fields)
        for i in range(n)
    ]


def test_the_list_field_by_field(api, alice):
    conversation = conversation_create(owner=alice, title="Digest")
    run = Run.objects.create(conversation=conversation, user=alice, status="succeeded")
    notification = notification_create(
        owner_id=alice.pk,
        kind="run_finished",
        title="Digest",
        body="the answer",
        conversation_id=conversation.pk,
        run_id=run.pk,
        status="succeeded",
    )
    waiting = notification_create(
        owner_id=alice.pk,
        kind="approval_waiting",
        title="Digest",
        conversation_id=conversation.pk,
        run_id=run.pk,
        tool_call_id="call_0",
        tool_name="bash",
    )
    r = api.get("/api/notifications/")
    assert r.status_code == 200
    body = r.json()
    assert (body["unread"], body["next"]) == (2, None)
    first, second = body["notifications"]
    assert first == {
        "id": waiting.pk,
        "kind": "approval_waiting",
        "title": "Digest",
        "body": "",
        "conversationId": str(conversation.pk),
        "runId": str(run.pk),
        "scheduleId": None,
        "triggerId": None,
        "status": None,
        "createdAt": waiting.created_at.isoformat(),
        "read": False,
        "toolCallId": "call_0",
        "toolName": "bash",
    }
    assert (second["id"], second["kind"], second["status"], second["body"]) == (
        notification.pk,
        "run_finished",
        "succeeded",
        "the answer",
    )
    assert "toolCallId" not in second and "code" not in second
    schedule_id = uuid.uuid4()
    [failed] = made(alice, schedule_id=schedule_id)
    top = api.get("/api/notifications/").json()["notifications"][0]
    assert (top["id"], top["code"], top["scheduleId"]) == (failed.pk, "RATE_LIMITED", str(schedule_id))


def test_unread_limit_and_the_cursor(api, alice):
    rows = made(alice, 5)
    Notification.objects.filter(pk=rows[0].pk).update(read=True)
    page = api.get("/api/notifications/?limit=2").json()
    assert [n["id"] for n in page["notifications"]] == [rows[4].pk, rows[3].pk]
    assert page["unread"] == 4 and page["next"] is not None
    rest = api.get(f"/api/notifications/?limit=2&before={page['next']}").json()
    assert [n["id"] for n in rest["notifications"]] == [rows[2].pk, rows[1].pk]
    last = api.get(f"/api/notifications/?limit=2&before={rest['next']}").json()
    assert ([n["id"] for n in last["notifications"]], last["next"]) == ([rows[0].pk], None)
    unread = api.get("/api/notifications/?unread=1").json()
    assert [n["id"] for n in unread["notifications"]] == [r.pk for r in reversed(rows[1:])]
    assert all(not n["read"] for n in unread["notifications"])
    many = api.get("/api/notifications/?limit=1000").json()  # at most 200: all five here
    assert len(many["notifications"]) == 5


@pytest.mark.parametrize("query, field", [("limit=0", "limit"), ("limit=x", "limit"), ("before=abc", "before")])
def test_a_bad_query_is_refused(api, query, field):
    r = api.get(f"/api/notifications/?{query}")
    assert r.status_code == 400
    assert (r.json()["error"], r.json()["field"]) == ("bad_request", field)


def test_another_users_notifications_are_never_seen_nor_marked(api, alice, bob):
    [mine] = made(alice)
    [theirs] = made(bob)
    listed = api.get("/api/notifications/").json()
    assert [n["id"] for n in listed["notifications"]] == [mine.pk] and listed["unread"] == 1
    r = post(api, "/api/notifications/read/", {"ids": [theirs.pk, 999999, "x", -5, 10**30, "٣"]})
    assert r.status_code == 200 and r.json() == {"unread": 1}
    assert not Notification.objects.get(pk=theirs.pk).read
    r = post(api, "/api/notifications/read/", {"all": True})
    assert r.json() == {"unread": 0}
    assert Notification.objects.get(pk=mine.pk).read and not Notification.objects.get(pk=theirs.pk).read


def test_marking_read_by_ids(api, alice):
    rows = made(alice, 3)
    r = post(api, "/api/notifications/read/", {"ids": [rows[0].pk, str(rows[2].pk)]})
    assert r.status_code == 200 and r.json() == {"unread": 1}
    assert [n.read for n in Notification.objects.order_by("id")] == [True, False, True]


@pytest.mark.parametrize(
    "body",
    [{}, {"all": False}, {"ids": "1"}, {"ids": [1], "all": True}, {"all": "yes"}, {"other": 1}, [1], {"ids": [[1]]}]
    + [{"ids": [True]}, {"ids": [None]}, {"ids": [1.5]}],
)
def test_another_body_is_refused(api, body):
    r = post(api, "/api/notifications/read/", body)
    assert r.status_code == 400 and r.json()["error"] == "bad_request"


def test_signed_out_and_wrong_methods(api):
    assert Client().get("/api/notifications/").status_code == 401
    assert post(Client(), "/api/notifications/read/", {"all": True}).status_code == 401
    assert api.post("/api/notifications/").status_code == 405
    assert api.get("/api/notifications/read/").status_code == 405


def test_a_token_reads_and_marks_without_csrf(alice):
    made(alice, 2)
    _token, value = token_create(user=alice, name="script")
    client = Client(enforce_csrf_checks=True)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {value}"}
    assert client.get("/api/notifications/", **auth).json()["unread"] == 2
    assert post(client, "/api/notifications/read/", {"all": True}, **auth).json() == {"unread": 0}


def test_a_session_needs_csrf_to_mark(alice):
    made(alice)
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert post(client, "/api/notifications/read/", {"all": True}).status_code == 403


def test_a_user_keeps_their_newest_500(alice, bob):
    made(bob)
    made(alice, KEEP + 3)
    kept = Notification.objects.filter(owner=alice)
    assert kept.count() == KEEP
    assert min(kept.values_list("title", flat=True), key=lambda t: int(t[1:])) == "n3"
    assert Notification.objects.filter(owner=bob).count() == 1
