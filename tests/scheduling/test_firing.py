"""Firing (docs/protocol.md, "Firing"): a due slot claimed once and its run started through the
front door as its owner, the catch-up rule, overlap, an inactive owner, refused starts."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from chat.conversations.services import conversation_create, conversation_delete
from chat.inspector.trace import run_trace
from chat.models import AgentProfile, Conversation, Event, Run, Schedule
from chat.scheduling.firing import schedules_claim
from chat.scheduling.poller import SchedulePollerStarter, poll_once, poll_wait
from chat.scheduling.services import schedule_create, schedule_json
from tests.fakellm import text_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


@sync_to_async
def make_schedule(user, *, past: float = 5, **body) -> Schedule:
    """A schedule of `user` (every 60 s unless told) whose next slot passed `past` seconds ago."""
    schedule, _secret = schedule_create(user=user, body={"prompt": "Say hello", "name": "Greeter", "every": 60, **body})
    slot = timezone.now() - timedelta(seconds=past)
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=slot, anchor_at=slot - timedelta(seconds=60))
    return Schedule.objects.get(pk=schedule.pk)


@sync_to_async
def reread(schedule: Schedule) -> Schedule:
    return Schedule.objects.select_related("agent", "last_run").get(pk=schedule.pk)


async def settle(registry, timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while await Run.objects.filter(status="running").aexists():
            await registry.wait_idle()
            await asyncio.sleep(0.05)


async def test_a_due_every_schedule_fires_once_as_its_owner(make_user, registry, llm_settings):
    llm_settings.script(text_reply("Hello!"))
    owner = await sync_to_async(make_user)("alice")
    schedule = await make_schedule(owner)
    started = await poll_once()
    assert len(started) == 1
    assert await poll_once() == []  # the slot is taken: the next pass finds nothing due
    await settle(registry)
    run = await Run.objects.select_related("conversation").aget()
    assert run.status == "succeeded" and run.user_id == owner.pk and run.schedule_id == schedule.pk
    conversation = run.conversation
    assert (conversation.title, conversation.title_source) == ("Greeter", "user")
    assert (conversation.source, conversation.schedule_id, conversation.owner_id) == ("schedule", schedule.pk, owner.pk)
    user_message = await Event.objects.filter(run=run, type="user_message").aget()
    assert user_message.payload["content"] == "Say hello"
    assert user_message.payload["scheduleId"] == str(schedule.pk)
    assert user_message.payload["via"] == "schedule"
    assert llm_settings.requests[-1]["messages"][-1]["content"] == "Say hello"  # the model got the prompt
    after = await reread(schedule)
    body = await sync_to_async(schedule_json)(after)
    assert body["lastRunId"] == str(run.pk) and body["lastStatus"] == "succeeded"
    assert after.next_run_at > timezone.now()
    trace = await sync_to_async(run_trace)(run_id=run.pk)
    assert (trace["run"]["source"], trace["run"]["scheduleId"]) == ("schedule", str(schedule.pk))


async def test_two_claims_of_one_slot_only_one_wins(make_user):
    owner = await sync_to_async(make_user)("alice")
    await make_schedule(owner)
    now = timezone.now()
    first, second = await asyncio.gather(
        sync_to_async(schedules_claim, thread_sensitive=False)(now=now),
        sync_to_async(schedules_claim, thread_sensitive=False)(now=now),
    )
    assert len(first) + len(second) == 1
    # Claimed but not started: should the process stop here, the slot is lost and said so.
    assert (await Schedule.objects.aget()).last_status == "interrupted"


async def test_the_same_slot_seen_by_two_passes_fires_once(make_user, registry, llm_settings):
    llm_settings.script(text_reply("one"), text_reply("two"))
    owner = await sync_to_async(make_user)("alice")
    await make_schedule(owner)
    now = timezone.now()
    runs = await asyncio.gather(poll_once(now=now), poll_once(now=now))
    assert sum(len(r) for r in runs) == 1
    await settle(registry)
    assert await Run.objects.acount() == 1


async def test_a_slot_older_than_the_catchup_is_missed(make_user, settings):
    settings.AGENT_SCHEDULE_CATCHUP = 600
    owner = await sync_to_async(make_user)("alice")
    schedule = await make_schedule(owner, past=3 * 3600, every=7200)
    assert await poll_once() == []
    after = await reread(schedule)
    assert after.last_status == "missed" and after.next_run_at > timezone.now()
    assert not await Run.objects.aexists()


async def test_missed_slots_fire_once_for_the_newest(make_user, registry, llm_settings, settings):
    """Slots every 60 s missed for 10 minutes: the newest is 30 s old, within the catch-up."""
    settings.AGENT_SCHEDULE_CATCHUP = 300
    llm_settings.script(text_reply("late"))
    owner = await sync_to_async(make_user)("alice")
    schedule = await make_schedule(owner, past=570)
    assert len(await poll_once()) == 1
    assert await poll_once() == []
    await settle(registry)
    assert await Run.objects.acount() == 1
    after = await reread(schedule)
    assert timezone.now() < after.next_run_at <= timezone.now() + timedelta(seconds=60)


async def test_a_slot_while_its_previous_run_works_is_skipped(make_user, registry, llm_settings):
    llm_settings.script(text_reply("slow " * 40, piece=1, delay=0.05))
    owner = await sync_to_async(make_user)("alice")
    schedule = await make_schedule(owner)
    assert len(await poll_once()) == 1
    await Schedule.objects.filter(pk=schedule.pk).aupdate(next_run_at=timezone.now() - timedelta(seconds=1))
    assert await poll_once() == []
    assert (await reread(schedule)).last_status == "skipped_running"
    await settle(registry)
    assert await Run.objects.acount() == 1


async def test_an_inactive_owner_fires_nothing(make_user, registry, llm_settings):
    owner = await sync_to_async(make_user)("alice")
    schedule = await make_schedule(owner)
    owner.is_active = False
    await owner.asave()
    assert await poll_once() == []
    after = await reread(schedule)
    assert after.last_status == "owner_inactive" and after.next_run_at > timezone.now()
    assert not await Run.objects.aexists() and not await Conversation.objects.aexists()


async def test_a_refused_start_keeps_nothing_and_says_why(make_user, registry, llm_settings, settings):
    owner = await sync_to_async(make_user)("alice")
    profile = await AgentProfile.objects.acreate(name="Open", slug="open", everyone=True)
    schedule = await make_schedule(owner, agent="open")
    profile.enabled = False
    await profile.asave()
    assert await poll_once() == []
    after = await reread(schedule)
    assert after.last_status == "agent_unavailable" and after.enabled
    assert not await Conversation.objects.aexists()  # the conversation made for the slot is not kept


async def test_a_busy_conversation_and_a_deleted_one(make_user, registry, llm_settings):
    llm_settings.script(text_reply("slow " * 40, piece=1, delay=0.05))
    owner = await sync_to_async(make_user)("alice")
    target = await sync_to_async(conversation_create)(owner=owner, title="mine")
    schedule = await make_schedule(owner, conversation=str(target.pk))
    busy = await make_schedule(owner, conversation=str(target.pk), name="Other")
    started = await poll_once()
    assert len(started) == 1 and started[0].conversation_id == target.pk
    statuses = {(await reread(s)).last_status for s in (schedule, busy)}
    assert statuses == {"running", "run_in_progress"}
    await settle(registry)
    assert (await Conversation.objects.aget()).source == ""  # the conversation keeps its own
    await sync_to_async(conversation_delete)(conversation=await Conversation.objects.aget())
    await Schedule.objects.filter(pk=schedule.pk).aupdate(next_run_at=timezone.now() - timedelta(seconds=1))
    assert await poll_once() == []
    after = await reread(schedule)
    assert (after.last_status, after.enabled, after.next_run_at) == ("not_found", False, None)


async def test_an_at_schedule_fires_once_and_is_spent(make_user, registry, llm_settings):
    llm_settings.script(text_reply("once"))
    owner = await sync_to_async(make_user)("alice")
    at = (timezone.now() + timedelta(hours=1)).isoformat()
    schedule, _secret = await sync_to_async(schedule_create)(user=owner, body={"prompt": "p", "at": at})
    await Schedule.objects.filter(pk=schedule.pk).aupdate(next_run_at=timezone.now() - timedelta(seconds=1))
    assert len(await poll_once()) == 1
    await settle(registry)
    after = await reread(schedule)
    assert after.next_run_at is None and after.enabled
    assert await poll_once() == []


async def test_the_first_connection_starts_the_processes_poller(make_user, registry, llm_settings, settings):
    settings.AGENT_SCHEDULE_POLL_SECONDS = 0.1
    llm_settings.script(text_reply("polled"))
    owner = await sync_to_async(make_user)("alice")
    await make_schedule(owner)
    seen = []

    async def app(scope, receive, send):
        seen.append(scope["type"])

    starter = SchedulePollerStarter(app)
    await starter({"type": "http"}, None, None)
    await starter({"type": "http"}, None, None)  # one poller per event loop, however many connections
    pollers = [task for task in asyncio.all_tasks() if task.get_name() == "schedules-poller"]
    try:
        assert len(pollers) == 1 and seen == ["http", "http"]
        async with asyncio.timeout(10):
            while not await Run.objects.aexists():
                await asyncio.sleep(0.05)
        await settle(registry)
    finally:
        for task in pollers:
            task.cancel()
        await asyncio.gather(*pollers, return_exceptions=True)
    assert await Run.objects.acount() == 1


async def test_a_schedule_that_cannot_be_read_holds_up_no_other(make_user, registry, llm_settings):
    llm_settings.script(text_reply("fine"))
    owner = await sync_to_async(make_user)("alice")
    broken = await make_schedule(owner, past=10, name="Broken")
    await Schedule.objects.filter(pk=broken.pk).aupdate(timezone="Nowhere/Atlantis")  # stored by hand
    fine = await make_schedule(owner, past=5, name="Fine")
    started = await poll_once()
    assert [run.schedule_id for run in started] == [fine.pk]
    await settle(registry)


def test_the_next_pass_waits_for_the_soonest_slot_at_most_a_poll(make_user, settings):
    """A slot 1.5 s away is looked for in 1.5 s, not at the next 5 s poll; one due already (left
    by a pass) in a second, not at once; a disabled schedule's slot or none: a whole poll."""
    settings.AGENT_SCHEDULE_POLL_SECONDS = 5
    now = timezone.now()
    assert poll_wait(now=now) == 5  # no schedule
    owner = make_user("alice")
    schedule, _secret = schedule_create(user=owner, body={"prompt": "p", "every": 60})
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=now + timedelta(seconds=1.5))
    assert poll_wait(now=now) == pytest.approx(1.5, abs=0.05)
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=now - timedelta(seconds=3))
    assert poll_wait(now=now) == 1.0
    Schedule.objects.filter(pk=schedule.pk).update(enabled=False)
    assert poll_wait(now=now) == 5
    Schedule.objects.filter(pk=schedule.pk).update(enabled=True, next_run_at=now + timedelta(hours=1))
    assert poll_wait(now=now) == 5
