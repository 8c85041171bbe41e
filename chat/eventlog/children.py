"""Child runs stored (docs/protocol.md, "Sub-agents"): a delegate tool call becomes a Run of the
delegate's profile, a child of the calling run, and its first event, a `user_message` holding
the task. It is not a message of the conversation: no admission, no turn, no queue."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from chat.agent.answer import Answer
from chat.agent.events import RunStatus
from chat.agent.tools import error_result
from chat.eventlog.append import batches_append
from chat.eventlog.frames import CHILD_KEY, EventFrame
from chat.eventlog.types import EventBatch
from chat.exceptions import ConversationGone
from chat.models import AgentProfile, Event, Run


@dataclass(frozen=True)
class ChildOutcome:
    """How a child run ended: its status, its answer (on `succeeded`) or its error's message."""

    status: str
    answer: str = ""
    message: str = ""


def failure(slug: str, outcome: ChildOutcome) -> str:
    return f"agent {slug} {outcome.status}: {outcome.message}"


def call_result(slug: str, outcome: ChildOutcome) -> tuple[str, bool]:
    """The result of a delegate call and whether it is an error, from its child run's outcome."""
    if outcome.status == RunStatus.SUCCEEDED:
        return outcome.answer, False
    return error_result(failure(slug, outcome)), True


def ended_children(parent_ids: Collection[Any]) -> dict[Any, dict[str, tuple[str, bool]]]:
    """{parent run: {toolCallId: (result, is_error)}} for the child runs of those runs that have
    ended: what their delegate calls end with when a take-over finds them open (the child's
    stored outcome, docs/protocol.md, "Sub-agents"). Two queries."""
    children = list(
        Run.objects.filter(parent_id__in=parent_ids).exclude(status=Run.Status.RUNNING).select_related("agent")
    )
    if not children:
        return {}
    answers: dict[Any, Answer] = {child.pk: Answer() for child in children}
    messages: dict[Any, str] = {}
    events = Event.objects.filter(run__in=children).exclude(type="thinking").order_by("seq")
    for run_id, payload in events.values_list("run_id", "payload"):
        answers[run_id].add(payload)
        if payload.get("type") == "error" and not payload.get("resumed"):
            messages[run_id] = str(payload.get("message", ""))
    out: dict[Any, dict[str, tuple[str, bool]]] = {}
    for child in children:
        slug = child.agent.slug if child.agent is not None else ""
        outcome = ChildOutcome(child.status, answers[child.pk].text, messages.get(child.pk, ""))
        out.setdefault(child.parent_id, {})[child.parent_tool_call_id] = call_result(slug, outcome)
    return out


def lineage(run: Run) -> dict[str, str]:
    """The fields every event of `run` carries: its parent run and the call that started it
    (none for a top-level run)."""
    if run.parent_id is None:
        return {}
    return {CHILD_KEY: str(run.parent_id), "parentToolCallId": run.parent_tool_call_id}


def child_run_start(
    *, parent_id, tool_call_id: str, profile: AgentProfile, task: str, worker: str
) -> tuple[Run, list[EventFrame]]:
    """Store a child run of `parent_id` for its call `tool_call_id`, running on `worker`, and its
    user_message: (run, frames). ConversationGone when the parent's conversation is gone."""
    parent = Run.objects.only("conversation_id", "user_id", "depth").get(pk=parent_id)
    now = timezone.now()
    with transaction.atomic():
        run = Run.objects.create(
            conversation_id=parent.conversation_id,
            user_id=parent.user_id,
            agent=profile,
            model=profile.model,
            worker=worker,
            started_at=now,
            heartbeat_at=now,
            parent_id=parent_id,
            parent_tool_call_id=tool_call_id,
            depth=parent.depth + 1,
        )
        payload = {
            "type": "user_message",
            "content": task,
            "agent": profile.slug,
            "agentName": profile.name,
            "model": profile.model,
            **lineage(run),
        }
        (frames,) = batches_append([EventBatch(run.conversation_id, run.pk, [payload])])
        if frames is None:
            raise ConversationGone("the conversation was deleted")
    return run, frames
