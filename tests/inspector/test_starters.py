"""Runs a schedule or a trigger started, and the API's, marked in the inspector (docs/protocol.md,
"Run trace"): the trace's `source`, `scheduleId`, `triggerId`; the run list's tags naming the
schedule or trigger, its "started by" filter, its heading for one conversation; the run page's note."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.utils import timezone

from chat.models import SCHEDULE_SOURCE, TRIGGER_SOURCE, Conversation, Run
from chat.scheduling.services import schedule_create
from chat.scheduling.triggers import trigger_create
from tests.inspector.test_trace import staff_user

pytestmark = [pytest.mark.django_db, pytest.mark.services]

RUN_LINK = re.compile(r'data-run="([0-9a-f-]{36})"')


def started(owner, *, source="", schedule=None, trigger=None, reply=False) -> Run:
    """A run as a schedule's fire or a trigger's call stores it: its conversation marked with
    `source` and the starter, the run with the starter too (a reply in it: the run without)."""
    conversation = Conversation.objects.create(
        owner=owner, title=f"{source or 'chat'} conversation", source=source, schedule=schedule, trigger=trigger
    )
    return Run.objects.create(
        conversation=conversation,
        user=owner,
        status="succeeded",
        model="m",
        started_at=timezone.now(),
        finished_at=timezone.now(),
        schedule=None if reply else schedule,
        trigger=None if reply else trigger,
    )


@pytest.fixture
def runs(make_user):
    alice = make_user("alice")
    schedule, _ = schedule_create(user=alice, body={"prompt": "digest", "name": "Morning <digest>", "every": 3600})
    trigger, _ = trigger_create(user=alice, body={"prompt": "triage {{payload}}", "name": "Ticket hook"})
    return {
        "schedule": started(alice, source=SCHEDULE_SOURCE, schedule=schedule),
        "trigger": started(alice, source=TRIGGER_SOURCE, trigger=trigger),
        "api": started(alice, source="api"),
        "chat": started(alice),
        "objects": (schedule, trigger),
    }


def page(staff, url: str) -> str:
    client = Client()
    client.force_login(staff)
    response = client.get(url)
    assert response.status_code == 200, response.content[:300]
    return response.content.decode()


def test_the_trace_names_the_source_and_the_starter(make_user, runs):
    staff = staff_user(make_user)
    client = Client()
    client.force_login(staff)
    schedule, trigger = runs["objects"]
    traces = {k: client.get(f"/api/runs/{runs[k].pk}/trace/").json()["run"] for k in ("schedule", "trigger", "chat")}
    assert (traces["schedule"]["source"], traces["schedule"]["scheduleId"], traces["schedule"]["triggerId"]) == (
        "schedule",
        str(schedule.pk),
        None,
    )
    assert (traces["trigger"]["source"], traces["trigger"]["scheduleId"], traces["trigger"]["triggerId"]) == (
        "trigger",
        None,
        str(trigger.pk),
    )
    assert (traces["chat"]["source"], traces["chat"]["scheduleId"], traces["chat"]["triggerId"]) == ("", None, None)


def test_the_run_list_tags_each_run_with_what_started_it_and_filters_by_it(make_user, runs):
    staff = staff_user(make_user)
    listing = page(staff, "/inspect/")
    rows = {m.group(1): m.group(0) for m in re.finditer(r'data-run="([0-9a-f-]{36})".*?</tr>', listing, re.S)}
    assert "schedule: Morning &lt;digest&gt;</span>" in rows[str(runs["schedule"].pk)]
    assert "trigger: Ticket hook</span>" in rows[str(runs["trigger"].pk)]
    assert 'class="tag tag-api"' in rows[str(runs["api"].pk)]
    assert "tag-schedule" not in rows[str(runs["chat"].pk)] and "tag-trigger" not in rows[str(runs["chat"].pk)]
    assert "Morning <digest>" not in listing  # escaped, as any name
    for source, expected in [("schedule", "schedule"), ("trigger", "trigger"), ("api", "api"), ("chat", "chat")]:
        assert RUN_LINK.findall(page(staff, f"/inspect/?source={source}")) == [str(runs[expected].pk)]
    assert "Select a valid choice" in page(staff, "/inspect/?source=carrier-pigeon")


def test_a_reply_in_a_started_conversation_and_a_deleted_starter_keep_the_mark(make_user, runs):
    staff = staff_user(make_user)
    schedule, trigger = runs["objects"]
    reply = started(schedule.owner, source=TRIGGER_SOURCE, trigger=trigger, reply=True)
    row = re.search(rf'data-run="{reply.pk}".*?</tr>', page(staff, "/inspect/"), re.S).group(0)
    assert '<span class="tag tag-trigger" title="in a conversation a trigger started' in row
    schedule.delete()
    run_page = page(staff, f"/inspect/runs/{runs['schedule'].pk}/")
    assert "In a conversation a schedule started (a reply in it, or the schedule is since deleted)" in run_page


def test_the_run_page_and_the_conversations_runs_name_the_schedule_or_trigger(make_user, runs):
    staff = staff_user(make_user)
    schedule, trigger = runs["objects"]
    run_page = page(staff, f"/inspect/runs/{runs['schedule'].pk}/")
    assert (
        f'Started by the schedule <a href="/admin/chat/schedule/{schedule.pk}/change/">“Morning &lt;digest&gt;”</a>'
        in (run_page)
    )
    run_page = page(staff, f"/inspect/runs/{runs['trigger'].pk}/")
    assert f'Started by the trigger <a href="/admin/chat/trigger/{trigger.pk}/change/">“Ticket hook”</a>' in run_page
    assert "Started by the" not in page(staff, f"/inspect/runs/{runs['chat'].pk}/")
    heading = page(staff, f"/inspect/?conversation={runs['trigger'].conversation_id}")
    assert "Runs of “trigger conversation” by alice" in heading and "started by the trigger" in heading
    assert "“Ticket hook”" in heading
    heading = page(staff, f"/inspect/?conversation={runs['chat'].conversation_id}")
    assert "Runs of “chat conversation” by alice." in heading
