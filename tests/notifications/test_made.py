"""Notifications made and pushed (docs/protocol.md, "Notifications"): a schedule's run that ends,
an approval waiting in it, a refused slot; a run nobody watches notifies, one a socket watches
does not; the bell socket gets the owner's and never another user's."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.contrib.sessions.models import Session
from django.utils import timezone

from chat.accounts import held_credentials
from chat.accounts.revocation import sessions_revoke
from chat.conversations.services import conversation_create
from chat.models import AgentProfile, Notification, Run, Schedule
from chat.models import UserSession as Session  # the sessions of SESSION_ENGINE (chat.accounts.sessions)
from chat.notifications import runs as notifying
from chat.notifications.services import notification_json
from chat.realtime.hub import get_hub
from chat.scheduling import deliveries
from chat.scheduling.poller import poll_once
from chat.scheduling.services import schedule_create
from tests.asgi_socket import Socket
from tests.fakellm import text_reply, tool_call_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


class Bell(Socket):
    def __init__(self, user, **kwargs):
        super().__init__(user, None, **kwargs)
        self.path = "/ws/notifications/"


@sync_to_async
def due_schedule(user, **body) -> Schedule:
    schedule, _secret = schedule_create(user=user, body={"prompt": "Say hello", "name": "Greeter", "every": 60, **body})
    slot = timezone.now() - timedelta(seconds=1)
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=slot, anchor_at=slot - timedelta(seconds=60))
    return Schedule.objects.get(pk=schedule.pk)


async def settled(registry) -> None:
    """Every run ended, and every notification and delivery it set off made."""
    async with asyncio.timeout(20):
        while await Run.objects.filter(status="running").aexists():
            await registry.wait_idle()
            await asyncio.sleep(0.05)
        while notifying._notifying or deliveries._deliveries:
            await asyncio.gather(*notifying._notifying, *deliveries._deliveries)


async def bell_of(user) -> Bell:
    bell = Bell(user)
    connected, _ = await bell.connect()
    assert connected
    assert await bell.recv() == {"type": "unread", "count": await Notification.objects.filter(owner=user).acount()}
    return bell


async def test_a_schedules_run_notifies_its_owner_live_and_no_one_else(make_user, registry, llm_settings):
    llm_settings.script(text_reply("Hello from the schedule! " * 20))
    alice, bob = await sync_to_async(make_user)("alice"), await sync_to_async(make_user)("bob")
    schedule = await due_schedule(alice)
    alices, bobs = await bell_of(alice), await bell_of(bob)
    try:
        [run] = await poll_once()
        await settled(registry)
        frame = await alices.recv()
        notification = await Notification.objects.aget()
        assert frame == {
            "type": "notification",
            "id": notification.pk,
            "kind": "run_finished",
            "title": "Greeter",
            "body": ("Hello from the schedule! " * 20)[:200],
            "conversationId": str(run.conversation_id),
            "runId": str(run.pk),
            "scheduleId": str(schedule.pk),
            "triggerId": None,
            "status": "succeeded",
            "createdAt": notification.created_at.isoformat(),
            "read": False,
        }
        assert notification.owner_id == alice.pk
        assert await bobs.silent(0.5)
    finally:
        await alices.close()
        await bobs.close()


async def test_a_refused_slot_notifies_schedule_failed(make_user, registry, llm_settings):
    alice = await sync_to_async(make_user)("alice")
    profile = await AgentProfile.objects.acreate(name="Open", slug="open", everyone=True)
    schedule = await due_schedule(alice, agent="open")
    profile.enabled = False
    await profile.asave()
    bell = await bell_of(alice)
    try:
        assert await poll_once() == []
        frame = await bell.recv()
        assert (frame["type"], frame["kind"], frame["code"], frame["scheduleId"], frame["title"]) == (
            "notification",
            "schedule_failed",
            "AGENT_UNAVAILABLE",
            str(schedule.pk),
            "Greeter",
        )
        assert (frame["runId"], frame["conversationId"]) == (None, None)
    finally:
        await bell.close()
    assert await Notification.objects.filter(owner=alice, kind="schedule_failed").acount() == 1


async def test_an_approval_waiting_in_a_schedules_run_notifies(make_user, registry, llm_settings, settings):
    settings.AGENT_APPROVAL_TOOLS = ["calculator"]
    settings.AGENT_APPROVAL_TIMEOUT = 1
    llm_settings.script(tool_call_reply(("calculator", {"expression": "6*7"})), text_reply("no answer came"))
    alice = await sync_to_async(make_user)("alice")
    await due_schedule(alice)
    [run] = await poll_once()
    await settled(registry)
    kinds = [n async for n in Notification.objects.filter(owner=alice).order_by("id")]
    assert [n.kind for n in kinds] == ["approval_waiting", "run_finished"]
    waiting = kinds[0]
    assert (waiting.run_id, waiting.tool_call_id, waiting.tool_name) == (run.pk, "call_0", "calculator")
    body = notification_json(waiting)
    assert (body["toolCallId"], body["toolName"], body["kind"]) == ("call_0", "calculator", "approval_waiting")


async def test_a_watched_run_notifies_nobody_and_an_unwatched_one_does(make_user, registry, llm_settings):
    llm_settings.script(text_reply("watched answer"), text_reply("nobody saw this", delay=0.05))
    alice = await sync_to_async(make_user)("alice")
    conversation = await sync_to_async(conversation_create)(owner=alice, title="Talk")
    sock = Socket(alice, conversation.pk)
    await sock.connect()
    await sock.history()
    await sock.send({"type": "message", "content": "hi"})
    await sock.run_to_end()
    await settled(registry)
    assert not await Notification.objects.aexists()  # its socket was open when it ended
    await sock.send({"type": "message", "content": "again"})
    await sock.until(lambda f: f["type"] == "user_message")
    await sock.close()  # the page closed while the run works
    await settled(registry)
    notification = await Notification.objects.aget()
    assert (notification.kind, notification.title, notification.body, notification.status) == (
        "run_finished",
        "Talk",
        "nobody saw this",
        "succeeded",
    )
    assert notification.schedule_id is None and notification.trigger_id is None


async def test_one_notification_per_run_event_however_often_it_is_seen(make_user, registry, llm_settings):
    llm_settings.script(text_reply("once"))
    alice = await sync_to_async(make_user)("alice")
    await due_schedule(alice)
    [run] = await poll_once()
    await settled(registry)
    complete = {"type": "complete", "runId": str(run.pk), "status": "succeeded", "seq": 99}
    await asyncio.gather(*(notifying.notify(run.conversation_id, complete) for _ in range(3)))
    assert await Notification.objects.filter(run=run).acount() == 1


async def test_the_bell_socket_refuses_strangers_and_answers_pings(make_user, registry):
    stranger = Bell(None)
    connected, code = await stranger.connect()
    if connected:  # accepted, then closed 4401 before any frame
        assert (await stranger.comm.receive_output(timeout=5))["code"] == 4401
    alice = await sync_to_async(make_user)("alice")
    bell = await bell_of(alice)
    try:
        await bell.send({"type": "ping"})
        assert await bell.recv() == {"type": "pong"}
        await bell.send({"type": "message", "content": "hi"})
        error = await bell.recv()
        assert (error["type"], error["code"]) == ("error", "BAD_REQUEST")
        await bell.send("not json")
        assert (await bell.recv())["code"] == "BAD_REQUEST"
        await bell.send({"type": "ping"})
        assert await bell.recv() == {"type": "pong"}  # the socket stays open
    finally:
        await bell.close()


async def test_a_foreign_origin_is_refused_at_the_handshake(make_user):
    alice = await sync_to_async(make_user)("alice")
    bell = Bell(alice, origin="http://evil.example")
    connected, _ = await bell.connect()
    assert not connected


async def test_the_bell_closes_4401_when_its_session_ends(make_user, registry):
    alice = await sync_to_async(make_user)("alice")
    bell = await bell_of(alice)
    await sync_to_async(sessions_revoke)(user_id=alice.pk)
    assert (await bell.comm.receive_output(timeout=5)) == {"type": "websocket.close", "code": 4401}


async def test_the_bells_pings_cost_nothing_and_the_layer_coming_back_rechecks(make_user, registry, monkeypatch):
    """A session ended without a push (a lost one): pings still answer from memory, no look-up;
    when the layer comes back the bell re-checks and closes 4401. A bell whose credential holds
    is told the count again (a notification pushed while the layer was down was lost)."""
    monkeypatch.setattr(held_credentials, "SESSION_RECHECK_SECONDS", 0.0)  # every check due
    alice, bob = await sync_to_async(make_user)("alice"), await sync_to_async(make_user)("bob")
    bell, kept = await bell_of(alice), await bell_of(bob)
    try:
        await Session.objects.filter(user=alice).adelete()  # as a lost revocation leaves it: no push
        for _ in range(20):
            await bell.send({"type": "ping"})
            assert await bell.recv() == {"type": "pong"}
        get_hub()._layer_back()
        assert (await bell.comm.receive_output(timeout=5)) == {"type": "websocket.close", "code": 4401}
        assert await kept.recv() == {"type": "unread", "count": 0}
    finally:
        await kept.close()
