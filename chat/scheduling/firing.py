"""Due slots claimed and fired (docs/protocol.md, "Firing").

A slot is claimed by a compare-and-set of the schedule's `next_run_at` from the slot to the
following one: of the processes that find it due, only the one whose UPDATE moved it fires it.
The claim writes `lastStatus` `interrupted` until the run is started, so a process that dies in
between leaves the slot lost and said so, never fired twice. The run starts through the front door
(chat.runs.engine.start) as a `message` frame's does, with the owner's limits and the agent's rules.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import DatabaseError

from chat.models import SCHEDULE_SOURCE, Conversation, Notification, Run, Schedule, TitleSource
from chat.notifications.push import push_new
from chat.notifications.services import notification_create, notification_json
from chat.runs import engine
from chat.runs.client_frames import ProtocolError
from chat.runs.requests import StartRun
from chat.scheduling.deliveries import delivery_start, refused_body
from chat.scheduling.services import schedule_next
from chat.scheduling.timing import newest_slot, zone

logger = logging.getLogger(__name__)

# How many due schedules one pass claims; the rest wait for the next pass.
CLAIM_BATCH = 100

# A refused start's code -> lastStatus (docs/protocol.md, "Firing").
REFUSALS = {
    "AGENT_UNAVAILABLE": Schedule.Status.AGENT_UNAVAILABLE,
    "RATE_LIMITED": Schedule.Status.RATE_LIMITED,
    "QUOTA_EXCEEDED": Schedule.Status.QUOTA_EXCEEDED,
    "RUN_IN_PROGRESS": Schedule.Status.RUN_IN_PROGRESS,
    "NOT_FOUND": Schedule.Status.NOT_FOUND,
}


def _catchup() -> timedelta:
    """How late a slot may fire: AGENT_SCHEDULE_CATCHUP, but never less than two polls, so that a
    slot a running process finds at its next pass is not taken for one missed."""
    return timedelta(seconds=max(settings.AGENT_SCHEDULE_CATCHUP, 2 * settings.AGENT_SCHEDULE_POLL_SECONDS))


def _passed_over(schedule: Schedule, *, slot: datetime, now: datetime) -> str | None:
    """Why the due slot starts no run (a lastStatus), or None: it fires."""
    newest = newest_slot(
        cron=schedule.cron,
        every=schedule.every,
        tz=zone(schedule.timezone),
        anchor=schedule.anchor_at,
        slot=slot,
        now=now,
        since=now - _catchup(),
    )
    if now - newest >= _catchup():
        return Schedule.Status.MISSED
    if not schedule.owner.is_active:
        return Schedule.Status.OWNER_INACTIVE
    if Run.objects.filter(schedule=schedule, status=Run.Status.RUNNING).exists():
        return Schedule.Status.SKIPPED_RUNNING
    return None


def schedules_claim(*, now: datetime) -> list[Schedule]:
    """Claim every due slot: each schedule's next slot becomes the first one after `now` (never one
    run per missed slot). The schedules whose slot this process is to fire now."""
    due = list(
        Schedule.objects.filter(enabled=True, next_run_at__lte=now)
        .select_related("owner", "agent")
        .order_by("next_run_at")[:CLAIM_BATCH]
    )
    fire = []
    for schedule in due:
        try:
            if _claim(schedule, now=now):
                fire.append(schedule)
        except DatabaseError:
            raise  # the database away: the whole pass waits for the next
        except Exception:  # one schedule that cannot be read holds up no other
            logger.exception("schedule %s: its slot could not be claimed", schedule.pk)
    return fire


def _claim(schedule: Schedule, *, now: datetime) -> bool:
    """Whether this process won the schedule's due slot and is to start its run."""
    slot = schedule.next_run_at
    assert slot is not None
    passed_over = _passed_over(schedule, slot=slot, now=now)
    following = None if schedule.at is not None else schedule_next(schedule, after=now)  # `at`: one slot
    claimed = Schedule.objects.filter(pk=schedule.pk, enabled=True, next_run_at=slot).update(
        next_run_at=following,
        last_status=passed_over or Schedule.Status.INTERRUPTED,
    )
    return bool(claimed) and passed_over is None


def _conversation_for(schedule: Schedule) -> tuple[Conversation | None, bool]:
    """The conversation the slot's run goes to, and whether it was made for it; None: the
    schedule's conversation was deleted."""
    if schedule.conversation_id is None:
        conversation = Conversation.objects.create(
            owner=schedule.owner,
            title=schedule.name,
            title_source=TitleSource.USER,
            source=SCHEDULE_SOURCE,
            schedule=schedule,
            agent=schedule.agent,
        )
        return conversation, True
    conversation = Conversation.objects.filter(owner=schedule.owner, pk=schedule.conversation_id).first()
    return conversation, False


def _started(schedule: Schedule, run: Run) -> None:
    Schedule.objects.filter(pk=schedule.pk).update(
        last_run=run, last_run_at=run.started_at, last_status=Schedule.Status.RUNNING
    )


def _refused(schedule: Schedule, code: str, *, made: Conversation | None) -> Notification | None:
    """A slot whose start was refused: nothing of it stays (the conversation made for it goes);
    a refusal of the protocol's tells the owner (the notification made, None: another kind)."""
    if made is not None:
        made.delete()
    status = REFUSALS.get(code, Schedule.Status.INTERRUPTED)
    changes: dict = {"last_status": status}
    if status == Schedule.Status.NOT_FOUND:  # its conversation was deleted
        changes.update(enabled=False, next_run_at=None)
    Schedule.objects.filter(pk=schedule.pk).update(**changes)
    if code not in REFUSALS:
        return None
    logger.info("schedule %s: its slot's start was refused (%s)", schedule.pk, code)
    return notification_create(
        owner_id=schedule.owner_id,
        kind=Notification.Kind.SCHEDULE_FAILED,
        title=schedule.name,
        schedule_id=schedule.pk,
        code=code,
    )


async def schedule_failed(schedule: Schedule, code: str, *, made: Conversation | None) -> None:
    """A slot's start was refused: stored as such, and the owner told, by a `schedule_failed`
    notification pushed to their bells and by the webhook's `schedule_failed` delivery."""
    notification = await database_sync_to_async(_refused)(schedule, code, made=made)
    if notification is None:
        return
    await push_new(schedule.owner_id, notification_json(notification))
    if schedule.webhook_url:
        delivery_start(schedule, refused_body(schedule, REFUSALS[code]))


async def schedule_fire(schedule: Schedule) -> Run | None:
    """Start the run of a claimed slot (None: its start was refused, or the database failed)."""
    try:
        conversation, made = await database_sync_to_async(_conversation_for)(schedule)
    except DatabaseError:
        logger.warning("schedule %s: its slot is lost (database error)", schedule.pk, exc_info=True)
        return None
    if conversation is None:
        await schedule_failed(schedule, "NOT_FOUND", made=None)
        return None
    try:
        run, _seq = await engine.start(StartRun(conversation, schedule.owner, schedule.prompt, schedule_id=schedule.pk))
    except ProtocolError as exc:
        await schedule_failed(schedule, exc.code, made=conversation if made else None)
        return None
    except Exception:  # the slot is lost (lastStatus `interrupted`); the other slots of the pass go on
        logger.exception("schedule %s: its slot is lost", schedule.pk)
        return None
    await database_sync_to_async(_started)(schedule, run)
    return run
