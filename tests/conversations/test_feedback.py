"""Feedback on answers (docs/protocol.md, "Feedback"): one rating per run by the owner, replaceable, seen by staff."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from chat.conversations.services import conversation_create, feedback_set
from chat.models import Feedback, Run
from chat.runs.starts import run_start

pytestmark = [pytest.mark.django_db, pytest.mark.services]


@pytest.fixture
def finished_run(alice):
    conversation = conversation_create(owner=alice, title="rated")
    run, _ = run_start(conversation=conversation, user=alice, content="hi", model="m", worker="")
    Run.objects.filter(pk=run.pk).update(status=Run.Status.SUCCEEDED)
    return run


def _post(client, run_id, body):
    return client.post(f"/api/runs/{run_id}/feedback/", body, content_type="application/json")


def test_the_owner_rates_an_answer_and_changes_the_rating(api, alice, finished_run):
    first = _post(api, finished_run.pk, {"rating": 1})
    assert first.status_code == 200
    assert {k: v for k, v in first.json().items() if k != "updatedAt"} == {
        "runId": str(finished_run.pk),
        "rating": 1,
        "comment": "",
    }
    second = _post(api, finished_run.pk, {"rating": -1, "comment": "  The sum is wrong.  "})
    assert second.status_code == 200 and second.json()["rating"] == -1
    stored = Feedback.objects.get()  # replaced, not added
    assert (stored.run_id, stored.user, stored.rating, stored.comment) == (
        finished_run.pk,
        alice,
        -1,
        "The sum is wrong.",
    )
    listed = api.get(f"/api/conversations/{finished_run.conversation_id}/feedback/").json()["feedback"]
    assert [(f["runId"], f["rating"], f["comment"]) for f in listed] == [
        (str(finished_run.pk), -1, "The sum is wrong.")
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "rating must be 1 or -1"),
        ({"rating": 0}, "rating must be 1 or -1"),
        ({"rating": 2}, "rating must be 1 or -1"),
        ({"rating": True}, "rating must be 1 or -1"),
        ({"rating": "1"}, "rating must be 1 or -1"),
        ({"rating": 1.0}, "rating must be 1 or -1"),
        ({"rating": 1, "comment": 5}, "comment must be a string"),
        ({"rating": 1, "comment": "x" * 2001}, "comment is longer than 2000 characters"),
        ({"rating": 1, "comment": "bad \x00 byte"}, "comment contains text that cannot be stored"),
        ([1], "the body must be a JSON object"),
    ],
)
def test_bad_feedback_is_400_and_stores_nothing(api, finished_run, body, message):
    response = _post(api, finished_run.pk, body)
    assert response.status_code == 400 and message in response.json()["message"]
    assert not Feedback.objects.exists()


def test_a_running_answer_cannot_be_rated_yet(api, alice):
    conversation = conversation_create(owner=alice)
    run, _ = run_start(conversation=conversation, user=alice, content="hi", model="m", worker="")
    assert _post(api, run.pk, {"rating": 1}).status_code == 409
    assert not Feedback.objects.exists()


def test_another_user_gets_404_and_changes_nothing(api, alice, make_user, finished_run):
    _post(api, finished_run.pk, {"rating": 1, "comment": "good"})
    mallory = Client()
    mallory.force_login(make_user("mallory"))
    foreign = _post(mallory, finished_run.pk, {"rating": -1, "comment": "pwned"})
    missing = _post(mallory, uuid.uuid4(), {"rating": -1})
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json() == missing.json()
    assert mallory.get(f"/api/conversations/{finished_run.conversation_id}/feedback/").status_code == 404
    assert Client().post(f"/api/runs/{finished_run.pk}/feedback/", {"rating": 1}).status_code == 401
    stored = Feedback.objects.get()
    assert (stored.rating, stored.comment, stored.user) == (1, "good", alice)


def test_staff_see_feedback_in_the_admin(alice, finished_run):
    feedback_set(run=finished_run, user=alice, rating=-1, comment="<b>too slow</b>")
    staff = Client()
    staff.force_login(get_user_model().objects.create_superuser("root", password="pw-for-tests-123"))
    listing = staff.get("/admin/chat/feedback/")
    assert listing.status_code == 200
    assert "&lt;b&gt;too slow&lt;/b&gt;" in listing.content.decode()
    feedback = Feedback.objects.get()
    assert staff.get(f"/admin/chat/feedback/{feedback.pk}/change/").status_code == 200
    assert staff.get("/admin/chat/feedback/add/").status_code == 403
