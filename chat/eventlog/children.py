"""Child runs stored (docs/protocol.md, "Sub-agents"): a delegate tool call becomes a Run of the
delegate's profile, a child of the calling run, and its first event, a `user_message` holding
the task. It is not a message of the conversation: no admission, no turn, no queue."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from chat.eventlog.append import batches_append
from chat.eventlog.frames import CHILD_KEY, EventFrame
from chat.eventlog.types import EventBatch
from chat.exceptions import ConversationGone
from chat.models import AgentProfile, Run


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
