"""Writes. Keyword-only, typed; each is one transaction.

Events get their `seq` from Conversation.last_seq, bumped by an UPDATE in the
same transaction that inserts them: the row lock serialises writers of one
conversation across processes, so seqs are gap-free and committed in order.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, OperationalError, connection, transaction
from django.db.models import Case, Count, F, Max, OuterRef, Q, Subquery, Sum, Value, When
from django.utils import timezone
from django.utils.translation import gettext

from chat.agent.answer import Answer
from chat.agent.approval import EXPIRED, OK, call_outcome, open_requests
from chat.agent.events import (
    ApprovalResultEvent,
    CompleteEvent,
    ErrorCode,
    ErrorEvent,
    RunStatus,
    ToolEndEvent,
    UserMessageEvent,
)
from chat.agent.tools import error_result

from . import memory, search, selectors
from .frames import EventFrame, event_frame, frame_time
from .models import (
    DEFAULT_AGENT_NAME,
    DEFAULT_AGENT_SLUG,
    RUNNING_RUN_CONSTRAINT,
    AgentProfile,
    Conversation,
    Event,
    Feedback,
    ModelCall,
    Run,
    ToolRecord,
)
from .text import clean, clean_value
from .transfer import Imported

TITLE_MAX = 200
FEEDBACK_COMMENT_MAX = 2000

logger = logging.getLogger(__name__)


class RunInProgress(Exception):
    pass


class RateLimited(Exception):
    pass


class QuotaExceeded(Exception):
    """The user's tokens today (UTC) reached AGENT_DAILY_TOKEN_QUOTA."""


class ConversationGone(Exception):
    """The conversation was deleted while something was writing to it."""


class AgentUnavailable(Exception):
    """The conversation's agent profile is disabled, or its user may no longer use it."""


class UnknownApproval(Exception):
    """An answer to an approval request the conversation never had."""


class ApprovalClosed(Exception):
    """An answer to an approval request that was answered, expired, or whose run ended."""


class NotAUserMessage(ValueError):
    """A message, edit or regenerate named a seq that is not a user_message of its conversation."""


@dataclass(frozen=True)
class ToolRecordData:
    tool_call_id: str
    tool_name: str
    arguments: str
    result: str
    is_error: bool
    started_at: datetime
    duration_ms: int
    outcome: str = OK  # chat.agent.approval.call_outcome
    offered: bool = True  # False: the model called a tool its run did not offer


@dataclass(frozen=True)
class ModelCallData:
    """A ModelCall row to be (chat.agent.trace.ModelCallRecord, its time made a datetime)."""

    iteration: int
    attempt: int
    started_at: datetime
    first_token_ms: int | None
    duration_ms: int
    message_count: int
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    finish_reason: str
    error: str
    request_messages: list[dict[str, Any]] | None = None
    usage_estimated: bool = False


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended. Its tokens are not here: they are summed from its ModelCall rows, which
    count every attempt, those of a process that died before a resume included."""

    status: str
    iterations: int = 0
    error: str = ""


def conversation_create(*, owner, title: str = "", agent: AgentProfile | None = None) -> Conversation:
    """`agent`: a profile the owner may use (the caller checked it); None: the default agent."""
    return Conversation.objects.create(owner=owner, title=clean(title.strip()[:TITLE_MAX]), agent=agent)


def conversation_set_agent(*, conversation: Conversation, agent: AgentProfile | None) -> Conversation:
    """The agent of the conversation's next runs; the runs so far keep the one they used."""
    conversation.agent = agent
    conversation.updated_at = timezone.now()
    conversation.save(update_fields=["agent", "updated_at"])
    return conversation


def conversation_rename(*, conversation: Conversation, title: str) -> Conversation:
    conversation.title = clean(title.strip()[:TITLE_MAX])
    conversation.updated_at = timezone.now()
    conversation.save(update_fields=["title", "updated_at"])
    return conversation


