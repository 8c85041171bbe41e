"""A run's `complete` and `approval_request` as they are published (chat.runtime.doorbell's
observers): the owner is notified when a schedule or a trigger started the run, or when no socket
or stream of its conversation is open on any process (chat.realtime.hub.Hub.watched); a
`/v1/chat/completions` request watches its own run (docs/protocol.md, "Notifications").

Only the process that stored the frame publishes it, once; a resumed run's second
`approval_request` of the same call, or anything published twice, makes no second notification
(chat.notifications.services). The work runs in a task of its own: a run never waits for it."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async

from chat.agent.answer import Answer
from chat.agent.batching import server_task
from chat.eventlog.frames import CHILD_KEY, EventFrame
from chat.eventlog.reads import run_events
from chat.models import Event, Notification, Run
from chat.notifications.push import push_new
from chat.notifications.services import BODY_CHARS, notification_create, notification_json
from chat.realtime.hub import get_hub
from chat.runtime import doorbell

logger = logging.getLogger(__name__)

_notifying: set[asyncio.Task] = set()  # the tasks under way (a task nobody holds may be collected before it ends)

ALONE = ("schedule", "trigger")  # the doors with nobody at them
WATCHING_ITSELF = ("v1",)  # the doors whose request follows its run to the end


@dataclass(frozen=True)
class RunFacts:
    owner_id: Any
    title: str
    schedule_id: Any
    trigger_id: Any
    via: str | None
    has_message: bool  # a compaction run has no user_message: it notifies no one


def run_facts(*, run_id) -> RunFacts | None:
    run = Run.objects.filter(pk=run_id).select_related("conversation").first()
    if run is None:
        return None
    first = Event.objects.filter(run_id=run_id, type="user_message").order_by("seq").values_list("payload", flat=True)
    payload = first.first()
    via = (payload or {}).get("via")
    return RunFacts(
        owner_id=run.user_id,
        title=run.conversation.title,
        schedule_id=run.schedule_id,
        trigger_id=run.trigger_id,
        via=via,
        has_message=payload is not None,
    )


def answer_of(*, conversation_id, run_id) -> str:
    answer = Answer()
    for frame in run_events(conversation_id=conversation_id, run_id=run_id):
        answer.add(frame)
    return answer.text


async def unwatched(facts: RunFacts, conversation_id) -> bool:
    if facts.schedule_id or facts.trigger_id or facts.via in ALONE:
        return True
    if facts.via in WATCHING_ITSELF:
        return False
    return not await get_hub().watched(doorbell.conversation_group(conversation_id))


def _run_finished(*, conversation_id, run_id, status: str, facts: RunFacts) -> Notification | None:
    return notification_create(
        owner_id=facts.owner_id,
        kind=Notification.Kind.RUN_FINISHED,
        title=facts.title,
        body=answer_of(conversation_id=conversation_id, run_id=run_id)[:BODY_CHARS],
        conversation_id=conversation_id,
        run_id=run_id,
        schedule_id=facts.schedule_id,
        trigger_id=facts.trigger_id,
        status=status,
    )


def _approval_waiting(*, conversation_id, run_id, frame: EventFrame, facts: RunFacts) -> Notification | None:
    return notification_create(
        owner_id=facts.owner_id,
        kind=Notification.Kind.APPROVAL_WAITING,
        title=facts.title,
        body=frame.get("toolName", ""),
        conversation_id=conversation_id,
        run_id=run_id,
        schedule_id=facts.schedule_id,
        trigger_id=facts.trigger_id,
        tool_call_id=frame.get("toolCallId", ""),
        tool_name=frame.get("toolName", ""),
    )


async def notify(conversation_id, frame: EventFrame) -> None:
    """The notification of one published frame, if nobody watches."""
    run_id = frame["runId"]
    try:
        facts = await database_sync_to_async(run_facts)(run_id=run_id)
        if facts is None or not facts.has_message or not await unwatched(facts, conversation_id):
            return
        if frame["type"] == "complete":
            made = await database_sync_to_async(_run_finished)(
                conversation_id=conversation_id, run_id=run_id, status=frame.get("status", ""), facts=facts
            )
        else:
            made = await database_sync_to_async(_approval_waiting)(
                conversation_id=conversation_id, run_id=run_id, frame=frame, facts=facts
            )
    except Exception:  # best effort: a run's end is never the worse for it
        logger.warning("could not notify %s of run %s", frame.get("type"), run_id, exc_info=True)
        return
    if made is not None:
        await push_new(facts.owner_id, notification_json(made))


def frames_published(conversation_id, frames: list[EventFrame]) -> None:
    """doorbell's observer: a top-level run's `complete` (a child run's ends inside its parent's),
    and every `approval_request` (a child run's waits for the owner too)."""
    for frame in frames:
        kind = frame.get("type")
        if (kind == "complete" and CHILD_KEY not in frame) or kind == "approval_request":
            task = server_task(notify(conversation_id, frame), name="notify")
            _notifying.add(task)
            task.add_done_callback(_notifying.discard)


doorbell.observe(frames_published)
