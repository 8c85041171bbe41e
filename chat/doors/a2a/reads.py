"""What the A2A door reads (docs/protocol.md, "A2A agent"): a user's tasks on one agent (the
top-level runs with a user_message of the user's conversations, built from that agent), their
events, and the conversation a `contextId` names. Each takes the endpoint's agent as the
AgentProfile's pk, None for `default`; another user's, another agent's and an unknown id read
alike: nothing."""

from __future__ import annotations

import base64
import uuid
from collections import defaultdict
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet

from chat.eventlog.reads import frames_of, run_events
from chat.models import Conversation, Event, Run

MAX_PAGE = 100
DEFAULT_PAGE = 50


class BadPageToken(ValueError):
    pass


def as_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def _tasks(*, user, agent_id: int | None) -> QuerySet[Run]:
    has_message = Event.objects.filter(run_id=OuterRef("pk"), type="user_message")
    return Run.objects.filter(
        Exists(has_message), conversation__owner=user, imported=False, parent__isnull=True, agent_id=agent_id
    )


def task_run(*, user, agent_id: int | None, task_id: str) -> Run | None:
    run_id = as_uuid(task_id)
    if run_id is None:
        return None
    return _tasks(user=user, agent_id=agent_id).filter(pk=run_id).first()


def task_events(*, run: Run) -> list[dict[str, Any]]:
    return list(run_events(conversation_id=run.conversation_id, run_id=run.pk))


def context_conversation(*, user, agent_id: int | None, context_id: str) -> Conversation | None:
    """The user's conversation a contextId names, when its agent is the endpoint's."""
    conversation_id = as_uuid(context_id)
    if conversation_id is None:
        return None
    return Conversation.objects.filter(pk=conversation_id, owner=user, agent_id=agent_id).first()


def _token(run: Run) -> str:
    return base64.urlsafe_b64encode(f"{run.started_at.isoformat()}|{run.pk}".encode()).decode()


def _after_token(token: str) -> Q:
    try:
        moment, _, run_id = base64.urlsafe_b64decode(token.encode()).decode().partition("|")
        started = datetime.fromisoformat(moment)
        pk = uuid.UUID(run_id)
    except ValueError as exc:
        raise BadPageToken("pageToken is not one this server gave") from exc
    return Q(started_at__lt=started) | Q(started_at=started, pk__lt=pk)


def tasks_page(
    *,
    user,
    agent_id: int | None,
    context_id: str | None,
    statuses: tuple[str, ...] | None,
    page_size: int,
    page_token: str,
) -> tuple[list[tuple[Run, list[dict[str, Any]]]], str, int]:
    """One page of the user's tasks on the agent, newest first, each with its events; the next
    page's token ("" after the last) and how many tasks match in all. `statuses`: the runs'."""
    runs = _tasks(user=user, agent_id=agent_id)
    if context_id is not None:
        conversation_id = as_uuid(context_id)
        runs = runs.filter(conversation_id=conversation_id) if conversation_id else runs.none()
    if statuses is not None:
        runs = runs.filter(status__in=statuses)
    total = runs.count()
    if page_token:
        runs = runs.filter(_after_token(page_token))
    page = list(runs.order_by("-started_at", "-pk")[: page_size + 1])
    more = len(page) > page_size
    page = page[:page_size]
    by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    events = Event.objects.filter(run_id__in=[run.pk for run in page]).order_by("seq")
    for frame in frames_of(events):
        by_run[str(frame["runId"])].append(frame)
    return [(run, by_run[str(run.pk)]) for run in page], _token(page[-1]) if more else "", total
