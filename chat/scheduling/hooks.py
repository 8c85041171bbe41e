"""A trigger's call (docs/protocol.md, "Triggers"): the secret checked (a bearer value or an
HMAC-SHA256 signature of the body), the body made the payload and filled into the prompt, and
the run started as the owner through the front door (chat.runs.engine.start), as a schedule's
slot is (chat.scheduling.firing). A refused call starts and stores nothing."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

from channels.db import database_sync_to_async
from django.conf import settings
from django.utils import timezone

from chat.models import TRIGGER_SOURCE, Conversation, Run, TitleSource, Trigger
from chat.runs import engine
from chat.runs.client_frames import ProtocolError
from chat.runs.requests import StartRun
from chat.scheduling.triggers import PLACEHOLDER, bearer_holds, signature_holds

RATE_WINDOW = timedelta(seconds=60)


def hook_trigger(trigger_id: uuid.UUID) -> Trigger | None:
    """The trigger a hook call reaches: None when missing, disabled or its owner deactivated."""
    return (
        Trigger.objects.filter(pk=trigger_id, enabled=True, owner__is_active=True)
        .select_related("owner", "agent")
        .first()
    )


def hook_authenticated(trigger: Trigger, *, authorization: str, signature: str, body: bytes) -> bool:
    """Whether the call holds the trigger's secret: `Authorization: Bearer <secret>`, or
    `X-Agentsite-Signature: sha256=<hex>` (the HMAC-SHA256 of the body keyed with the secret)."""
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return bearer_holds(trigger, value.strip())
    return bool(signature) and signature_holds(trigger, signature=signature.strip(), body=body)


def payload_text(body: bytes, content_type: str) -> str:
    """The body as the payload: JSON pretty-printed when it says it is JSON and parses, else its
    UTF-8 text (UnicodeDecodeError: not UTF-8)."""
    text = body.decode("utf-8")
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind == "application/json" or kind.endswith("+json"):
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            pass
    return text


def prompt_filled(trigger: Trigger, payload: str) -> str:
    return trigger.prompt.replace(PLACEHOLDER, payload)


def rate_limited(trigger: Trigger) -> bool:
    """Whether the trigger started AGENT_TRIGGER_RATE_LIMIT runs in the last 60 seconds."""
    since = timezone.now() - RATE_WINDOW
    return Run.objects.filter(trigger=trigger, started_at__gte=since).count() >= settings.AGENT_TRIGGER_RATE_LIMIT


def _conversation_for(trigger: Trigger) -> tuple[Conversation | None, bool]:
    """The conversation the call's run goes to, and whether it was made for it; None: the
    trigger's conversation was deleted."""
    if trigger.conversation_id is None:
        conversation = Conversation.objects.create(
            owner=trigger.owner,
            title=trigger.name,
            title_source=TitleSource.USER,
            source=TRIGGER_SOURCE,
            trigger=trigger,
            agent=trigger.agent,
        )
        return conversation, True
    return Conversation.objects.filter(owner=trigger.owner, pk=trigger.conversation_id).first(), False


def _started(trigger: Trigger, run: Run) -> None:
    Trigger.objects.filter(pk=trigger.pk).update(last_run=run, last_run_at=run.started_at, last_status="running")


def _refused(trigger: Trigger, code: str, made: Conversation | None) -> None:
    if made is not None:
        made.delete()
    Trigger.objects.filter(pk=trigger.pk).update(last_status=code.lower())


async def trigger_fire(trigger: Trigger, prompt: str) -> tuple[Run, int]:
    """Start the call's run (ProtocolError: refused, nothing of it stored)."""
    conversation, made = await database_sync_to_async(_conversation_for)(trigger)
    if conversation is None:
        raise ProtocolError("NOT_FOUND", "The trigger's conversation was deleted.")
    try:
        run, seq = await engine.start(StartRun(conversation, trigger.owner, prompt, trigger_id=trigger.pk))
    except ProtocolError as exc:
        await database_sync_to_async(_refused)(trigger, exc.code, conversation if made else None)
        raise
    except BaseException:
        if made:
            await database_sync_to_async(conversation.delete)()
        raise
    await database_sync_to_async(_started)(trigger, run)
    return run, seq
