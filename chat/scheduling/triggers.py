"""A user's triggers written and read (docs/protocol.md, "Triggers"): the body's fields checked as
a schedule's are (chat.scheduling.services), the prompt a template holding `{{payload}}`, and the
secret made once and kept as its SHA-256 digest and encrypted (chat.scheduling.webhooks): never as
it is."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from chat.agents.selectors import agent_chosen
from chat.models import DEFAULT_AGENT_SLUG, Run, Trigger
from chat.scheduling.services import NAME_FROM_PROMPT, FieldRefused, conversation_checked, name_checked, prompt_checked
from chat.scheduling.webhooks import secret_sealed, secret_value

FIELDS = ("prompt", "name", "agent", "conversation", "enabled")
PLACEHOLDER = "{{payload}}"
SECRET_PREFIX = "hk_"
SIGNATURE_PREFIX = "sha256="


class TooManyTriggers(Exception):
    pass


def secret_digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def secret_new() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)  # 43 URL-safe characters


def bearer_holds(trigger: Trigger, value: str) -> bool:
    """Whether a bearer value is the trigger's secret (compared by digest, in constant time)."""
    return hmac.compare_digest(secret_digest(value), trigger.secret_digest)


def signature_holds(trigger: Trigger, *, signature: str, body: bytes) -> bool:
    """Whether `sha256=<hex>` is the HMAC-SHA256 of the body keyed with the trigger's secret."""
    secret = secret_value(trigger.secret_sealed)
    if secret is None or not signature.startswith(SIGNATURE_PREFIX):
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature[len(SIGNATURE_PREFIX) :].strip().lower())


def _apply(trigger: Trigger, body: dict, *, user, creating: bool) -> None:
    """Check the body's fields and set them on `trigger` (not saved)."""
    if creating or "prompt" in body:
        prompt = prompt_checked(body)
        if PLACEHOLDER not in prompt:
            raise FieldRefused("prompt", f"prompt must contain {PLACEHOLDER}")
        trigger.prompt = prompt
    if "name" in body:
        trigger.name = name_checked(body)
    elif creating:
        trigger.name = trigger.prompt.strip()[:NAME_FROM_PROMPT].strip()
    if "agent" in body:
        try:
            trigger.agent = agent_chosen(user=user, slug=body["agent"])
        except (ValueError, LookupError):
            raise FieldRefused("agent", "agent must be the slug of an agent you may use (GET /api/agents/)") from None
    if "conversation" in body:
        trigger.conversation_id = conversation_checked(body["conversation"], user=user)
    if "enabled" in body:
        if not isinstance(body["enabled"], bool):
            raise FieldRefused("enabled", "enabled must be true or false")
        trigger.enabled = body["enabled"]


def trigger_create(*, user, body: dict) -> tuple[Trigger, str]:
    """The trigger made, and its secret (shown once)."""
    now = timezone.now()
    trigger = Trigger(owner=user, created_at=now, updated_at=now)
    _apply(trigger, body, user=user, creating=True)
    secret = secret_new()
    trigger.secret_digest, trigger.secret_sealed = secret_digest(secret), secret_sealed(secret)
    with transaction.atomic():
        # The owner's row locked: two creations at once count one after the other.
        list(get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk"))
        if Trigger.objects.filter(owner=user).count() >= settings.AGENT_MAX_TRIGGERS:
            raise TooManyTriggers(f"at most {settings.AGENT_MAX_TRIGGERS} triggers per user")
        trigger.save()
    return trigger, secret


def trigger_update(*, trigger: Trigger, body: dict) -> Trigger:
    if not any(key in body for key in FIELDS):
        raise FieldRefused(None, "give at least one field to change")
    _apply(trigger, body, user=trigger.owner, creating=False)
    trigger.updated_at = timezone.now()
    trigger.save()
    return trigger


def triggers_for_user(*, user) -> QuerySet[Trigger]:
    return Trigger.objects.filter(owner=user).select_related("agent", "last_run").order_by("-created_at")


def trigger_for_user(*, user, trigger_id) -> Trigger | None:
    return triggers_for_user(user=user).filter(pk=trigger_id).first()


def trigger_runs(*, trigger: Trigger, limit: int) -> list[Run]:
    return list(Run.objects.filter(trigger=trigger).order_by("-started_at")[:limit])


def trigger_json(trigger: Trigger) -> dict[str, Any]:
    def iso(moment):
        return moment.isoformat() if moment is not None else None

    status = trigger.last_status
    if status == "running" and trigger.last_run is not None:
        status = trigger.last_run.status
    return {
        "id": str(trigger.pk),
        "name": trigger.name,
        "agent": trigger.agent.slug if trigger.agent_id else DEFAULT_AGENT_SLUG,
        "prompt": trigger.prompt,
        "conversation": str(trigger.conversation_id) if trigger.conversation_id else "new",
        "enabled": trigger.enabled,
        "url": f"/hooks/{trigger.pk}/",
        "createdAt": iso(trigger.created_at),
        "updatedAt": iso(trigger.updated_at),
        "lastRunAt": iso(trigger.last_run_at),
        "lastRunId": str(trigger.last_run_id) if trigger.last_run_id else None,
        "lastStatus": status,
    }
