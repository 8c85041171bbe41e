"""The rules a run start obeys, checked once for every door (docs/protocol.md, "Client frames"
and "Runs over HTTP"): the conversation's agent must be one its user may use now, the user's
messages-per-minute limit and daily token quota (their groups' limits, else
AGENT_MESSAGES_PER_MINUTE / AGENT_DAILY_TOKEN_QUOTA: chat.accounts.limits), one running run per
conversation, and, under a quota, one run of the user's at a time (docs/configuration.md, "The
quota and runs in progress": at most one run ever goes past an exhausted quota, since none
starts beside it).

Read for a whole group of starts in the start's transaction (chat.runs.starts), a user with a
quota under a lock of their row, so that two processes cannot both admit one; each admitted
start counts against the next of the group."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, Sum

from chat.accounts.limits import Limits, limits_for_users
from chat.agents.selectors import agent_profiles_for_user
from chat.eventlog.types import RunStart
from chat.exceptions import AgentUnavailable, QuotaBusy, QuotaExceeded, RateLimited, RunInProgress
from chat.models import AgentProfile, Conversation, ModelCall, Run


@dataclass
class Admission:
    """What a group of starts is admitted against, read once for the group."""

    limits: dict[Any, Limits]  # user id ->
    recent: dict[Any, int]  # user id -> runs started in the last minute (users under a rate limit)
    spent: dict[Any, int]  # user id -> tokens today, UTC (users under a quota)
    flying: dict[Any, int]  # user id -> runs running now (users under a quota)
    busy: set[Any]  # conversations with a running run
    agent_ids: dict[Any, int | None]  # conversation id -> its agent profile's id
    usable: dict[tuple[Any, int], AgentProfile]  # (user id, profile id) -> a profile the user may use

    def profile(self, start: RunStart, key) -> AgentProfile | None:
        """The agent profile that answers the start (None: the environment's agent)."""
        agent_id = self.agent_ids.get(key)
        return None if agent_id is None else self.usable.get((start.message.user.pk, agent_id))

    def refusal(self, start: RunStart, key) -> Exception | None:
        """Why the start may not begin (None: it may), in the order a user is told: the agent, the
        rate, the quota, a run in progress here, a run in progress elsewhere under a quota."""
        user = start.message.user.pk
        limits = self.limits[user]
        agent_id = self.agent_ids.get(key)
        if agent_id is not None and (user, agent_id) not in self.usable:
            return AgentUnavailable(f"agent profile {agent_id} is disabled or not open to this user")
        if (limit := limits.messages_per_minute) and self.recent.get(user, 0) >= limit:
            return RateLimited(f"at most {limit} messages per minute")
        if (quota := limits.daily_token_quota) and self.spent.get(user, 0) >= quota:
            return QuotaExceeded(f"{self.spent[user]} of {quota} tokens used today (UTC)")
        if key in self.busy:
            return RunInProgress(str(key))
        if quota and self.flying.get(user, 0):
            # A run in flight may spend all that is left (nothing bounds a run's tokens at its
            # start): another one started now could end past the quota too.
            return QuotaBusy(
                f"{self.spent.get(user, 0)} of {quota} tokens used today (UTC) and a run in progress:"
                " under a daily quota, runs start one at a time"
            )
        return None

    def admit(self, start: RunStart, key) -> None:
        """Count an admitted start against the rest of its group."""
        user = start.message.user.pk
        self.busy.add(key)
        self.recent[user] = self.recent.get(user, 0) + 1
        self.flying[user] = self.flying.get(user, 0) + 1


def admission_read(*, starts: list[RunStart], keys: set, now: datetime) -> Admission:
    """The group's Admission: a handful of queries whatever its size (users with no limit are
    left out of the counting ones). Inside a transaction: the rows of users under a quota stay
    locked until it ends."""
    limits = limits_for_users(user_ids={s.message.user.pk for s in starts})
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
    busy = set(
        Run.objects.filter(conversation__in=keys, status=Run.Status.RUNNING, parent__isnull=True).values_list(
            "conversation", flat=True
        )
    )
    agent_ids, usable = _agents_of(starts, keys)
    return Admission(limits, recent, spent, flying, busy, agent_ids, usable)


def _agents_of(starts: list[RunStart], keys: set) -> tuple[dict[Any, int | None], dict[tuple[Any, int], AgentProfile]]:
    """The agent profile id of each conversation, read now (a PATCH may have changed it since the
    socket connected), and {(user id, profile id): profile} for those each user may use now."""
    agent_ids = dict(Conversation.objects.filter(pk__in=keys).values_list("pk", "agent_id"))
    wanted = {agent_id for agent_id in agent_ids.values() if agent_id is not None}
    usable: dict[tuple[Any, int], AgentProfile] = {}
    if wanted:
        for user in {start.message.user.pk: start.message.user for start in starts}.values():
            for profile in agent_profiles_for_user(user=user).filter(pk__in=wanted):
                usable[(user.pk, profile.pk)] = profile
    return agent_ids, usable


def tokens_today(*, user_ids, now: datetime) -> dict[Any, int]:
    """{user id: tokens of the user's model calls since midnight UTC} (users with none left out)."""
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
        Run.objects.filter(user__in=user_ids, status=Run.Status.RUNNING, parent__isnull=True)
        .values("user")
        .annotate(n=Count("pk"))
        .values_list("user", "n")
    )
