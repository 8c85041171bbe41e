"""Generated titles in the database (docs/protocol.md, "Titles, pinning, archiving"): whether a conversation waits for
one, and the title call stored (its ModelCall, counted in usage, and the title when the
conversation still has none of its own). chat.runtime.titles asks the model between the two."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Exists, F, OuterRef

from chat.agent.events import RunStatus
from chat.agent.text import clean_value
from chat.eventlog.types import ModelCallData
from chat.models import Conversation, Event, ModelCall, Run, TitleSource


def title_wanted(*, conversation_id, run_id) -> str | None:
    """The message `run_id` answered when its conversation waits for a title: nobody titled it
    yet (titleSource "default") and no run before it ended with an answer, so that the title
    comes once, after the first answer, and never to an imported conversation. None otherwise."""
    answered_before = Run.objects.filter(conversation=OuterRef("pk"), status=RunStatus.SUCCEEDED).exclude(pk=run_id)
    waiting = Conversation.objects.filter(pk=conversation_id, title_source=TitleSource.DEFAULT).exclude(
        Exists(answered_before)
    )
    if not waiting.exists():
        return None
    payload = (
        Event.objects.filter(conversation_id=conversation_id, run_id=run_id, type="user_message")
        .order_by("seq")
        .values_list("payload", flat=True)
        .first()
    )
    content = payload.get("content") if isinstance(payload, dict) else None
    return content if isinstance(content, str) and content.strip() else None


def title_store(*, conversation_id, run_id, call: ModelCallData, title: str) -> bool:
    """The title call of `run_id` recorded as one of its model calls (purpose "title": the
    inspector shows it, usage, quotas and /metrics count its tokens with the run's), and `title`
    given to the conversation unless someone titled it meanwhile. Whether the title was stored."""
    with transaction.atomic():
        ModelCall.objects.create(run_id=run_id, **clean_value(vars(call)) | {"purpose": "title"})
        Run.objects.filter(pk=run_id).update(
            prompt_tokens=F("prompt_tokens") + call.prompt_tokens,
            completion_tokens=F("completion_tokens") + call.completion_tokens,
            total_tokens=F("total_tokens") + call.total_tokens,
        )
        if not title:
            return False
        # Not activity: updated_at stays. A user's title set meanwhile wins (the filter).
        return bool(
            Conversation.objects.filter(pk=conversation_id, title_source=TitleSource.DEFAULT).update(
                title=title, title_source=TitleSource.GENERATED
            )
        )
