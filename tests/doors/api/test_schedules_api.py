"""`/api/schedules/` (docs/protocol.md, "Schedules"): each field's rules, the answer's shape, the
next slot, owner-only access, the per-user limit, session+CSRF or a bearer token."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from chat.accounts.tokens import token_create
from chat.conversations.services import conversation_create
from chat.models import AgentProfile, Run, Schedule
from chat.scheduling.webhooks import secret_value
from tests.doors.openapi.test_openapi import _check

pytestmark = pytest.mark.django_db

BASE = "/api/schedules/"


def post(client, body, path=BASE):
    return client.post(path, json.dumps(body), content_type="application/json")


def patch(client, schedule_id, body):
    return client.patch(f"{BASE}{schedule_id}/", json.dumps(body), content_type="application/json")


def refused_field(response) -> str:
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["error"] == "bad_request" and body["message"]
    return body["field"]


def test_create_answers_the_schedule_with_defaults_and_its_next_slot(api):
    before = timezone.now()
    response = post(api, {"prompt": "  Summarise the news of the day, briefly, in five points please  ", "every": 3600})
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {
        "id", "name", "agent", "prompt", "cron", "every", "at", "timezone", "conversation", "enabled",
        "webhookUrl", "createdAt", "updatedAt", "nextRunAt", "lastRunAt", "lastRunId", "lastStatus",
    }  # fmt: skip
    uuid.UUID(body["id"])
    assert body["name"] == "Summarise the news of the day, briefly, in five points please"[:60]
    assert (body["agent"], body["timezone"], body["conversation"], body["enabled"]) == ("default", "UTC", "new", True)
    assert (body["cron"], body["every"], body["at"], body["webhookUrl"]) == (None, 3600, None, None)
    assert (body["lastRunAt"], body["lastRunId"], body["lastStatus"]) == (None, None, None)
    next_run = datetime.fromisoformat(body["nextRunAt"])
    assert before + timedelta(seconds=3600) <= next_run <= timezone.now() + timedelta(seconds=3600)
    assert api.get(f"{BASE}{body['id']}/").json() == body
    assert api.get(BASE).json() == {"schedules": [body]}


def test_cron_next_slot_is_read_in_the_time_zone(api):
    body = post(api, {"prompt": "p", "cron": "30 7 * * *", "timezone": "Asia/Shanghai"}).json()
    next_run = datetime.fromisoformat(body["nextRunAt"])
    assert next_run.utcoffset() == timedelta(0)
    assert (next_run.hour, next_run.minute) == (23, 30)  # 07:30 in Shanghai


def test_at_without_offset_is_read_in_the_time_zone(api):
    day = (timezone.now() + timedelta(days=2)).date()
    body = post(api, {"prompt": "p", "at": f"{day}T09:00:00", "timezone": "Asia/Shanghai"}).json()
    assert datetime.fromisoformat(body["at"]) == datetime(day.year, day.month, day.day, 1, 0, tzinfo=UTC)
    assert body["nextRunAt"] == body["at"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"every": 60}, "prompt"),
        ({"prompt": "   ", "every": 60}, "prompt"),
        ({"prompt": 5, "every": 60}, "prompt"),
        ({"prompt": "x" * 32001, "every": 60}, "prompt"),
        ({"prompt": "p", "name": "  ", "every": 60}, "name"),
        ({"prompt": "p", "name": "n" * 101, "every": 60}, "name"),
        ({"prompt": "p"}, "cron"),
        ({"prompt": "p", "every": 60, "cron": "* * * * *"}, "every"),
        ({"prompt": "p", "at": "2030-01-01T00:00:00Z", "every": 60}, "at"),
        ({"prompt": "p", "every": 59}, "every"),
        ({"prompt": "p", "every": 60.5}, "every"),
        ({"prompt": "p", "every": "60"}, "every"),
        ({"prompt": "p", "every": True}, "every"),
        ({"prompt": "p", "every": 31622401}, "every"),
        ({"prompt": "p", "cron": "0 * * * * *"}, "cron"),
        ({"prompt": "p", "cron": "0 0 * * * * 2030"}, "cron"),
        ({"prompt": "p", "cron": "@daily"}, "cron"),
        ({"prompt": "p", "cron": "0 0 L * *"}, "cron"),
        ({"prompt": "p", "cron": "0 0 15W * *"}, "cron"),
        ({"prompt": "p", "cron": "0 0 * * 1#2"}, "cron"),
        ({"prompt": "p", "cron": "0 0 ? * *"}, "cron"),
        ({"prompt": "p", "cron": "60 * * * *"}, "cron"),
        ({"prompt": "p", "cron": "0 0 32 * *"}, "cron"),
        ({"prompt": "p", "cron": "0 0 * 13 *"}, "cron"),
        ({"prompt": "p", "cron": "0 0 * * 8"}, "cron"),
        ({"prompt": "p", "cron": 5}, "cron"),
        ({"prompt": "p", "at": "2001-01-01T00:00:00Z"}, "at"),
        ({"prompt": "p", "at": "tomorrow"}, "at"),
        ({"prompt": "p", "every": 60, "timezone": "Mars/Olympus"}, "timezone"),
        ({"prompt": "p", "every": 60, "timezone": 8}, "timezone"),
        ({"prompt": "p", "every": 60, "agent": "nope"}, "agent"),
        ({"prompt": "p", "every": 60, "conversation": str(uuid.uuid4())}, "conversation"),
        ({"prompt": "p", "every": 60, "conversation": "old"}, "conversation"),
        ({"prompt": "p", "every": 60, "enabled": "yes"}, "enabled"),
    ],
)
def test_a_refused_field_is_named_and_nothing_is_stored(api, body, field):
    assert refused_field(post(api, body)) == field
    assert not Schedule.objects.exists()


def test_the_closest_two_cron_fires_obey_the_minimum(api, settings):
    settings.AGENT_SCHEDULE_MIN_SECONDS = 600
    assert refused_field(post(api, {"prompt": "p", "cron": "*/5 * * * *"})) == "cron"
    assert refused_field(post(api, {"prompt": "p", "cron": "0,5 * * * *"})) == "cron"
    assert refused_field(post(api, {"prompt": "p", "every": 599})) == "every"
    assert post(api, {"prompt": "p", "cron": "*/10 * * * *"}).status_code == 201
    assert post(api, {"prompt": "p", "cron": "0,30 9 * * MON-fri"}).status_code == 201


def test_cron_names_sunday_seven_and_lists_are_taken(api):
    for cron in ("* * * * *", "0 0 * * 7", "0 0 1,15 jan,JUL sun", "*/15 9-17 * * 1-5", "0 0-12/3 * * *"):
        assert post(api, {"prompt": "p", "cron": cron}).status_code == 201, cron


def test_agent_slug_and_disabled_profile(api, alice):
    AgentProfile.objects.create(name="Open", slug="open", everyone=True)
    AgentProfile.objects.create(name="Off", slug="off", everyone=True, enabled=False)
    assert post(api, {"prompt": "p", "every": 60, "agent": "open"}).json()["agent"] == "open"
    assert refused_field(post(api, {"prompt": "p", "every": 60, "agent": "off"})) == "agent"


def test_conversation_must_be_the_users_own(api, alice, make_user):
    own = conversation_create(owner=alice, title="mine")
    other = conversation_create(owner=make_user("bob"), title="bob's")
    assert post(api, {"prompt": "p", "every": 60, "conversation": str(own.pk)}).json()["conversation"] == str(own.pk)
    assert refused_field(post(api, {"prompt": "p", "every": 60, "conversation": str(other.pk)})) == "conversation"


def test_patch_replaces_the_timing_and_checks_fields(api):
    created = post(api, {"prompt": "p", "cron": "0 7 * * *"}).json()
    changed = patch(api, created["id"], {"every": 120})
    assert changed.status_code == 200
    assert (changed.json()["cron"], changed.json()["every"]) == (None, 120)
    assert refused_field(patch(api, created["id"], {"every": 10})) == "every"
    assert refused_field(patch(api, created["id"], {"cron": "* * * * *", "every": 60})) == "cron"
    assert refused_field(patch(api, created["id"], {})) is None
    assert refused_field(patch(api, created["id"], {"name": "ok", "enabled": 1})) == "enabled"
    assert api.get(f"{BASE}{created['id']}/").json()["name"] == "p"  # nothing of a refused body stored


def test_disable_clears_next_run_and_enable_counts_from_now(api):
    created = post(api, {"prompt": "p", "every": 600}).json()
    disabled = patch(api, created["id"], {"enabled": False}).json()
    assert disabled["enabled"] is False and disabled["nextRunAt"] is None
    Schedule.objects.filter(pk=created["id"]).update(anchor_at=timezone.now() - timedelta(days=3))
    before = timezone.now()
    enabled = patch(api, created["id"], {"enabled": True}).json()
    assert datetime.fromisoformat(enabled["nextRunAt"]) >= before + timedelta(seconds=600)


def test_another_users_schedule_and_non_uuid_ids_are_404(api, make_user):
    bob = Client()
    bob.force_login(make_user("bob"))
    created = post(api, {"prompt": "p", "every": 60}).json()
    path = f"{BASE}{created['id']}/"
    for response in (
        bob.get(path),
        bob.patch(path, json.dumps({"name": "x"}), content_type="application/json"),
        bob.delete(path),
        bob.get(f"{path}runs/"),
        api.get(f"{BASE}{uuid.uuid4()}/"),
        api.get(f"{BASE}not-a-uuid/"),
        api.delete(f"{BASE}12/"),
    ):
        assert response.status_code == 404
        assert response.json()["error"] == "not_found"
    assert bob.get(BASE).json() == {"schedules": []}
    assert Schedule.objects.get(pk=created["id"]).name == "p"


def test_delete_keeps_runs_and_conversations(api, alice):
    created = post(api, {"prompt": "p", "every": 60}).json()
    conversation = conversation_create(owner=alice, title="made by it")
    run = Run.objects.create(conversation=conversation, user=alice, schedule_id=created["id"], status="succeeded")
    assert api.delete(f"{BASE}{created['id']}/").status_code == 204
    assert api.get(f"{BASE}{created['id']}/").status_code == 404
    run.refresh_from_db()
    assert run.schedule_id is None


def test_runs_lists_newest_first_with_limit(api, alice):
    created = post(api, {"prompt": "p", "every": 60}).json()
    conversation = conversation_create(owner=alice, title="c")
    now = timezone.now()
    for minutes in (3, 2, 1):
        Run.objects.create(
            conversation=conversation,
            user=alice,
            schedule_id=created["id"],
            status="succeeded",
            started_at=now - timedelta(minutes=minutes),
            finished_at=now,
        )
    runs = api.get(f"{BASE}{created['id']}/runs/").json()["runs"]
    assert len(runs) == 3 and runs[0]["startedAt"] > runs[1]["startedAt"] > runs[2]["startedAt"]
    assert set(runs[0]) == {"runId", "conversationId", "status", "startedAt", "finishedAt"}
    assert len(api.get(f"{BASE}{created['id']}/runs/?limit=2").json()["runs"]) == 2
    assert api.get(f"{BASE}{created['id']}/runs/?limit=zero").status_code == 400


def test_too_many_schedules(api, settings):
    settings.AGENT_MAX_SCHEDULES = 2
    for _ in range(2):
        assert post(api, {"prompt": "p", "every": 60}).status_code == 201
    response = post(api, {"prompt": "p", "every": 60})
    assert response.status_code == 409 and response.json()["error"] == "too_many_schedules"
    assert Schedule.objects.count() == 2


def test_signed_out_csrf_and_bearer(alice):
    assert Client().get(BASE).status_code == 401
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert post(strict, {"prompt": "p", "every": 60}).status_code == 403
    _token, value = token_create(user=alice, name="script")
    bearer = Client(enforce_csrf_checks=True)
    response = bearer.post(
        BASE,
        json.dumps({"prompt": "p", "every": 60}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {value}",
    )
    assert response.status_code == 201
    assert bearer.get(BASE, HTTP_AUTHORIZATION=f"Bearer {value}").json()["schedules"][0]["id"] == response.json()["id"]


def test_answers_take_their_documented_shapes(api, alice):
    created = post(api, {"prompt": "p", "cron": "0 7 * * *"})
    _check(created, "post", "api/schedules/")
    schedule_id = created.json()["id"]
    _check(api.get(BASE), "get", "api/schedules/")
    _check(api.get(f"{BASE}{schedule_id}/"), "get", "api/schedules/<uuid:schedule_id>/")
    _check(patch(api, schedule_id, {"every": 600}), "patch", "api/schedules/<uuid:schedule_id>/")
    _check(patch(api, schedule_id, {"webhookUrl": PUBLIC_URL}), "patch", "api/schedules/<uuid:schedule_id>/")
    _check(patch(api, schedule_id, {"every": 6}), "patch", "api/schedules/<uuid:schedule_id>/")
    _check(post(api, {"every": 60}), "post", "api/schedules/")
    _check(api.get(f"{BASE}{uuid.uuid4()}/"), "get", "api/schedules/<uuid:schedule_id>/")
    conversation = conversation_create(owner=alice, title="c")
    Run.objects.create(conversation=conversation, user=alice, schedule_id=schedule_id)
    _check(api.get(f"{BASE}{schedule_id}/runs/"), "get", "api/schedules/<uuid:schedule_id>/runs/")


PUBLIC_URL = "https://93.184.215.14/hook"


def test_a_webhook_url_gets_a_secret_shown_once_and_stored_sealed(api):
    created = post(api, {"prompt": "p", "every": 60, "webhookUrl": PUBLIC_URL})
    assert created.status_code == 201, created.content
    secret = created.json()["webhookSecret"]
    assert re.fullmatch(r"whsec_[A-Za-z0-9_-]{43}", secret)
    schedule_id = created.json()["id"]
    assert "webhookSecret" not in api.get(f"{BASE}{schedule_id}/").json()
    assert "webhookSecret" not in api.get(BASE).json()["schedules"][0]
    stored = Schedule.objects.get(pk=schedule_id).webhook_secret
    assert secret not in stored and secret_value(stored) == secret
    changed = patch(api, schedule_id, {"webhookUrl": PUBLIC_URL + "2"}).json()
    assert "webhookSecret" not in changed and changed["webhookUrl"] == PUBLIC_URL + "2"
    assert patch(api, schedule_id, {"webhookUrl": None}).json()["webhookUrl"] is None
    again = patch(api, schedule_id, {"webhookUrl": PUBLIC_URL}).json()
    assert again["webhookSecret"] != secret


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/x",
        "http://[::1]/x",
        "http://2130706433/x",
        "http://localhost:8000/x",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.1.2.3/x",
        "http://100.64.0.1/x",
        "http://[fd00::1]/x",
        "ftp://93.184.215.14/x",
        "not a url",
        "https://" + "a" * 2000 + ".com/",
        5,
    ],
)
def test_a_webhook_url_that_is_not_public_http_is_refused(api, url):
    assert refused_field(post(api, {"prompt": "p", "every": 60, "webhookUrl": url})) == "webhookUrl"
    assert not Schedule.objects.exists()


def test_private_webhook_urls_when_allowed(api, settings):
    settings.AGENT_WEBHOOK_ALLOW_PRIVATE = True
    assert post(api, {"prompt": "p", "every": 60, "webhookUrl": "http://localhost:8000/x"}).status_code == 201


def test_a_deleted_users_schedules_are_deleted(api, alice):
    post(api, {"prompt": "p", "every": 60})
    alice.delete()
    assert not Schedule.objects.exists()
