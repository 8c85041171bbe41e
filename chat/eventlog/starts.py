"""Run starts: a user's message becomes a Run and its `user_message` event in one transaction,
after the rules a start obeys (one running run per conversation, the messages-per-minute
limit, the daily token quota, the agent the user may use, the version it answers). Starts
that arrive together are stored together (runs_start)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Case, Count, Max, OuterRef, Q, Subquery, Sum, Value, When
from django.utils import timezone

from chat.accounts.limits import limits_for_users
from chat.agent.events import (
    UserMessageEvent,
)
from chat.agent.text import clean
from chat.agents.selectors import agent_profiles_for_user
from chat.eventlog.append import _append_batches, _conversation_key
from chat.eventlog.frames import EventFrame
from chat.eventlog.inserts import insert_objects
from chat.eventlog.types import EventBatch, RunStart
from chat.exceptions import (
    AgentUnavailable,
    ConversationGone,
    NotAUserMessage,
    QuotaBusy,
    QuotaExceeded,
    RateLimited,
    RunInProgress,
)
from chat.models import (
    DEFAULT_AGENT_NAME,
    DEFAULT_AGENT_SLUG,
    RUNNING_RUN_CONSTRAINT,
    AgentProfile,
    Conversation,
    Event,
    ModelCall,
    Run,
)

# An untitled conversation's title until one is generated or given (docs/protocol.md, "Titles, pinning, archiving").
FIRST_MESSAGE_TITLE_CHARS = 60


def first_message_title(content: str) -> str:
    """An untitled conversation's title: its first message, whitespace collapsed, cut at 60 characters."""
    return clean(" ".join(content.split())[:FIRST_MESSAGE_TITLE_CHARS].rstrip())


def _first_turn_text(turn: dict[str, Any]) -> str:
    """What a first message says: its text, or the names of its files when they came alone."""
    return turn["content"] or ", ".join(file["path"] for file in turn.get("attachments") or ())


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
    started their messages-per-minute limit of runs in the last minute, QuotaExceeded when the
    user's tokens today (UTC) reached their daily quota (their groups' limits, else
    AGENT_MESSAGES_PER_MINUTE / AGENT_DAILY_TOKEN_QUOTA: chat.accounts.limits) or, under a quota,
    while another run of theirs is in progress (QuotaBusy; docs/configuration.md, "The quota and
    runs in progress": at most one run ever goes past an exhausted quota, since none starts
    beside it). A user with a quota is counted under a lock of their row, so that two processes
    cannot both start one.

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
    # Each user's limits, their groups' or the settings' (one query for the group): the users
    # with no limit are left out of the counting queries.
    limits = limits_for_users(user_ids={s.user.pk for s in starts})
    rated = {pk for pk, lim in limits.items() if lim.messages_per_minute}
    recent: dict[Any, int] = {}
    if rated:
        recent = dict(
            Run.objects.filter(user__in=rated, started_at__gte=now - timedelta(minutes=1), imported=False)
            .values("user")
            .annotate(n=Count("pk"))
            .values_list("user", "n")
        )
    quoted = {pk for pk, lim in limits.items() if lim.daily_token_quota}
    spent: dict[Any, int] = {}
    flying: dict[Any, int] = {}
    if quoted:
        # Another process's start of the same user waits here until this one commits, and then
        # counts its run: the quota's rule holds across processes, not in each one.
        list(get_user_model().objects.select_for_update().filter(pk__in=quoted).order_by("pk").values_list("pk"))
        spent = tokens_today(user_ids=quoted, now=now)
        flying = runs_in_flight(user_ids=quoted)
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
        elif (limit := limits[start.user.pk].messages_per_minute) and recent.get(start.user.pk, 0) >= limit:
            results[index] = RateLimited(f"at most {limit} messages per minute")
        elif (quota := limits[start.user.pk].daily_token_quota) and spent.get(start.user.pk, 0) >= quota:
            results[index] = QuotaExceeded(f"{spent[start.user.pk]} of {quota} tokens used today (UTC)")
        elif key in busy:
            results[index] = RunInProgress(str(key))
        elif quota and flying.get(start.user.pk, 0):
            # A run in flight may spend all that is left (nothing bounds a run's tokens at its
            # start): another one started now could end past the quota too.
            results[index] = QuotaBusy(
                f"{spent.get(start.user.pk, 0)} of {quota} tokens used today (UTC) and a run in progress:"
                " under a daily quota, runs start one at a time"
            )
        else:
            busy.add(key)
            recent[start.user.pk] = recent.get(start.user.pk, 0) + 1
            flying[start.user.pk] = flying.get(start.user.pk, 0) + 1
            accepted.append(
                (
                    index,
                    Run(
                        id=start.run_id or uuid.uuid4(),
                        conversation_id=key,
                        user=start.user,
                        agent=profile,
                        model=profile.model if profile is not None else start.model,
                        worker=start.worker,
                        started_at=start.began_at or now,
                        heartbeat_at=now,
                    ),
                )
            )
    if accepted:
        insert_objects([run for _, run in accepted])
        # The new turn is the one to show (docs/protocol.md, "Versions: edits, regenerated answers and branches": the newest branch by default).
        Conversation.objects.filter(
            pk__in={run.conversation_id for _, run in accepted}, viewed_seq__isnull=False
        ).update(viewed_seq=None)
        titles = {
            run.conversation_id: first_message_title(_first_turn_text(turns[index]))
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
            for profile in agent_profiles_for_user(user=user).filter(pk__in=wanted):
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


def runs_in_flight(*, user_ids) -> dict[Any, int]:
    """{user id: their runs running now, in any conversation} (users with none left out)."""
    return dict(
        Run.objects.filter(user__in=user_ids, status=Run.Status.RUNNING)
        .values("user")
        .annotate(n=Count("pk"))
        .values_list("user", "n")
    )


def _turns_of(starts: list[RunStart]) -> list[dict[str, Any] | Exception]:
    """Each start's user_message payload, with its place among the versions (docs/protocol.md, "Versions: edits, regenerated answers and branches"):
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
            out.append(
                user_message_payload(
                    start.content, parent_seq=newest.get(key), attachments=start.attachments, history=start.history
                )
            )
            continue
        named_payload = found.get((key, seq))
        if named_payload is None:
            out.append(NotAUserMessage(f"seq {seq} is not a user_message of this conversation"))
        elif start.parent_seq is not None:
            out.append(user_message_payload(start.content, parent_seq=seq, attachments=start.attachments))
        else:
            # An edit or regenerate takes the place of the named message: it follows the same
            # turn, with the same files attached.
            version = {"edits": seq} if start.edits is not None else {"regenerates": seq}
            content = start.content if start.edits is not None else named_payload.get("content", "")
            out.append(
                user_message_payload(
                    content,
                    parent_seq=_parent_of(key, seq, named_payload),
                    attachments=named_payload.get("attachments") or (),
                    **version,
                )
            )
    return out


def user_message_payload(
    content: str,
    *,
    parent_seq: int | None,
    attachments: Sequence[dict[str, Any]] = (),
    history: Sequence[dict[str, Any]] = (),
    **version: int,
) -> dict[str, Any]:
    """A start's user_message payload, before the agent that answers it is named (_with_agent);
    a head start predicts its run's memory from it (chat.runtime.head_start)."""
    message = {**UserMessageEvent(content).to_dict(), "parentSeq": parent_seq, **version}
    if attachments:
        message["attachments"] = list(attachments)
    if history:
        message["history"] = list(history)
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
