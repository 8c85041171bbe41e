"""Queued messages and steers (docs/protocol.md, "Queued messages" and "Steering").

A message sent with `whileRunning: "queue"` while the conversation's run works waits, a
QueuedMessage row and a `queued` event, and starts a run by itself when that run ends:
start_next, called by the event log in the transaction that stores the run's `complete`
(chat.eventlog.followups), whichever process stores it. First in, first out; the start's rules
are checked then, and a refused message leaves the queue (`unqueued`, reason `refused`) for the
next one to be tried.

A message sent with `whileRunning: "steer"` is a row bound to the running run and a `steer`
event of that run; the run takes it in before its next model call (chat.eventlog.steers), or,
ending first, leaves it as the first waiting message."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import transaction

from chat.conversations import uploads
from chat.eventlog import followups
from chat.eventlog.append import batches_append, conversation_key
from chat.eventlog.frames import EventFrame
from chat.eventlog.types import EventBatch, Message, RunStart
from chat.exceptions import (
    AgentUnavailable,
    ConversationGone,
    NotAUserMessage,
    NotQueued,
    QueueFull,
    QuotaExceeded,
    RateLimited,
    RunInProgress,
)
from chat.models import Conversation, QueuedMessage, Run
from chat.runs.starter import start_with_memory
from chat.runtime.doorbell import publish
from chat.runtime.registry import get_registry

WITHDRAWN, CLEARED, REFUSED = "withdrawn", "cleared", "refused"


@dataclass(frozen=True)
class Queued:
    queue_id: str
    seq: int  # of its `queued` event


@dataclass(frozen=True)
class Steered:
    queue_id: str
    run_id: str  # the run it steers
    seq: int  # of its `steer` event


def refusal_code(exc: Exception) -> str:
    """The protocol's code for a refused start (as chat.runs.engine answers it)."""
    if isinstance(exc, RateLimited):
        return "RATE_LIMITED"
    if isinstance(exc, QuotaExceeded):  # QuotaBusy too
        return "QUOTA_EXCEEDED"
    if isinstance(exc, AgentUnavailable):
        return "AGENT_UNAVAILABLE"
    return "BAD_REQUEST"


def _locked(conversation_id) -> Any:
    """The conversation's row locked (the writers of its events lock it first too), or ConversationGone."""
    key = conversation_key(conversation_id)
    if not Conversation.objects.select_for_update().filter(pk=key).values_list("pk").exists():
        raise ConversationGone(str(key))
    return key


def _stored(key, payloads: list[dict[str, Any]]) -> list[EventFrame]:
    (frames,) = batches_append([EventBatch(key, None, payloads)])
    if frames is None:
        raise ConversationGone(str(key))
    return frames


def message_queue(message: Message) -> tuple[Queued | None, list[EventFrame]]:
    """Queue the message if the conversation's run is in progress or messages wait already:
    (its queueId and the seq of its `queued` event, the frames to publish). (None, []) when
    nothing is in progress and nothing waits: the message starts as any other. QueueFull beyond
    AGENT_MAX_QUEUED."""
    with transaction.atomic():
        key = _locked(message.conversation.pk)
        running = Run.objects.filter(conversation_id=key, status=Run.Status.RUNNING, parent__isnull=True).exists()
        return _queued(message, key, running=running)


def message_steer(message: Message) -> tuple[Steered | Queued | None, list[EventFrame]]:
    """Steer the conversation's run in progress with the message: (its queueId, the run and the
    seq of its `steer` event, the frames to publish). With no run in progress it is queued as
    message_queue would (messages wait: it waits behind them) or starts as any other (None)."""
    with transaction.atomic():
        key = _locked(message.conversation.pk)
        run_id = (
            Run.objects.filter(conversation_id=key, status=Run.Status.RUNNING, parent__isnull=True)
            .values_list("pk", flat=True)
            .first()
        )
        if run_id is None:
            return _queued(message, key, running=False)
        if QueuedMessage.objects.filter(conversation_id=key).withdrawable().count() >= settings.AGENT_MAX_QUEUED:
            raise QueueFull(str(key))
        row = QueuedMessage(
            conversation_id=key,
            user=message.user,
            content=message.content,
            steer_run_id=run_id,
            api_token_id=message.api_token_id,
        )
        (frames,) = batches_append(
            [EventBatch(key, run_id, [{"type": "steer", "queueId": str(row.id), "content": row.content}])]
        )
        if frames is None:
            raise ConversationGone(str(key))
        row.seq = frames[0]["seq"]
        row.save(force_insert=True)
        return Steered(str(row.id), str(run_id), row.seq), frames


def _queued(message: Message, key, *, running: bool) -> tuple[Queued | None, list[EventFrame]]:
    waiting = QueuedMessage.objects.filter(conversation_id=key).withdrawable().count()
    if not running and not waiting:
        return None, []
    if waiting >= settings.AGENT_MAX_QUEUED:
        raise QueueFull(str(key))
    row = QueuedMessage(
        conversation_id=key,
        user=message.user,
        content=message.content,
        attachments=list(message.attachments),
        api_token_id=message.api_token_id,
    )
    payload: dict[str, Any] = {"type": "queued", "queueId": str(row.id), "content": row.content}
    if row.attachments:
        payload["attachments"] = row.attachments
    frames = _stored(key, [payload])
    row.seq = frames[0]["seq"]
    row.save(force_insert=True)
    return Queued(str(row.id), row.seq), frames