def conversation_view_version(*, conversation: Conversation, seq: int | None) -> Conversation:
    """Keep the version the owner chose to view (the seq of a user_message; None: the newest
    branch) for their next load, on any device; NotAUserMessage for any other seq. Choosing
    a version is not activity: `updated_at` stays, so the conversation keeps its place."""
    if seq is not None and not selectors.is_user_message(conversation_id=conversation.pk, seq=seq):
        raise NotAUserMessage(f"seq {seq} is not a user_message of this conversation")
    conversation.viewed_seq = seq
    conversation.save(update_fields=["viewed_seq"])
    return conversation


def conversation_delete(*, conversation: Conversation) -> None:
    conversation.delete()


@dataclass(frozen=True)
class EventBatch:
    """A run's events to store together, with the tool records that ended in them, the model
    calls made meanwhile and, for the batch holding `complete`, the run's outcome."""

    conversation_id: Any
    run_id: Any
    payloads: list[dict[str, Any]]
    tool_records: list[ToolRecordData] = ()
    outcome: RunOutcome | None = None
    model_calls: list[ModelCallData] = ()


def events_append(
    *,
    conversation_id,
    run_id,
    payloads: list[dict[str, Any]],
    tool_records: list[ToolRecordData] = (),
    outcome: RunOutcome | None = None,
) -> list[EventFrame]:
    """Store one batch of a run's events in one transaction; returns the frames."""
    batch = EventBatch(conversation_id, run_id, payloads, list(tool_records), outcome)
    frames = events_append_many(batches=[batch])[0]
    if frames is None:
        raise ConversationGone(str(conversation_id))
    return frames


def events_append_many(*, batches: list[EventBatch]) -> list[list[EventFrame] | None]:
    """Store the batches of many runs in one transaction (group commit: one commit for every
    run of the process that has something to write, instead of one each). Returns each
    batch's frames, or None for a batch whose conversation was deleted (nothing stored).

    A handful of statements whatever the number of batches: the writer runs in a thread
    that must win the GIL back from a busy event loop after every statement.

    Raises CommitUnknown when the connection failed at COMMIT: the rows may or may not be
    stored, and only events_stored (on a new connection) can tell."""
    results = None
    try:
        with transaction.atomic():
            results = _append_batches(batches)
    except Exception as exc:
        if results is None:  # before COMMIT: rolled back, nothing of the round is stored
            raise
        raise CommitUnknown(results) from exc
    return results


class CommitUnknown(OperationalError):
    """The COMMIT of a round of events failed: `results` are its frames if it was stored."""

    def __init__(self, results: list[list[EventFrame] | None]) -> None:
        super().__init__("the connection failed at COMMIT; the round may be stored")
        self.results = results


def events_stored(*, results: list[list[EventFrame] | None]) -> bool:
    """Whether a round whose COMMIT failed is in the database: one of its events is (a round is
    one transaction, all or nothing), under the seq and run it was given."""
    frame = next((frames[0] for frames in results if frames), None)
    return frame is not None and Event.objects.filter(seq=frame["seq"], run_id=frame["runId"]).exists()


