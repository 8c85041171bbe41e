"""A user's schedules written and read (docs/protocol.md, "Schedules"): each field of a body
checked (FieldRefused names the first one refused, and nothing is stored), the next slot computed
whenever the timing, the time zone or `enabled` changes."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from chat.agent.text import invalid_reason
from chat.agents.selectors import agent_chosen
from chat.models import DEFAULT_AGENT_SLUG, Conversation, Run, Schedule
from chat.scheduling.timing import TimingError, at_checked, cron_checked, every_checked, next_slot, zone
from chat.scheduling.webhooks import WebhookRefused, secret_new, webhook_url_checked

TIMINGS = ("cron", "every", "at")
FIELDS = ("prompt", "name", *TIMINGS, "timezone", "agent", "conversation", "enabled", "webhookUrl")
NAME_MAX = 100
NAME_FROM_PROMPT = 60
RUNS_LIMIT_DEFAULT, RUNS_LIMIT_MAX = 50, 200


class FieldRefused(ValueError):
    """A body's field the protocol refuses: `field` is its name in the body."""

    def __init__(self, field: str | None, message: str):
        super().__init__(message)
        self.field = field


class TooManySchedules(Exception):
    pass


def _text(body: dict, field: str, max_length: int) -> str:
    value = body.get(field)
    if not isinstance(value, str):
        raise FieldRefused(field, f"{field} must be a string")
    if len(value) > max_length:
        raise FieldRefused(field, f"{field} is longer than {max_length} characters")
    if reason := invalid_reason(value):
        raise FieldRefused(field, f"{field} contains text that cannot be stored: {reason}")
    return value


def prompt_checked(body: dict) -> str:
    prompt = _text(body, "prompt", settings.AGENT_MAX_MESSAGE_CHARS)
    if not prompt.strip():
        raise FieldRefused("prompt", "prompt must not be empty")
    return prompt


def name_checked(body: dict) -> str:
    name = _text(body, "name", 10 * NAME_MAX).strip()
    if not 1 <= len(name) <= NAME_MAX:
        raise FieldRefused("name", f"name must be 1 to {NAME_MAX} characters")
    return name


def _timing(body: dict, *, required: bool) -> str | None:
    """The timing field the body gives (None: none, where that is allowed)."""
    given = [key for key in body if key in TIMINGS and body[key] is not None]
    if len(given) > 1 or (required and not given):
        first = next((key for key in body if key in TIMINGS), "cron")
        raise FieldRefused(first, "give exactly one of cron, every and at")
    return given[0] if given else None


def _apply(schedule: Schedule, body: dict, *, user, now, creating: bool) -> str | None:
    """Check the body's fields and set them on `schedule` (not saved); a webhook secret made for a
    webhookUrl set where there was none (shown once)."""
    if creating or "prompt" in body:
        schedule.prompt = prompt_checked(body)
    if "name" in body:
        schedule.name = name_checked(body)
    elif creating:
        schedule.name = schedule.prompt.strip()[:NAME_FROM_PROMPT].strip()
    if "timezone" in body:
        try:
            zone(body["timezone"])
        except TimingError as exc:
            raise FieldRefused("timezone", str(exc)) from None
        schedule.timezone = body["timezone"]
    timing = _timing(body, required=creating)
    if timing is not None:
        minimum = settings.AGENT_SCHEDULE_MIN_SECONDS
        try:
            cron = cron_checked(body["cron"], min_seconds=minimum) if timing == "cron" else None
            every = every_checked(body["every"], min_seconds=minimum) if timing == "every" else None
            at = at_checked(body["at"], tz=zone(schedule.timezone), now=now) if timing == "at" else None
        except TimingError as exc:
            raise FieldRefused(timing, str(exc)) from None
        schedule.cron, schedule.every, schedule.at = cron, every, at
        schedule.anchor_at = now
    if "agent" in body:
        try:
            schedule.agent = agent_chosen(user=user, slug=body["agent"])
        except (ValueError, LookupError):
            raise FieldRefused("agent", "agent must be the slug of an agent you may use (GET /api/agents/)") from None
    if "conversation" in body:
        schedule.conversation_id = conversation_checked(body["conversation"], user=user)
    if "enabled" in body:
        if not isinstance(body["enabled"], bool):
            raise FieldRefused("enabled", "enabled must be true or false")
        if body["enabled"] and not schedule.enabled:
            schedule.anchor_at = now  # slots passed while it was disabled never fire
        schedule.enabled = body["enabled"]
    if creating or timing is not None or "timezone" in body or "enabled" in body:
        schedule.next_run_at = schedule_next(schedule, after=now) if schedule.enabled else None
    return _webhook(schedule, body) if "webhookUrl" in body else None


