"""Reads of a user's conversations and runs. Every selector that takes a user returns only
that user's data; the staff-only reads live in chat.inspector."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet, Sum

from chat.accounts.budgets import period_bounds
from chat.accounts.limits import limits_for_user
from chat.conversations.paging import page_of
from chat.eventlog import search
from chat.models import Conversation, Feedback, ModelCall, Run

CONVERSATION_PAGE = 50


CONVERSATION_PAGE_MAX = 200


def conversations_for_user(*, user) -> QuerySet[Conversation]:
    running = Run.objects.filter(conversation=OuterRef("pk"), status=Run.Status.RUNNING, parent__isnull=True)
    return (
        Conversation.objects.filter(owner=user)
        .select_related("agent")
        .annotate(running=Exists(running))
        .order_by("-updated_at")
    )


def conversations_page(
    *, user, limit: int = CONVERSATION_PAGE, before: str | None = None, q: str = "", archived: bool = False
) -> tuple[list, str | None]:
    """One page of the user's conversations, pinned first, newest first, and the cursor of the next
    page (None on the last); BadCursor (a ValueError) for a `before` this list did not hand out.
    The archived ones alone with `archived`, else all the others. With a query `q`, only the
    conversations that match it (chat.eventlog.search), ranked, each with a `snippet` attribute."""
    rows = conversations_for_user(user=user).filter(archived=archived)
    if q.strip():
        rows = search.conversations_matching(rows, q=q, owner=user)
    page, cursor = page_of(rows, limit=min(limit, CONVERSATION_PAGE_MAX), before=before, ranked=bool(q.strip()))
    if q.strip():
        found = search.snippets(conversations=page, q=q)
        for conversation in page:
            conversation.snippet = found.get(conversation.pk, "")
    return page, cursor


def conversation_for_user(*, user, conversation_id) -> Conversation | None:
    """The conversation if it exists and is the user's; None otherwise (callers answer 404 alike)."""
    if not getattr(user, "is_authenticated", False):
        return None
    return conversations_for_user(user=user).filter(pk=conversation_id).first()


def conversation_owned(*, user, conversation_id) -> Conversation | None:
    """conversation_for_user without what the list and the page show (its agent profile, whether a
    run is running), for the run endpoints and the event stream, which need only that it is the
    user's and its own columns: a query without a join, subquery or order to build for each call."""
    if not getattr(user, "is_authenticated", False):
        return None
    return Conversation.objects.filter(owner=user, pk=conversation_id).first()


def conversations_owned(asked: list[tuple[Any, Any]]) -> list[Conversation | None]:
    """conversation_owned of each (user, conversation_id), in one query for all (the look-ups of a
    group of requests, chat.doors.http.lookups). The same conversation asked twice is read again
    for its second request: no two requests share an object."""
    signed_in = [(user, key) for user, key in asked if getattr(user, "is_authenticated", False)]
    found = {c.pk: c for c in Conversation.objects.filter(pk__in={key for _, key in signed_in})}
    out: list[Conversation | None] = []
    for user, key in asked:
        if not getattr(user, "is_authenticated", False):
            out.append(None)
        elif key in found and found[key].owner_id == user.pk:
            out.append(found.pop(key))
        elif key in found:
            out.append(None)  # another user's
        else:
            out.append(conversation_owned(user=user, conversation_id=key))  # asked twice, or none
    return out


def run_for_user(*, user, run_id) -> Run | None:
    """The run if it belongs to one of the user's conversations; None otherwise (404 alike)."""
    if not getattr(user, "is_authenticated", False):
        return None
    return Run.objects.filter(pk=run_id, conversation__owner=user).first()


def feedback_of_conversation(*, conversation_id) -> list[Feedback]:
    return list(Feedback.objects.filter(run__conversation_id=conversation_id).order_by("updated_at"))


def usage_for_user(*, user, now: datetime) -> dict[str, Any]:
    """The user's tokens today and this month (of TIME_ZONE), in all and per model, from their model calls."""
    today, _ = period_bounds("day", now)
    month, _ = period_bounds("month", now)
    rows = (
        ModelCall.objects.filter(run__user=user, started_at__gte=month)
        .values("run__model")
        .annotate(
            p=Sum("prompt_tokens"),
            c=Sum("completion_tokens"),
            t=Sum("total_tokens"),
            pd=Sum("prompt_tokens", filter=Q(started_at__gte=today)),
            cd=Sum("completion_tokens", filter=Q(started_at__gte=today)),
            td=Sum("total_tokens", filter=Q(started_at__gte=today)),
        )
        .order_by("run__model")
        .values_list("run__model", "p", "c", "t", "pd", "cd", "td")
    )
    zero = (0, 0, 0)
    day_total, month_total = list(zero), list(zero)
    models = []
    for model, *sums in rows:
        month_sums, day_sums = [n or 0 for n in sums[:3]], [n or 0 for n in sums[3:]]
        day_total = [a + b for a, b in zip(day_total, day_sums)]
        month_total = [a + b for a, b in zip(month_total, month_sums)]
        models.append({"model": model, "today": usage_json(*day_sums), "month": usage_json(*month_sums)})
    return {
        "today": usage_json(*day_total),
        "month": usage_json(*month_total),
        "models": models,
        # The quota that applies to this user: their groups', else the setting's (None: unlimited).
        "dailyTokenQuota": limits_for_user(user=user).daily_token_quota or None,
    }


def usage_json(prompt: int, completion: int, total: int) -> dict[str, int]:
    return {"promptTokens": prompt, "completionTokens": completion, "totalTokens": total}


def conversations_to_export(*, user) -> list[tuple[Conversation, set[str]]]:
    """Every conversation of the user, oldest first, each with the ids of its runs still running."""
    conversations = list(Conversation.objects.filter(owner=user).order_by("created_at", "pk"))
    running: dict[Any, set[str]] = {}
    rows = Run.objects.filter(conversation__owner=user, status=Run.Status.RUNNING, parent__isnull=True).values_list(
        "conversation_id", "pk"
    )
    for conversation_id, run_id in rows:
        running.setdefault(conversation_id, set()).add(str(run_id))
    return [(conversation, running.get(conversation.pk, set())) for conversation in conversations]