def _append_batches(batches: list[EventBatch]) -> list[list[EventFrame] | None]:
    """events_append_many inside the caller's transaction: the one place where payloads
    become Event rows (every other write of events goes through it)."""
    results: list[list[EventFrame] | None] = [None] * len(batches)
    events: list[Event] = []
    now = timezone.now()
    ts = frame_time(now)  # every event of the round shares `now`: formatted once
    counts: dict[Any, int] = {}
    for batch in batches:
        key = _conversation_key(batch.conversation_id)
        counts[key] = counts.get(key, 0) + len(batch.payloads)
    next_seq = {key: last - counts[key] + 1 for key, last in _allocate_seqs(counts, now).items()}
    live = [batch for batch in batches if _conversation_key(batch.conversation_id) in next_seq]
    calls = [ModelCall(run_id=b.run_id, **clean_value(vars(call))) for b in live for call in b.model_calls]
    if calls:
        ModelCall.objects.bulk_create(calls)
    completions = _completions([b.run_id for b in live if b.payloads and b.payloads[-1]["type"] == "complete"], now)
    for index, batch in enumerate(batches):
        key = _conversation_key(batch.conversation_id)
        if key not in next_seq:
            continue  # the conversation is gone
        first = next_seq[key]
        next_seq[key] += len(batch.payloads)
        # The one place every event and tool record becomes a row (and so a frame): text the
        # database, orjson or msgpack would refuse (NUL, lone surrogates) is cleaned here.
        payloads = [clean_value(p) for p in batch.payloads]
        completion = completions.get(str(batch.run_id)) if payloads and payloads[-1]["type"] == "complete" else None
        if completion is not None:
            payloads[-1] = {**payloads[-1], **completion.fields()}
        events += (
            Event(
                conversation_id=batch.conversation_id,
                run_id=batch.run_id,
                seq=first + i,
                type=p["type"],
                payload=p,
                created_at=now,
            )
            for i, p in enumerate(payloads)
        )
        run_id = str(batch.run_id)
        results[index] = [event_frame(p, seq=first + i, run_id=run_id, ts=ts) for i, p in enumerate(payloads)]
        if batch.tool_records:
            ToolRecord.objects.bulk_create(
                ToolRecord(run_id=batch.run_id, **clean_value(vars(record))) for record in batch.tool_records
            )
        run_fields: dict[str, Any] = {}
        if completion is not None:  # the run's totals: every attempt, over resumes too
            run_fields.update(finished_at=now, **completion.usage)
        if batch.outcome is not None:
            outcome = batch.outcome
            run_fields.update(status=outcome.status, iterations=outcome.iterations, error=clean(outcome.error))
            run_fields.setdefault("finished_at", now)
        if run_fields:
            Run.objects.filter(pk=batch.run_id).update(**run_fields)
    Event.objects.bulk_create(events)
    # A run is indexed for search once, with the batch that completes it (`complete` is a
    # run's last event): no work per delta.
    finished = [
        batch.run_id
        for batch, frames in zip(batches, results)
        if frames is not None and batch.payloads and batch.payloads[-1]["type"] == "complete"
    ]
    for start in range(0, len(finished), memory.CHUNK):
        runs = memory.events_of(finished[start : start + memory.CHUNK])  # read once for both
        search.documents_store(runs=runs)
        memory.checkpoints_write(runs=runs)
    return results


@dataclass(frozen=True)
class _Completion:
    duration_ms: int
    usage: dict[str, int]  # prompt_tokens, completion_tokens, total_tokens

    def fields(self) -> dict[str, Any]:
        """What `complete` carries (PROTOCOL.md section 4)."""
        u = self.usage
        return {
            "durationMs": self.duration_ms,
            "usage": {
                "promptTokens": u["prompt_tokens"],
                "completionTokens": u["completion_tokens"],
                "totalTokens": u["total_tokens"],
            },
        }


def _completions(run_ids: list, now: datetime) -> dict[str, _Completion]:
    """For the runs completing in this round, keyed by str(run id): their duration from start to
    `now` and their tokens summed over their model calls. Two queries for the whole round."""
    if not run_ids:
        return {}
    started = dict(Run.objects.filter(pk__in=run_ids).values_list("pk", "started_at"))
    sums = {
        run: {"prompt_tokens": p or 0, "completion_tokens": c or 0, "total_tokens": t or 0}
        for run, p, c, t in ModelCall.objects.filter(run_id__in=run_ids)
        .values("run")
        .annotate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"), t=Sum("total_tokens"))
        .values_list("run", "p", "c", "t")
    }
    zero = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    return {
        str(pk): _Completion(max(0, int((now - start).total_seconds() * 1000)), sums.get(pk, zero))
        for pk, start in started.items()
    }


def _conversation_key(conversation_id):
    return Conversation._meta.pk.to_python(conversation_id)


