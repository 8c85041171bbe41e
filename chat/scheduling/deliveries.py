"""A schedule's outgoing webhook (docs/protocol.md, "Outgoing webhooks"): when a run it started
ends, and when a slot's start is refused, the schedule's `webhookUrl` is sent a signed JSON body.

Each delivery is a task of its own (a run never waits for it): up to TRIES tries, each at most
AGENT_WEBHOOK_TIMEOUT seconds, the same body and delivery id every time; a 5xx, a 429, a timeout
or a connection error is tried again after AGENT_WEBHOOK_BACKOFF x 2^(n-1) seconds, any other
answer but a 2xx ends it (redirects are not followed). A delivery that ends without a 2xx tells
the owner (a `schedule_failed` notification, `WEBHOOK_FAILED`). Best effort: a process that
stops between tries does not resume them.

Every connection is made through the fetch tool's guarded transport (chat.tools.netguard): the
address checked is the one connected to, so a name that resolves to a private address at
delivery time (DNS rebinding) is refused, unless AGENT_WEBHOOK_ALLOW_PRIVATE."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import uuid
from typing import Any

import httpx2
from channels.db import database_sync_to_async
from django.conf import settings

from chat.agent.batching import server_task
from chat.eventlog.frames import CHILD_KEY, EventFrame
from chat.models import Notification, Run, Schedule
from chat.notifications.push import push_new
from chat.notifications.runs import answer_of
from chat.notifications.services import notification_create, notification_json
from chat.runtime import doorbell
from chat.scheduling.webhooks import secret_value
from chat.tools.netguard import AddressRefused, FetchPolicy, GuardedTransport

logger = logging.getLogger(__name__)

TRIES = 5
WEBHOOK_FAILED = "WEBHOOK_FAILED"

_deliveries: set[asyncio.Task] = set()  # under way (a task nobody holds may be collected before it ends)


def signature(secret: str, raw: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()


def _client() -> httpx2.AsyncClient:
    transport = None if settings.AGENT_WEBHOOK_ALLOW_PRIVATE else GuardedTransport(FetchPolicy())
    return httpx2.AsyncClient(
        transport=transport, timeout=settings.AGENT_WEBHOOK_TIMEOUT, follow_redirects=False, trust_env=False
    )


def _again(status: int | None) -> bool:
    """Whether a try that ended so is tried again (None: a timeout or a connection error)."""
    return status is None or status >= 500 or status == 429


async def post_tries(*, url: str, secret: str, body: dict[str, Any]) -> bool:
    """The tries of one delivery; whether one was answered with a 2xx."""
    raw = json.dumps(body, ensure_ascii=False).encode()
    headers = {
        "Content-Type": "application/json",
        "X-Agentsite-Event": body["event"],
        "X-Agentsite-Delivery": str(uuid.uuid4()),
        "X-Agentsite-Signature": signature(secret, raw),
    }
    async with _client() as client:
        for tries in range(1, TRIES + 1):
            status: int | None = None
            try:
                status = (await client.post(url, content=raw, headers=headers)).status_code
            except AddressRefused as exc:
                logger.info("a webhook of %s was refused: %s", url, exc)
                return False
            except (httpx2.TimeoutException, httpx2.TransportError) as exc:
                logger.info("a webhook try to %s failed: %s", url, exc)
            if status is not None and 200 <= status < 300:
                return True
            if not _again(status) or tries == TRIES:
                return False
            await asyncio.sleep(settings.AGENT_WEBHOOK_BACKOFF * 2 ** (tries - 1))
    return False


def _failed(schedule: Schedule, run_id, conversation_id) -> Notification | None:
    return notification_create(
        owner_id=schedule.owner_id,
        kind=Notification.Kind.SCHEDULE_FAILED,
        title=schedule.name,
        schedule_id=schedule.pk,
        run_id=run_id,
        conversation_id=conversation_id,
        code=WEBHOOK_FAILED,
    )


async def deliver(schedule: Schedule, body: dict[str, Any]) -> None:
    secret = secret_value(schedule.webhook_secret)
    url = schedule.webhook_url
    if not url or secret is None:
        return  # no webhook, or a secret sealed under another SECRET_KEY: nothing could be signed
    try:
        delivered = await post_tries(url=url, secret=secret, body=body)
    except Exception:
        logger.exception("a webhook delivery of schedule %s failed", schedule.pk)
        delivered = False
    if delivered:
        return
    made = await database_sync_to_async(_failed)(schedule, body.get("runId"), body.get("conversationId"))
    if made is not None:
        await push_new(schedule.owner_id, notification_json(made))


def delivery_start(schedule: Schedule, body: dict[str, Any]) -> None:
    task = server_task(deliver(schedule, body), name="webhook")
    _deliveries.add(task)
    task.add_done_callback(_deliveries.discard)


def _run_finished_body(*, conversation_id, run_id, status: str) -> tuple[Schedule, dict[str, Any]] | None:
    run = (
        Run.objects.filter(pk=run_id, schedule__webhook_url__isnull=False)
        .exclude(schedule__webhook_url="")
        .select_related("schedule")
        .first()
    )
    if run is None or run.schedule is None:
        return None
    return run.schedule, {
        "event": "run_finished",
        "scheduleId": str(run.schedule_id),
        "runId": str(run.pk),
        "conversationId": str(conversation_id),
        "status": status,
        "answer": answer_of(conversation_id=conversation_id, run_id=run_id),
        "finishedAt": run.finished_at.isoformat() if run.finished_at else None,
    }


async def _run_finished(conversation_id, frame: EventFrame) -> None:
    try:
        found = await database_sync_to_async(_run_finished_body)(
            conversation_id=conversation_id, run_id=frame["runId"], status=frame.get("status", "")
        )
    except Exception:
        logger.warning("could not read the webhook of run %s", frame.get("runId"), exc_info=True)
        return
    if found is not None:
        await deliver(*found)


def frames_published(conversation_id, frames: list[EventFrame]) -> None:
    """doorbell's observer: a top-level run's `complete` (a schedule's run is top-level)."""
    for frame in frames:
        if frame.get("type") == "complete" and CHILD_KEY not in frame:
            task = server_task(_run_finished(conversation_id, frame), name="webhook")
            _deliveries.add(task)
            task.add_done_callback(_deliveries.discard)


def refused_body(schedule: Schedule, status: str) -> dict[str, Any]:
    return {
        "event": "schedule_failed",
        "scheduleId": str(schedule.pk),
        "runId": None,
        "conversationId": None,
        "status": status,
        "answer": "",
    }


doorbell.observe(frames_published)
