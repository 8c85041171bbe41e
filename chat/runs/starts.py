"""Run starts stored: a user's message becomes a Run and its `user_message` event in one
transaction, once the start is admitted (chat.runs.admission) and its turn found
(chat.eventlog.turns). Starts that arrive together are stored together (runs_start)."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Case, Value, When
from django.utils import timezone

from chat.eventlog.append import batches_append, conversation_key
from chat.eventlog.compacting import compaction_refusal
from chat.eventlog.frames import EventFrame
from chat.eventlog.inserts import insert_objects
from chat.eventlog.turns import first_message_title, first_turn_text, start_turns, with_agent
from chat.eventlog.types import EventBatch, Message, RunStart
from chat.exceptions import ConversationGone, QuotaExceeded, RunInProgress
from chat.models import RUNNING_RUN_CONSTRAINT, Conversation, Run
from chat.ops.metrics import budget_counted
from chat.runs.admission import admission_read


def run_start(
    *,
    conversation: Conversation,
    user,
    content: str,
    model: str,
    worker: str,
    parent_seq: int | None = None,
    edits: int | None = None,
    regenerates: int | None = None,
) -> tuple[Run, list[EventFrame]]:
    """runs_start for one message: (run, frames), or its refusal raised."""
    message = Message(conversation, user, content, parent_seq, edits, regenerates)
    (result,) = runs_start(starts=[RunStart(message, model, worker)])
    if isinstance(result, Exception):
        raise result
    return result


def runs_start(*, starts: list[RunStart]) -> list[tuple[Run, list[EventFrame]] | Exception]:
    """Start a run for each message: its running Run and user_message frames, or the exception
    that kept it from starting: NotAUserMessage when it names a seq that is not a user_message
    of its conversation, else the admission's refusal (AgentUnavailable, RateLimited,
    QuotaExceeded, RunInProgress, QuotaBusy: chat.runs.admission). A partial unique index keeps
    one running run per conversation across processes too.

    When hundreds of messages arrive together, run starts queue on the ORM thread, which
    must win the GIL back from the busy event loop after every statement: a handful of
    statements for the whole group. Conflicts are found by query first; should the database
    still refuse the group (another process won a race, a conversation was deleted
    meanwhile), each start is tried again alone, so that each message gets its own answer.
    """
    try:
        with transaction.atomic():
            return _runs_start_group(starts)
    except IntegrityError as exc:
        if len(starts) > 1:
            return [runs_start(starts=[start])[0] for start in starts]
        # PostgreSQL names the partial index; SQLite names the column of a UNIQUE failure only.
        if RUNNING_RUN_CONSTRAINT in str(exc) or "UNIQUE constraint failed: chat_run.conversation_id" in str(exc):
            return [RunInProgress(str(starts[0].message.conversation.pk))]
        return [exc]
    except Exception as exc:
        if len(starts) > 1:
            return [runs_start(starts=[start])[0] for start in starts]
        return [exc]


def _runs_start_group(starts: list[RunStart]) -> list[tuple[Run, list[EventFrame]] | Exception]:
    refused: dict[int, Exception] = {}  # index in starts ->
    now = timezone.now()
    keys = {conversation_key(s.message.conversation.pk) for s in starts}
    turns = start_turns(starts)
    admission = admission_read(starts=starts, keys=keys, now=now)
    # (index in starts, run, its user_message; None for a compaction run's, which has none)
    accepted: list[tuple[int, Run, dict[str, Any] | None]] = []
    for index, (start, turn) in enumerate(zip(starts, turns, strict=True)):
        key = conversation_key(start.message.conversation.pk)
        run_id = start.run_id or uuid.uuid4()
        head: dict[str, Any] | None = None
        if start.message.compact:  # RUN_IN_PROGRESS and the admission first, then its branch
            refusal = admission.refusal(start, key) or compaction_refusal(
                conversation_id=key, run_id=run_id, seq=start.message.parent_seq
            )
        elif isinstance(turn, Exception):
            refused[index] = turn
            continue
        else:
            head, refusal = turn, admission.refusal(start, key)
        if refusal is not None:
            refused[index] = refusal
            if isinstance(refusal, QuotaExceeded) and refusal.budget is not None:
                budget_counted(kind="refusals", scope=refusal.budget["scope"])
            continue
        reserved = admission.reserve(start, key)
        profile = admission.profile(start, key)
        run = Run(
            id=run_id,
            conversation_id=key,
            user=start.message.user,
            agent=profile,
            model=profile.model if profile is not None else start.model,
            worker=start.worker,
            started_at=start.began_at or now,
            heartbeat_at=now,
            schedule_id=start.message.schedule_id,
            trigger_id=start.message.trigger_id,
            reserved_tokens=reserved,
            api_token_id=start.message.api_token_id,
        )
        accepted.append((index, run, head))
    if not accepted:
        return [refused[index] for index in range(len(starts))]
    insert_objects([run for _, run, _ in accepted])
    # The new turn is the one to show (docs/protocol.md, "Versions: edits, regenerated answers and branches": the newest branch by default).
    Conversation.objects.filter(
        pk__in={run.conversation_id for _, run, turn in accepted if turn is not None}, viewed_seq__isnull=False
    ).update(viewed_seq=None)
    titles = {
        run.conversation_id: first_message_title(first_turn_text(turn))
        for index, run, turn in accepted
        if turn is not None and not starts[index].message.conversation.title
    }
    if titles:
        Conversation.objects.filter(pk__in=titles, title="").update(
            title=Case(*(When(pk=key, then=Value(title)) for key, title in titles.items()))
        )
    turns_of = [(index, run, turn) for index, run, turn in accepted if turn is not None]
    batches = [EventBatch(run.conversation_id, run.pk, [with_agent(turn, run)]) for _, run, turn in turns_of]
    stored = batches_append(batches) if batches else []
    started: dict[int, tuple[Run, list[EventFrame]]] = {
        index: (run, []) for index, run, turn in accepted if turn is None
    }
    for (index, run, _), frames in zip(turns_of, stored, strict=True):
        if frames is None:
            raise ConversationGone("a conversation was deleted")  # -> one by one
        started[index] = (run, frames)
    return [started[index] if index in started else refused[index] for index in range(len(starts))]