def _allocate_seqs(counts: dict[Any, int], now: datetime) -> dict[Any, int]:
    """Bump each conversation's last_seq by its count; returns the new last_seq of each one that
    exists. One UPDATE ... RETURNING for all of them where the database has it."""
    if connection.vendor == "sqlite" and sqlite3.sqlite_version_info < (3, 35):
        out = {}
        for key, count in counts.items():
            rows = Conversation.objects.filter(pk=key)
            if rows.update(last_seq=F("last_seq") + count, updated_at=now):
                out[key] = rows.values_list("last_seq", flat=True).get()
        return out
    meta, quote = Conversation._meta, connection.ops.quote_name
    pk, last, updated = quote(meta.pk.column), quote("last_seq"), quote("updated_at")
    ids = {key: meta.pk.get_db_prep_value(key, connection) for key in counts}
    sql = (
        f"UPDATE {quote(meta.db_table)} SET {last} = {last} + CASE {pk} "
        + " ".join(["WHEN %s THEN %s"] * len(counts))
        + f" END, {updated} = %s WHERE {pk} IN ({', '.join(['%s'] * len(counts))}) RETURNING {pk}, {last}"
    )
    params = [x for key, count in counts.items() for x in (ids[key], count)]
    params += [meta.get_field("updated_at").get_db_prep_value(now, connection), *ids.values()]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {meta.pk.to_python(key): value for key, value in cursor.fetchall()}


def _title_of(content: str) -> str:
    """A new conversation's title: its first message, whitespace collapsed, cut at 60 characters."""
    return clean(" ".join(content.split())[:60])


@dataclass(frozen=True)
class RunStart:
    """One user message to start a run for (see runs_start)."""

    conversation: Conversation
    user: Any
    content: str  # "" for a regenerate: the content of the message it repeats
    model: str
    worker: str
    # At most one of these (PROTOCOL section 6), each the seq of a user_message of the
    # conversation: the turn a message follows (None: the newest), the message an edit
    # replaces, the message a regenerate answers again.
    parent_seq: int | None = None
    edits: int | None = None
    regenerates: int | None = None
    # The user_message's `attachments` (chat.uploads.attachments_resolve): [{"path", "size"}].
    # An edit or regenerate keeps those of the message it replaces instead.
    attachments: tuple[dict[str, Any], ...] = ()

    @property
    def named_seq(self) -> int | None:
        return next((s for s in (self.parent_seq, self.edits, self.regenerates) if s is not None), None)


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
    """runs_start for one message: (run, frames), or its RunInProgress / RateLimited /
    NotAUserMessage raised."""
    start = RunStart(conversation, user, content, model, worker, parent_seq, edits, regenerates)
    (result,) = runs_start(starts=[start])
    if isinstance(result, Exception):
        raise result
    return result