def _webhook(schedule: Schedule, body: dict) -> str | None:
    try:
        url = webhook_url_checked(body["webhookUrl"])
    except WebhookRefused as exc:
        raise FieldRefused("webhookUrl", str(exc)) from None
    had = bool(schedule.webhook_url)
    schedule.webhook_url = url
    if url is None:
        schedule.webhook_secret = ""
        return None
    if had:
        return None
    value, schedule.webhook_secret = secret_new()
    return value


def conversation_checked(value, *, user) -> uuid.UUID | None:
    if value == "new":
        return None
    message = 'conversation must be "new" or the id of one of your conversations'
    if not isinstance(value, str):
        raise FieldRefused("conversation", message)
    try:
        key = uuid.UUID(value)
    except ValueError:
        raise FieldRefused("conversation", message) from None
    if not Conversation.objects.filter(owner=user, pk=key).exists():
        raise FieldRefused("conversation", message)
    return key


def schedule_next(schedule: Schedule, *, after):
    """The schedule's first slot strictly after `after` (None: none left)."""
    return next_slot(
        cron=schedule.cron,
        every=schedule.every,
        at=schedule.at,
        tz=zone(schedule.timezone),
        anchor=schedule.anchor_at,
        after=after,
    )


def schedule_create(*, user, body: dict) -> tuple[Schedule, str | None]:
    """The schedule made, and its webhook secret when it has a webhookUrl."""
    now = timezone.now()
    schedule = Schedule(owner=user, created_at=now, updated_at=now, anchor_at=now)
    secret = _apply(schedule, body, user=user, now=now, creating=True)
    with transaction.atomic():
        # The owner's row locked: two creations at once, on two processes, count one after the other.
        list(get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk"))
        if Schedule.objects.filter(owner=user).count() >= settings.AGENT_MAX_SCHEDULES:
            raise TooManySchedules(f"at most {settings.AGENT_MAX_SCHEDULES} schedules per user")
        schedule.save()
    return schedule, secret


def schedule_update(*, schedule: Schedule, body: dict) -> tuple[Schedule, str | None]:
    """The schedule changed, and a webhook secret when this set a webhookUrl where there was none."""
    if not any(key in body for key in FIELDS):
        raise FieldRefused(None, "give at least one field to change")
    now = timezone.now()
    secret = _apply(schedule, body, user=schedule.owner, now=now, creating=False)
    schedule.updated_at = now
    schedule.save()
    return schedule, secret


def schedules_for_user(*, user) -> QuerySet[Schedule]:
    return Schedule.objects.filter(owner=user).select_related("agent", "last_run").order_by("-created_at")


def schedule_for_user(*, user, schedule_id) -> Schedule | None:
    return schedules_for_user(user=user).filter(pk=schedule_id).first()


def schedule_runs(*, schedule: Schedule, limit: int) -> list[Run]:
    return list(Run.objects.filter(schedule=schedule).order_by("-started_at")[:limit])


def schedule_status(schedule: Schedule) -> str | None:
    """lastStatus: a started slot's run's own status (`running` until its `complete`)."""
    if schedule.last_status == Schedule.Status.RUNNING and schedule.last_run is not None:
        return schedule.last_run.status
    return schedule.last_status


def schedule_json(schedule: Schedule) -> dict[str, Any]:
    def iso(moment):
        return moment.isoformat() if moment is not None else None

    return {
        "id": str(schedule.pk),
        "name": schedule.name,
        "agent": schedule.agent.slug if schedule.agent_id else DEFAULT_AGENT_SLUG,
        "prompt": schedule.prompt,
        "cron": schedule.cron,
        "every": schedule.every,
        "at": iso(schedule.at),
        "timezone": schedule.timezone,
        "conversation": str(schedule.conversation_id) if schedule.conversation_id else "new",
        "enabled": schedule.enabled,
        "webhookUrl": schedule.webhook_url,
        "createdAt": iso(schedule.created_at),
        "updatedAt": iso(schedule.updated_at),
        "nextRunAt": iso(schedule.next_run_at),
        "lastRunAt": iso(schedule.last_run_at),
        "lastRunId": str(schedule.last_run_id) if schedule.last_run_id else None,
        "lastStatus": schedule_status(schedule),
    }


def schedule_run_json(run: Run) -> dict[str, Any]:
    return {
        "runId": str(run.pk),
        "conversationId": str(run.conversation_id),
        "status": run.status,
        "startedAt": run.started_at.isoformat(),
        "finishedAt": run.finished_at.isoformat() if run.finished_at else None,
    }
