"""Reads. Every selector that takes a user returns only that user's data."""

from __future__ import annotations

from datetime import UTC

from django.db.models import Exists, OuterRef, Q, QuerySet

from . import search
from .frames import EventFrame, event_frame
from .models import Conversation, Event, Run
from .paging import page_of

EVENT_PAGE = 5_000
CONVERSATION_PAGE = 50
CONVERSATION_PAGE_MAX = 200


def conversations_for_user(*, user) -> QuerySet[Conversation]:
    running = Run.objects.filter(conversation=OuterRef("pk"), status=Run.Status.RUNNING)
    return Conversation.objects.filter(owner=user).annotate(running=Exists(running)).order_by("-updated_at")


def conversations_page(
    *, user, limit: int = CONVERSATION_PAGE, before: str | None = None, q: str = ""
) -> tuple[list, str | None]:
    """One page of the user's conversations, newest first, and the cursor of the next page (None on
    the last); BadCursor (a ValueError) for a `before` this list did not hand out. With a query `q`,
    only the conversations that match it (chat.search), each with a `snippet` attribute."""
    rows = conversations_for_user(user=user)
    if q.strip():
        rows = search.conversations_matching(rows, q=q, owner=user)
    page, cursor = page_of(rows, limit=min(limit, CONVERSATION_PAGE_MAX), before=before)
    if q.strip():
        found = search.snippets(conversations=page, q=q)
        for conversation in page:
            conversation.snippet = found.get(conversation.pk, "")
    return page, cursor


def events_for_export(*, conversation_id) -> list[EventFrame]:
    """Every event frame of a conversation, in order, each with `ts` (its created_at) when the
    frame does not carry it already: an export keeps when things happened."""
    rows = (
        Event.objects.filter(conversation_id=conversation_id)
        .order_by("seq")
        .values_list("seq", "run_id", "payload", "created_at")
    )
    frames = []
    for seq, run_id, payload, created_at in rows:
        frame = event_frame(payload, seq=seq, run_id=run_id)
        frame.setdefault("ts", timestamp(created_at))  # type: ignore[typeddict-unknown-key]
        frames.append(frame)
    return frames


def timestamp(moment) -> str:
    """ISO 8601 UTC with milliseconds, as event frames carry `ts`."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def conversation_for_user(*, user, conversation_id) -> Conversation | None:
    """The conversation if it exists and is the user's; None otherwise (callers answer 404 alike)."""
    if not getattr(user, "is_authenticated", False):
        return None
    return conversations_for_user(user=user).filter(pk=conversation_id).first()


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
