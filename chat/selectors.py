"""Reads. Every selector that takes a user returns only that user's data."""

from __future__ import annotations

from django.db.models import Exists, OuterRef, Q, QuerySet

from .frames import EventFrame, event_frame
from .models import Conversation, Event, Feedback, Run
from .paging import page_of

EVENT_PAGE = 5_000
CONVERSATION_PAGE = 50
CONVERSATION_PAGE_MAX = 200


def conversations_for_user(*, user) -> QuerySet[Conversation]:
    running = Run.objects.filter(conversation=OuterRef("pk"), status=Run.Status.RUNNING)
    return Conversation.objects.filter(owner=user).annotate(running=Exists(running)).order_by("-updated_at")


def conversations_page(*, user, limit: int = CONVERSATION_PAGE, before: str | None = None) -> tuple[list, str | None]:
    """One page of the user's conversations, newest first, and the cursor of the next page (None on
    the last); BadCursor (a ValueError) for a `before` this list did not hand out."""
    return page_of(conversations_for_user(user=user), limit=min(limit, CONVERSATION_PAGE_MAX), before=before)


def conversation_for_user(*, user, conversation_id) -> Conversation | None:
    """The conversation if it exists and is the user's; None otherwise (callers answer 404 alike)."""
    if not getattr(user, "is_authenticated", False):
        return None
    return conversations_for_user(user=user).filter(pk=conversation_id).first()


def run_for_user(*, user, run_id) -> Run | None:
    """The run if it belongs to one of the user's conversations; None otherwise (404 alike)."""
    if not getattr(user, "is_authenticated", False):
        return None
    return Run.objects.filter(pk=run_id, conversation__owner=user).first()


def feedback_of_conversation(*, conversation_id) -> list[Feedback]:
    return list(Feedback.objects.filter(run__conversation_id=conversation_id).order_by("updated_at"))


def events_after(
    *, conversation_id, after: int = 0, until: int | None = None, limit: int | None = None
) -> list[EventFrame]:
    """Protocol frames of the persisted events with after < seq (<= until), in order."""
    rows = Event.objects.filter(conversation_id=conversation_id, seq__gt=after)
    if until is not None:
        rows = rows.filter(seq__lte=until)
    rows = rows.order_by("seq").values_list("seq", "run_id", "payload")
    if limit is not None:
        rows = rows[:limit]
    return [event_frame(payload, seq=seq, run_id=run_id) for seq, run_id, payload in rows]


def running_run(*, conversation_id) -> Run | None:
    return Run.objects.filter(conversation_id=conversation_id, status=Run.Status.RUNNING).first()


def runs_memory_events(*, runs: dict) -> dict[object, list[EventFrame]]:
    """For running runs, {conversation_id: run_id}: the events each one's memory is made of, its
    conversation's finished runs and its own events so far (chat.history makes the model's
    messages of them); one query for them all."""
    rows = (
        Event.objects.filter(conversation_id__in=list(runs))
        .filter(Q(run_id__in=list(runs.values())) | ~Q(run__status=Run.Status.RUNNING))
        .order_by("conversation_id", "seq")
        .values_list("conversation_id", "seq", "run_id", "payload")
    )
    out: dict = {key: [] for key in runs}
    for conversation_id, seq, run_id, payload in rows:
        out[conversation_id].append(event_frame(payload, seq=seq, run_id=run_id))
    return out


def stale_runs(*, older_than) -> list[Run]:
    return list(Run.objects.filter(status=Run.Status.RUNNING, heartbeat_at__lt=older_than))