def message_unqueue(*, conversation_id, queue_id: str) -> list[EventFrame]:
    """Withdraw a waiting message or a pending steer: its `unqueued` (withdrawn) frames, or NotQueued."""
    with transaction.atomic():
        key = _locked(conversation_id)
        if not QueuedMessage.objects.filter(conversation_id=key, pk=_uuid(queue_id)).withdrawable().delete()[0]:
            raise NotQueued(queue_id)
        return _stored(key, [{"type": "unqueued", "queueId": str(_uuid(queue_id)), "reason": WITHDRAWN}])


def queue_clear(*, conversation_id) -> list[EventFrame]:
    """Withdraw every waiting message and pending steer of the conversation (`cancel` with `clearQueue`)."""
    with transaction.atomic():
        key = _locked(conversation_id)
        rows = QueuedMessage.objects.filter(conversation_id=key).withdrawable().order_by("-steered", "seq")
        ids = list(rows.values_list("pk", flat=True))
        if not ids:
            return []
        QueuedMessage.objects.filter(pk__in=ids).delete()
        return _stored(key, [{"type": "unqueued", "queueId": str(pk), "reason": CLEARED} for pk in ids])


def queue_rows(*, conversation_id) -> tuple[list[QueuedMessage], list[QueuedMessage]]:
    """The waiting messages, in the order they will start, and the pending steers, in the order
    they came."""
    rows = QueuedMessage.objects.filter(conversation_id=conversation_id)
    return list(rows.waiting()), list(rows.pending_steers())


def _uuid(text: str):
    try:
        return QueuedMessage._meta.pk.to_python(text)
    except Exception:
        raise NotQueued(text) from None


def start_next(conversation_ids: list[Any], worker: str) -> list[followups.FollowUp]:
    """In the transaction that stored these conversations' `complete`s: each one's first waiting
    message that the start's rules admit starts a run (its user_message right after), those
    refused before it leave the queue (`unqueued`, refused, with the code)."""
    out = []
    for key in conversation_ids:
        conversation = Conversation.objects.filter(pk=key).first()
        if conversation is None:
            continue
        follow_up = followups.FollowUp(key)
        for row in QueuedMessage.objects.filter(conversation_id=key).waiting().select_related("user"):
            result: Any
            try:  # its files as they are now: one deleted meanwhile refuses the start
                files = _files_now(key, row.attachments)
            except uploads.FileRefused as exc:
                result = NotAUserMessage(exc.message)  # BAD_REQUEST
            else:
                message = Message(
                    conversation,
                    row.user,
                    row.content,
                    attachments=files,
                    queue_id=str(row.pk),
                    api_token_id=row.api_token_id,
                )
                (result,) = start_with_memory([RunStart(message, settings.AGENT_MODEL or "", worker)])
            if isinstance(result, RunInProgress | ConversationGone):
                break  # a run started meanwhile: this one waits for it
            queue_id = str(row.pk)
            row.delete()
            if isinstance(result, Exception):
                refusal = {"type": "unqueued", "queueId": queue_id, "reason": REFUSED}
                follow_up.frames += _stored(key, [{**refusal, "code": refusal_code(result)}])
                continue
            run, frames, memory, config = result
            follow_up.frames += frames
            follow_up.run, follow_up.memory, follow_up.config = run, memory, config
            break
        if follow_up.frames:
            out.append(follow_up)
    return out


def _files_now(key, attachments: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    if not attachments:
        return ()
    paths = [item["path"] for item in attachments if isinstance(item, dict) and isinstance(item.get("path"), str)]
    return tuple(uploads.attachments_resolve(conversation_id=key, paths=paths))


def _start_next_now(conversation_id, worker: str) -> list[followups.FollowUp]:
    """start_next outside a `complete` (messages left waiting with no run in progress: a
    `complete` stored where nobody collected what it started)."""
    with followups.collecting(worker) as started, transaction.atomic():
        key = _locked(conversation_id)
        if Run.objects.filter(conversation_id=key, status=Run.Status.RUNNING, parent__isnull=True).exists():
            return []
        started.extend(start_next([key], worker))
        return list(started)


async def queue(message: Message, *, steer: bool = False) -> Queued | Steered | None:
    """message_queue (message_steer) on the ORM thread, its frames published; a message queued
    where nothing was in progress (messages left waiting) sets the queue going."""
    queued, frames = await database_sync_to_async(message_steer if steer else message_queue)(message)
    if queued is None:
        return None
    await publish(message.conversation.pk, frames)
    if isinstance(queued, Steered):
        return queued
    registry = get_registry()
    await registry.ensure_started()
    started = await database_sync_to_async(_start_next_now)(message.conversation.pk, registry.channel)
    registry.follow(started)
    return queued


async def unqueue(*, conversation_id, queue_id: str) -> None:
    frames = await database_sync_to_async(message_unqueue)(conversation_id=conversation_id, queue_id=queue_id)
    await publish(conversation_id, frames)


async def clear(*, conversation_id) -> int:
    frames = await database_sync_to_async(queue_clear)(conversation_id=conversation_id)
    if frames:
        await publish(conversation_id, frames)
    return len(frames)


followups.register(start_next)
