"""`python manage.py schedules --once`: one pass of firing outside any server (docs/protocol.md,
"Firing"): a due slot starts its run, which the command waits for."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from chat.models import Event, Run, Schedule
from chat.scheduling.services import schedule_create
from tests.fakellm import text_reply

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_one_pass_fires_the_due_slot_and_waits_for_its_run(make_user, llm_settings):
    llm_settings.script(text_reply("From the command."))
    owner = make_user("alice")
    schedule, _ = schedule_create(user=owner, body={"prompt": "Fire from the command", "every": 60})
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=timezone.now() - timedelta(seconds=2))
    out = io.StringIO()
    call_command("schedules", "--once", stdout=out)
    assert "1 run(s) started" in out.getvalue()
    run = Run.objects.get()
    assert run.status == "succeeded" and run.schedule_id == schedule.pk
    assert Event.objects.filter(run=run, type="text").exists()
    out = io.StringIO()
    call_command("schedules", "--once", stdout=out)
    assert "0 run(s) started" in out.getvalue()
