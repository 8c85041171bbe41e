"""A schedule's outgoing webhook (docs/protocol.md, "Outgoing webhooks") against a real local
receiver (aiohttp on a free port, reachable because the test allows private addresses as an
operator would): the body signed with the schedule's secret, the same delivery id on every try,
retries with back-off on 5xx, no retry on a 4xx and a `schedule_failed` notification then; a
refused slot's delivery; a private address refused at delivery time by default."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from datetime import timedelta

import pytest
from aiohttp import web
from asgiref.sync import sync_to_async
from django.utils import timezone

from chat.models import AgentProfile, Notification, Run, Schedule
from chat.notifications import runs as notifying
from chat.scheduling import deliveries
from chat.scheduling.poller import poll_once
from chat.scheduling.services import schedule_create
from chat.tools import netguard
from tests.fakellm import text_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


class Receiver:
    """A webhook receiver answering the statuses given, then 200."""

    def __init__(self, *statuses: int) -> None:
        self.statuses = list(statuses)
        self.calls: list[tuple[float, dict[str, str], bytes]] = []
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def _handle(self, request: web.Request) -> web.Response:
        self.calls.append((time.monotonic(), dict(request.headers), await request.read()))
        return web.Response(status=self.statuses.pop(0) if self.statuses else 200)

    async def __aenter__(self) -> Receiver:
        app = web.Application()
        app.router.add_post("/hook", self._handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc) -> None:
        assert self.runner is not None
        await self.runner.cleanup()

    def url(self, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}/hook"


@pytest.fixture
def private_allowed(settings):
    settings.AGENT_WEBHOOK_ALLOW_PRIVATE = True
    settings.AGENT_WEBHOOK_BACKOFF = 0.2
    settings.AGENT_WEBHOOK_TIMEOUT = 5


@sync_to_async
def due_schedule(user, url: str, **body) -> tuple[Schedule, str]:
    schedule, secret = schedule_create(
        user=user, body={"prompt": "Digest", "name": "Digest", "every": 60, "webhookUrl": url, **body}
    )
    slot = timezone.now() - timedelta(seconds=1)
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=slot, anchor_at=slot - timedelta(seconds=60))
    assert secret is not None and secret.startswith("whsec_")
    return Schedule.objects.get(pk=schedule.pk), secret


async def settled(registry) -> None:
    async with asyncio.timeout(30):
        while await Run.objects.filter(status="running").aexists():
            await registry.wait_idle()
            await asyncio.sleep(0.05)
        while notifying._notifying or deliveries._deliveries:
            await asyncio.gather(*notifying._notifying, *deliveries._deliveries)


def signed(secret: str, raw: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()


async def test_a_run_that_ends_is_posted_signed(make_user, registry, llm_settings, private_allowed):
    llm_settings.script(text_reply("The digest is ready."))
    alice = await sync_to_async(make_user)("alice")
    async with Receiver() as receiver:
        schedule, secret = await due_schedule(alice, receiver.url())
        [run] = await poll_once()
        await settled(registry)
    [(_, headers, raw)] = receiver.calls
    assert headers["Content-Type"] == "application/json"
    assert headers["X-Agentsite-Event"] == "run_finished"
    assert len(headers["X-Agentsite-Delivery"]) == 36
    assert headers["X-Agentsite-Signature"] == signed(secret, raw)
    assert headers["X-Agentsite-Signature"] != signed(secret + "x", raw)
    body = json.loads(raw)
    await run.arefresh_from_db()
    assert body == {
        "event": "run_finished",
        "scheduleId": str(schedule.pk),
        "runId": str(run.pk),
        "conversationId": str(run.conversation_id),
        "status": "succeeded",
        "answer": "The digest is ready.",
        "finishedAt": run.finished_at.isoformat(),
    }
    # Delivered: no schedule_failed, only the run's own notification.
    assert [n.kind async for n in Notification.objects.all()] == ["run_finished"]


async def test_a_failing_receiver_is_tried_again_with_back_off(make_user, registry, llm_settings, private_allowed):
    llm_settings.script(text_reply("retried"))
    alice = await sync_to_async(make_user)("alice")
    async with Receiver(503, 429) as receiver:
        _schedule, secret = await due_schedule(alice, receiver.url())
        await poll_once()
        await settled(registry)
    assert len(receiver.calls) == 3
    (t1, h1, raw1), (t2, h2, raw2), (t3, h3, raw3) = receiver.calls
    assert raw1 == raw2 == raw3 and h1["X-Agentsite-Signature"] == signed(secret, raw1)
    assert h1["X-Agentsite-Delivery"] == h2["X-Agentsite-Delivery"] == h3["X-Agentsite-Delivery"]
    assert t2 - t1 >= 0.2 and t3 - t2 >= 0.4  # AGENT_WEBHOOK_BACKOFF, then doubled
    assert not await Notification.objects.filter(kind="schedule_failed").aexists()


async def test_five_tries_at_most_then_the_owner_is_told(make_user, registry, llm_settings, private_allowed, settings):
    settings.AGENT_WEBHOOK_BACKOFF = 0.05
    llm_settings.script(text_reply("never delivered"))
    alice = await sync_to_async(make_user)("alice")
    async with Receiver(500, 502, 503, 504, 500, 500) as receiver:
        schedule, _secret = await due_schedule(alice, receiver.url())
        [run] = await poll_once()
        await settled(registry)
    assert len(receiver.calls) == 5
    failed = await Notification.objects.aget(kind="schedule_failed")
    assert (failed.code, failed.schedule_id, failed.run_id, failed.title) == (
        "WEBHOOK_FAILED",
        schedule.pk,
        run.pk,
        "Digest",
    )


async def test_a_4xx_or_a_redirect_ends_the_delivery_at_once(make_user, registry, llm_settings, private_allowed):
    llm_settings.script(text_reply("gone"), text_reply("moved"))
    alice = await sync_to_async(make_user)("alice")
    for status in (404, 302):
        async with Receiver(status) as receiver:
            await due_schedule(alice, receiver.url())
            await poll_once()
            await settled(registry)
        assert len(receiver.calls) == 1, status
    assert await Notification.objects.filter(kind="schedule_failed", code="WEBHOOK_FAILED").acount() == 2


async def test_a_refused_slot_is_posted_as_schedule_failed(make_user, registry, llm_settings, private_allowed):
    alice = await sync_to_async(make_user)("alice")
    profile = await AgentProfile.objects.acreate(name="Open", slug="open", everyone=True)
    async with Receiver() as receiver:
        schedule, secret = await due_schedule(alice, receiver.url(), agent="open")
        profile.enabled = False
        await profile.asave()
        assert await poll_once() == []
        await settled(registry)
    [(_, headers, raw)] = receiver.calls
    assert headers["X-Agentsite-Event"] == "schedule_failed"
    assert headers["X-Agentsite-Signature"] == signed(secret, raw)
    assert json.loads(raw) == {
        "event": "schedule_failed",
        "scheduleId": str(schedule.pk),
        "runId": None,
        "conversationId": None,
        "status": "agent_unavailable",
        "answer": "",
    }


async def test_a_private_address_is_refused_at_delivery_by_default(monkeypatch, settings):
    """Saved while the operator allowed it, or a public name that now resolves to loopback (DNS
    rebinding): the connection is refused, nothing reaches the receiver."""
    settings.AGENT_WEBHOOK_ALLOW_PRIVATE = False
    settings.AGENT_WEBHOOK_BACKOFF = 0.01

    async def rebound(host, port):
        return ["127.0.0.1"]

    monkeypatch.setattr(netguard, "resolve", rebound)
    body = {"event": "run_finished", "scheduleId": "x"}
    async with Receiver() as receiver:
        for url in (receiver.url(), receiver.url("localhost"), receiver.url("hooks.example.com")):
            assert await deliveries.post_tries(url=url, secret="whsec_x", body=body) is False
        assert receiver.calls == []
        settings.AGENT_WEBHOOK_ALLOW_PRIVATE = True
        assert await deliveries.post_tries(url=receiver.url(), secret="whsec_x", body=body) is True
        assert len(receiver.calls) == 1


async def test_a_private_webhook_url_is_refused_when_saved_by_default(make_user):
    alice = await sync_to_async(make_user)("alice")
    for url in ("http://127.0.0.1:8080/hook", "http://169.254.169.254/latest", "http://[::1]/", "http://2130706433/"):
        with pytest.raises(ValueError) as refused:
            await sync_to_async(schedule_create)(user=alice, body={"prompt": "p", "every": 60, "webhookUrl": url})
        assert getattr(refused.value, "field", None) == "webhookUrl"