def runs_start(*, starts: list[RunStart]) -> list[tuple[Run, list[EventFrame]] | Exception]:
    """Start a run for each message: its running Run and user_message frames, or the exception
    that kept it from starting: NotAUserMessage when it names a seq that is not a user_message
    of its conversation, RunInProgress when the conversation already has a running run
    (a partial unique index makes that hold across processes too), RateLimited when the user
    started AGENT_MESSAGES_PER_MINUTE runs in the last minute, QuotaExceeded when the user's
    tokens today (UTC) reached AGENT_DAILY_TOKEN_QUOTA.

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
            return [RunInProgress(str(starts[0].conversation.pk))]
        return [exc]
    except Exception as exc:
        if len(starts) > 1:
            return [runs_start(starts=[start])[0] for start in starts]
        return [exc]


def _runs_start_group(starts: list[RunStart]) -> list[tuple[Run, list[EventFrame]] | Exception]:
    results: list[tuple[Run, list[EventFrame]] | Exception | None] = [None] * len(starts)
    now = timezone.now()
    limit = settings.AGENT_MESSAGES_PER_MINUTE
    recent: dict[Any, int] = {}
    if limit:
        recent = dict(
            Run.objects.filter(
                user__in={s.user.pk for s in starts}, started_at__gte=now - timedelta(minutes=1), imported=False
            )
            .values("user")
            .annotate(n=Count("pk"))
            .values_list("user", "n")
        )
    quota = settings.AGENT_DAILY_TOKEN_QUOTA
    spent = tokens_today(user_ids={s.user.pk for s in starts}, now=now) if quota else {}
    keys = {_conversation_key(s.conversation.pk) for s in starts}
    turns = _turns_of(starts)
    busy = set(
        Run.objects.filter(conversation__in=keys, status=Run.Status.RUNNING).values_list("conversation", flat=True)
    )
    agent_ids, usable = _agents_of(starts, keys)
    accepted: list[tuple[int, Run]] = []
    for index, start in enumerate(starts):
        key = _conversation_key(start.conversation.pk)
        agent_id = agent_ids.get(key)
        profile = usable.get((start.user.pk, agent_id))
        if isinstance(turns[index], Exception):
            results[index] = turns[index]
        elif agent_id is not None and profile is None:
            results[index] = AgentUnavailable(f"agent profile {agent_id} is disabled or not open to this user")
        elif limit and recent.get(start.user.pk, 0) >= limit:
            results[index] = RateLimited(f"at most {limit} messages per minute")
        elif quota and spent.get(start.user.pk, 0) >= quota:
            results[index] = QuotaExceeded(f"{spent[start.user.pk]} of {quota} tokens used today (UTC)")
        elif key in busy:
            results[index] = RunInProgress(str(key))
        else:
            busy.add(key)
            recent[start.user.pk] = recent.get(start.user.pk, 0) + 1
            accepted.append(
                (
                    index,
                    Run(
                        conversation_id=key,
                        user=start.user,
                        agent=profile,
                        model=profile.model if profile is not None else start.model,
                        worker=start.worker,
                        started_at=now,
                        heartbeat_at=now,
                    ),
                )
            )
    if accepted:
        Run.objects.bulk_create([run for _, run in accepted])
        # The new turn is the one to show (PROTOCOL section 6: the newest branch by default).
        Conversation.objects.filter(
            pk__in={run.conversation_id for _, run in accepted}, viewed_seq__isnull=False
        ).update(viewed_seq=None)
        titles = {
            run.conversation_id: _title_of(turns[index]["content"])
            for index, run in accepted
            if not starts[index].conversation.title
        }
        if titles:
            Conversation.objects.filter(pk__in=titles, title="").update(
                title=Case(*(When(pk=key, then=Value(title)) for key, title in titles.items()))
            )
        frames = _append_batches(
            [EventBatch(run.conversation_id, run.pk, [_with_agent(turns[index], run)]) for index, run in accepted]
        )
        if any(f is None for f in frames):
            raise ConversationGone("a conversation was deleted")  # -> one by one
        for (index, run), run_frames in zip(accepted, frames):
            results[index] = (run, run_frames)
    return results


def _agents_of(starts: list[RunStart], keys: set) -> tuple[dict[Any, int | None], dict[tuple[Any, int], AgentProfile]]:
    """The agent profile id of each conversation, read now (a PATCH may have changed it since the
    socket connected), and {(user id, profile id): profile} for those each user may use now."""
    agent_ids = dict(Conversation.objects.filter(pk__in=keys).values_list("pk", "agent_id"))
    wanted = {agent_id for agent_id in agent_ids.values() if agent_id is not None}
    usable: dict[tuple[Any, int], AgentProfile] = {}
    if wanted:
        for user in {start.user.pk: start.user for start in starts}.values():
            for profile in selectors.agent_profiles_for_user(user=user).filter(pk__in=wanted):
                usable[(user.pk, profile.pk)] = profile
    return agent_ids, usable


def _with_agent(turn: dict[str, Any], run: Run) -> dict[str, Any]:
    """The user_message that starts a run names the agent and model that answer it (PROTOCOL
    section 6), so the page labels each answer, and renaming or deleting a profile later
    changes nothing of what the log says."""
    profile = run.agent
    if profile is None:
        return {**turn, "agent": DEFAULT_AGENT_SLUG, "agentName": DEFAULT_AGENT_NAME, "model": run.model}
    return {**turn, "agent": profile.slug, "agentName": profile.name, "model": run.model}


def tokens_today(*, user_ids, now: datetime) -> dict[Any, int]:
    """{user id: tokens of the user's model calls since midnight UTC} (users with none left out).
    Read here, where runs start, rather than in selectors: the quota is part of the start."""
    midnight = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return dict(
        ModelCall.objects.filter(run__user__in=user_ids, started_at__gte=midnight)
        .values("run__user")
        .annotate(n=Sum("total_tokens"))
        .values_list("run__user", "n")
    )


def _turns_of(starts: list[RunStart]) -> list[dict[str, Any] | Exception]:
    """Each start's user_message payload, with its place among the versions (PROTOCOL section 6):
    `parentSeq` always, `edits` / `regenerates` when it is one; or NotAUserMessage. Two queries
    for the group whatever its size (the user_messages it names, the newest of each conversation
    whose message follows the newest), and one more per edit of a message stored before
    versions existed."""
    named = [(_conversation_key(s.conversation.pk), s.named_seq) for s in starts if s.named_seq is not None]
    found: dict[tuple[Any, int], dict[str, Any]] = {}
    if named:
        where = Q()
        for key, seq in named:
            where |= Q(conversation_id=key, seq=seq)
        found = {
            (conversation_id, seq): payload
            for conversation_id, seq, payload in Event.objects.filter(where, type="user_message").values_list(
                "conversation_id", "seq", "payload"
            )
        }
    following = {_conversation_key(s.conversation.pk) for s in starts if s.named_seq is None}
    newest: dict[Any, int | None] = {}
    if following:
        # The newest through the user_message index backwards, one row per conversation: a MAX
        # per group would read every turn of the conversation (7.6 ms at 10,000 turns, idle).
        latest = Event.objects.filter(conversation=OuterRef("pk"), type="user_message").order_by("-seq")
        newest = dict(
            Conversation.objects.filter(pk__in=following)
            .annotate(newest=Subquery(latest.values("seq")[:1]))
            .values_list("pk", "newest")
        )
    out: list[dict[str, Any] | Exception] = []
    for start in starts:
        key, seq = _conversation_key(start.conversation.pk), start.named_seq
        if seq is None:
            out.append(_user_message(start.content, parent_seq=newest.get(key), attachments=start.attachments))
            continue
        named_payload = found.get((key, seq))
        if named_payload is None:
            out.append(NotAUserMessage(f"seq {seq} is not a user_message of this conversation"))
        elif start.parent_seq is not None:
            out.append(_user_message(start.content, parent_seq=seq, attachments=start.attachments))
        else:
            # An edit or regenerate takes the place of the named message: it follows the same
            # turn, with the same files attached.
            version = {"edits": seq} if start.edits is not None else {"regenerates": seq}
            content = start.content if start.edits is not None else named_payload.get("content", "")
            out.append(
                _user_message(
                    content,
                    parent_seq=_parent_of(key, seq, named_payload),
                    attachments=named_payload.get("attachments") or (),
                    **version,
                )
            )
    return out


def _user_message(
    content: str, *, parent_seq: int | None, attachments: Sequence[dict[str, Any]] = (), **version: int
) -> dict[str, Any]:
    message = {**UserMessageEvent(content).to_dict(), "parentSeq": parent_seq, **version}
    if attachments:
        message["attachments"] = list(attachments)
    return message


def _parent_of(conversation_key, seq: int, payload: dict[str, Any]) -> int | None:
    """The parentSeq of a stored user_message; one stored before versions existed follows the
    user_message before it (an old conversation is one linear branch)."""
    if "parentSeq" in payload:
        parent = payload["parentSeq"]
        return parent if isinstance(parent, int) and not isinstance(parent, bool) else None
    return Event.objects.filter(conversation_id=conversation_key, type="user_message", seq__lt=seq).aggregate(
        previous=Max("seq")
    )["previous"]


def runs_heartbeat(*, run_ids: list, worker: str) -> tuple[set, set]:
    """Mark the worker's runs alive. Returns (to_cancel, lost): the runs with a cancel requested,
    and those the worker no longer holds (finished by someone else, or resumed by another
    process after this one was taken for dead), which it must drop without a word."""
    held = Run.objects.filter(pk__in=run_ids, status=Run.Status.RUNNING, worker=worker)
    held.update(heartbeat_at=timezone.now())
    # Keyed by str: callers pass ids as str (the registry's keys) or UUID, the ORM returns UUIDs.
    flags = {str(pk): flag for pk, flag in held.values_list("pk", "cancel_requested")}
    to_cancel = {run_id for run_id in run_ids if flags.get(str(run_id))}
    lost = {run_id for run_id in run_ids if str(run_id) not in flags}
    return to_cancel, lost


def run_request_cancel(*, run_id) -> None:
    Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(cancel_requested=True)


# A released run's heartbeat: stale for every reaper, whatever its timeout.
RELEASED_HEARTBEAT = datetime(2000, 1, 1, tzinfo=UTC)


def runs_release(*, run_ids: list, worker: str) -> int:
    """A stopping process hands its runs over: still running, but with a stale heartbeat and no
    worker, so that the next reaper pass of any process continues them."""
    return Run.objects.filter(pk__in=run_ids, status=Run.Status.RUNNING, worker=worker).update(
        heartbeat_at=RELEASED_HEARTBEAT, worker=""
    )


@dataclass(frozen=True)
class Interruption:
    run: Run
    frames: list[EventFrame]
    resumed: bool  # the run goes on under `worker`; else it is complete `interrupted`


def run_interrupt(
    *, run_id, message: str, stale_before: datetime | None = None, worker: str = "", max_resumes: int = 0
) -> Interruption | None:
    """Close the interrupted attempt of a run whose process is gone: a tool_end error for each
    open tool call, an expired approval_result and a tool_end error for each approval request
    still waiting, then error INTERRUPTED. While it has resumes left (fewer than max_resumes)
    the run is handed to `worker` to continue (the error says `resumed: true`); past that it
    completes `interrupted`. None when the run is not (or no longer) a stale running run, so
    that only one process takes it and a live one never is."""
    with transaction.atomic():
        runs = Run.objects.filter(pk=run_id, status=Run.Status.RUNNING)
        if stale_before is not None:
            runs = runs.filter(heartbeat_at__lt=stale_before)
        run = runs.select_for_update().first()
        if run is None:
            return None
        # Whole payloads: SQLite would decode an `arguments` string that holds JSON.
        logged = [
            {**payload, "seq": seq}
            for seq, payload in Event.objects.filter(run_id=run_id).order_by("seq").values_list("seq", "payload")
        ]
        ended = {e["toolCallId"] for e in logged if e["type"] == "tool_end"}
        open_calls = [
            (e["toolCallId"], e["toolName"], e["arguments"])
            for e in logged
            if e["type"] == "tool_start" and e["toolCallId"] not in ended
        ]
        result, now = error_result("interrupted"), timezone.now()
        payloads = [ToolEndEvent(name, call_id, result, True, 0).to_dict() for call_id, name, _ in open_calls]
        records = [
            ToolRecordData(call_id, name, arguments, result, True, now, 0, call_outcome(is_error=True))
            for call_id, name, arguments in open_calls
        ]
        # A request nobody answered before the process went: it expires (the user's answer could
        # not reach a run that is no more); a resumed model reads why and may ask again.
        for request in open_requests(logged):
            call_id, name = request["toolCallId"], request["toolName"]
            unasked = error_result(
                "interrupted: the server stopped before the user answered; call the tool again to ask again"
            )
            payloads += [
                ApprovalResultEvent(call_id, EXPIRED, "the server stopped before an answer came").to_dict(),
                ToolEndEvent(name, call_id, unasked, True, 0).to_dict(),
            ]
            outcome = call_outcome(is_error=True, decision=EXPIRED)
            records.append(ToolRecordData(call_id, name, request["arguments"], unasked, True, now, 0, outcome))
        # The dead worker's channel name is for operators (the log), not for the user's timeline.
        logger.info("run %s interrupted: its worker %s is gone", run_id, run.worker or "(released)")
        error = ErrorEvent(ErrorCode.INTERRUPTED, message).to_dict()
        resumed = run.resumes < max_resumes
        if resumed:
            error["resumed"] = True
            answer = Answer()
            for event in logged:
                answer.add(event)
            if discarded := answer.attempt:
                error["discards"] = discarded[0]["seq"]
            payloads.append(error)
            run.resumes += 1
            run.worker, run.heartbeat_at = worker, timezone.now()
            run.save(update_fields=["resumes", "worker", "heartbeat_at"])
        else:
            payloads += [error, CompleteEvent(RunStatus.INTERRUPTED).to_dict()]
            run.status, run.finished_at, run.error = Run.Status.INTERRUPTED, timezone.now(), f"INTERRUPTED: {message}"
            run.save(update_fields=["status", "finished_at", "error"])
        (frames,) = _append_batches([EventBatch(run.conversation_id, run_id, payloads, records)])
        if frames is None:
            raise ConversationGone(str(run.conversation_id))
    return Interruption(run, frames, resumed)


def imported_title(title: str) -> str:
    """An imported conversation's title: the exported one marked as imported (in the importing
    user's language), so that it is told apart from the conversation it was exported from."""
    title = " ".join(title.split())
    if not title:
        return gettext("Imported conversation")
    marked = gettext("%(title)s (imported)")
    return marked % {"title": title[: TITLE_MAX - len(marked % {"title": ""})]}


def conversation_import(*, owner, imported: Imported) -> Conversation:
    """A new conversation of `owner` holding an import's events (parsed and checked by
    chat.transfer): new conversation and run ids, every seq and field kept, each event's
    time its `ts` when it has one, the title marked as imported. One transaction: nothing is
    left of a failed import."""
    now = timezone.now()
    moments = [ts for run in imported.runs for _, _, ts in run.events if ts is not None]
    with transaction.atomic():
        conversation = Conversation.objects.create(
            owner=owner,
            title=imported_title(imported.title),
            created_at=min(moments, default=now),
            updated_at=now,
            last_seq=sum(len(run.events) for run in imported.runs),
        )
        runs, events, records = [], [], []
        for imported_run in imported.runs:
            first, last = imported_run.events[0], imported_run.events[-1]
            usage = last[1].get("usage") if isinstance(last[1].get("usage"), dict) else {}
            run = Run(
                conversation=conversation,
                user=owner,
                status=imported_run.status,
                imported=True,
                started_at=first[2] or now,
                finished_at=last[2] or now,
                heartbeat_at=now,
                **{
                    column: value
                    for column, key in _USAGE_COLUMNS.items()
                    if isinstance(value := usage.get(key), int) and not isinstance(value, bool) and 0 <= value < 2**31
                },
            )
            runs.append(run)
            starts: dict[str, dict[str, Any]] = {}
            decisions: dict[str, str] = {}
            for seq, payload, ts in imported_run.events:
                events.append(
                    Event(
                        conversation=conversation,
                        run=run,
                        seq=seq,
                        type=payload["type"],
                        payload=payload,
                        created_at=ts or now,
                    )
                )
                if payload["type"] == "tool_start":
                    starts[payload["toolCallId"]] = payload
                elif payload["type"] == "approval_result" and isinstance(payload["decision"], str):
                    decisions[payload["toolCallId"]] = payload["decision"]
                elif payload["type"] == "tool_end":
                    start = starts.get(payload["toolCallId"], {})
                    records.append(
                        ToolRecord(
                            run=run,
                            tool_call_id=payload["toolCallId"],
                            tool_name=payload["toolName"],
                            arguments=start.get("arguments", ""),
                            result=payload["result"],
                            is_error=payload["isError"],
                            outcome=call_outcome(
                                is_error=payload["isError"], decision=decisions.pop(payload["toolCallId"], None)
                            ),
                            started_at=ts or now,
                            duration_ms=payload["durationMs"],
                        )
                    )
        Run.objects.bulk_create(runs)
        Event.objects.bulk_create(events)
        ToolRecord.objects.bulk_create(records)
        search.documents_write(run_ids=[run.pk for run in runs])
        memory.checkpoints_fill(conversation_id=conversation.pk)
    return conversation


_USAGE_COLUMNS = {
    "prompt_tokens": "promptTokens",
    "completion_tokens": "completionTokens",
    "total_tokens": "totalTokens",
}


def feedback_set(*, run: Run, user, rating: int, comment: str = "") -> Feedback:
    """The user's rating of a run's answer: one per run, the newest replacing the one before."""
    feedback, _ = Feedback.objects.update_or_create(
        run=run,
        defaults={"user": user, "rating": rating, "comment": clean(comment.strip()), "updated_at": timezone.now()},
    )
    return feedback
