"""`/schedules/`: the user's schedules listed, made, edited, paused, resumed and deleted, by the
same rules as the JSON API; login required, and another user's schedules out of reach."""

from __future__ import annotations

import pytest
from django.test import Client

from chat.models import Schedule
from chat.scheduling.services import schedule_create

pytestmark = pytest.mark.django_db


def test_the_page_needs_a_login(client):
    response = client.get("/schedules/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_make_list_edit_pause_resume_delete(api, alice):
    made = api.post(
        "/schedules/",
        {"name": "Digest", "prompt": "Summarise", "timing": "cron", "timing_value": "30 7 * * 1-5",
         "timezone": "Asia/Shanghai", "agent": "default", "enabled": "on"},
    )  # fmt: skip
    assert made.status_code == 302
    schedule = Schedule.objects.get()
    assert (schedule.name, schedule.cron, schedule.timezone, schedule.enabled) == (
        "Digest",
        "30 7 * * 1-5",
        "Asia/Shanghai",
        True,
    )
    page = api.get("/schedules/").content.decode()
    assert "Digest" in page and "30 7 * * 1-5" in page
    assert f'href="?edit={schedule.pk}"' in page
    assert "Summarise" in api.get(f"/schedules/?edit={schedule.pk}").content.decode()
    edited = api.post(
        "/schedules/",
        {"id": str(schedule.pk), "name": "Digest", "prompt": "Summarise again", "timing": "every",
         "timing_value": "3600", "timezone": "UTC", "agent": "default", "enabled": "on"},
    )  # fmt: skip
    assert edited.status_code == 302
    schedule.refresh_from_db()
    assert (schedule.prompt, schedule.cron, schedule.every) == ("Summarise again", None, 3600)
    assert api.post(f"/schedules/{schedule.pk}/toggle/").status_code == 302
    schedule.refresh_from_db()
    assert not schedule.enabled and schedule.next_run_at is None
    api.post(f"/schedules/{schedule.pk}/toggle/")
    schedule.refresh_from_db()
    assert schedule.enabled and schedule.next_run_at is not None
    assert api.post(f"/schedules/{schedule.pk}/delete/").status_code == 302
    assert not Schedule.objects.exists()


def test_a_refused_form_says_why_and_stores_nothing(api):
    response = api.post(
        "/schedules/",
        {"prompt": "p", "timing": "cron", "timing_value": "@daily", "timezone": "UTC", "agent": "default"},
    )
    assert response.status_code == 400
    assert "cron" in response.content.decode()
    assert not Schedule.objects.exists()


def test_another_users_schedule_is_out_of_reach(api, make_user):
    bob = make_user("bob")
    theirs, _ = schedule_create(user=bob, body={"prompt": "bob's", "name": "Bob's", "every": 60})
    assert "Bob&#x27;s" not in api.get("/schedules/").content.decode()
    assert "bob&#x27;s" not in api.get(f"/schedules/?edit={theirs.pk}").content.decode()
    api.post(f"/schedules/{theirs.pk}/toggle/")
    api.post(f"/schedules/{theirs.pk}/delete/")
    theirs.refresh_from_db()
    assert theirs.enabled
    assert api.get("/schedules/?edit=nonsense").status_code == 200


def test_the_account_page_links_to_it(api):
    assert 'href="/schedules/"' in api.get("/account/").content.decode()


def test_the_page_has_no_inline_script(alice):
    client = Client()
    client.force_login(alice)
    assert "<script>" not in client.get("/schedules/").content.decode()


def test_the_page_in_chinese(api):
    page = api.get("/schedules/", HTTP_ACCEPT_LANGUAGE="zh-Hans").content.decode()
    assert "定时任务" in page and "新建定时任务" in page
