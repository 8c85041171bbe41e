"""The rules a run start obeys, checked once for every door (docs/protocol.md, "Client frames",
"Runs over HTTP" and "Budgets"): the conversation's agent must be one its user may use now, the
user's messages-per-minute limit (their groups', else AGENT_MESSAGES_PER_MINUTE:
chat.accounts.limits), room in every budget that applies (chat.accounts.budgets: used plus the
reservations of runs in progress below its limit; the daily token quota is one of them), and one
running run per conversation. An admitted start reserves AGENT_RUN_TOKEN_RESERVE tokens against
each of its budgets (stored with its Run: counted while it runs, gone when it ends).

Read for a whole group of starts in the start's transaction (chat.runs.starts), under a lock of
the rows of the users and budgets concerned, so that two processes never see the same room
twice; each admitted start counts against the next of the group."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count, Sum

from chat.accounts.budgets import (
    Cap,
    budget_json,
    caps_for_many,
    caps_usage,
    iso_ms,
    retry_after,
    run_reserve,
)
from chat.accounts.limits import Limits, limits_for_users
from chat.agents.selectors import agent_profiles_for_user
from chat.eventlog.append import conversation_key
from chat.eventlog.types import RunStart
from chat.exceptions import AgentUnavailable, QuotaBusy, QuotaExceeded, RateLimited, RunInProgress
from chat.models import AgentProfile, Budget, Conversation, ModelCall, Run
from chat.pricing import reserve_cost


@dataclass
class Admission:
    """What a group of starts is admitted against, read once for the group."""

    limits: dict[Any, Limits]  # user id ->
    recent: dict[Any, int]  # user id -> runs started in the last minute (users under a rate limit)
    busy: set[Any]  # conversations with a running run
    agent_ids: dict[Any, int | None]  # conversation id -> its agent profile's id
    usable: dict[tuple[Any, int], AgentProfile]  # (user id, profile id) -> a profile the user may use
    now: datetime
    caps: dict[tuple[Any, int | None, int | None], list[Cap]]  # (user id, agent profile id, token id) ->
    used: dict[tuple, float]  # Cap.key ->
    reserved: dict[tuple, float]  # Cap.key -> what runs in progress (and admitted starts) reserved

    def profile(self, start: RunStart, key) -> AgentProfile | None:
        """The agent profile that answers the start (None: the environment's agent)."""
        agent_id = self.agent_ids.get(key)
        return None if agent_id is None else self.usable.get((start.message.user.pk, agent_id))

    def refusal(self, start: RunStart, key) -> Exception | None:
        """Why the start may not begin (None: it may), in the order a user is told: the agent, the
        rate, a budget used up, a run in progress here, a budget filled by runs in progress."""
        user = start.message.user.pk
        limits = self.limits[user]
        agent_id = self.agent_ids.get(key)
        if agent_id is not None and (user, agent_id) not in self.usable:
            return AgentUnavailable(f"agent profile {agent_id} is disabled or not open to this user")
        if (limit := limits.messages_per_minute) and self.recent.get(user, 0) >= limit:
            return RateLimited(f"at most {limit} messages per minute")
        caps = self.caps.get((user, agent_id, start.message.api_token_id), [])
        if spent := [cap for cap in caps if self.used[cap.key] >= cap.limit]:
            return self._refused(spent, QuotaExceeded)
        if key in self.busy:
            return RunInProgress(str(key))
        if full := [cap for cap in caps if self.used[cap.key] + self.reserved[cap.key] >= cap.limit]:
            return self._refused(full, QuotaBusy)
        return None

    def _refused(self, caps: list[Cap], kind: type[QuotaExceeded]) -> QuotaExceeded:
        """The refusal by `caps`: told of the one that frees last."""
        waits = [(retry_after(cap, used=self.used[cap.key], now=self.now), cap) for cap in caps]
        (seconds, when), cap = max(waits, key=lambda wait: wait[0][1])
        used, reserved = self.used[cap.key], self.reserved[cap.key]
        budget = budget_json(cap, used=used, reserved=reserved, now=self.now)
        period = "today" if cap.period == "day" else f"this {cap.period}"
        what = f"{budget['used']} of {budget['limit']} {cap.unit} used {period} ({settings.TIME_ZONE})"
        if kind is QuotaBusy:
            what += f" and a run in progress: {budget['reserved']} reserved by runs in progress"
        what += f"; {cap.scope} budget"
        return kind(what, retry_after=seconds, resets_at=iso_ms(when), budget=budget)

    def reserve(self, start: RunStart, key) -> int:
        """Count an admitted start against the rest of its group: the tokens it reserves."""
        user = start.message.user.pk
        self.busy.add(key)
        self.recent[user] = self.recent.get(user, 0) + 1
        caps = self.caps.get((user, self.agent_ids.get(key), start.message.api_token_id), [])
        if not caps:
            return 0
        profile = self.profile(start, key)
        tokens = run_reserve(profile_max_tokens=profile.max_tokens if profile is not None else None)
        model = profile.model if profile is not None else start.model
        for cap in caps:
            worth = (
                tokens
                if cap.unit == "tokens"
                else reserve_cost(settings.AGENT_MODEL_PRICES, model=model, tokens=tokens)
            )
            self.reserved[cap.key] += worth or 0
        return tokens


def admission_read(*, starts: list[RunStart], keys: set, now: datetime) -> Admission:
    """The group's Admission: a handful of queries whatever its size (users with no limit are
    left out of the counting ones). Inside a transaction: the rows of users and budgets under a
    limit stay locked until it ends."""
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
    busy = set(
        Run.objects.filter(conversation__in=keys, status=Run.Status.RUNNING, parent__isnull=True).values_list(
            "conversation", flat=True
        )
    )
    agent_ids, usable = _agents_of(starts, keys)
    caps = _caps_of(starts, agent_ids, limits)
    every = {cap.key: cap for group in caps.values() for cap in group}
    if every:
        # Another process's start under one of these budgets waits here until this one commits,
        # and then counts its run's reservation: the check and the reservation are one step.
        users = {cap.user_id for cap in every.values() if cap.user_id is not None}
        list(get_user_model().objects.select_for_update().filter(pk__in=users).order_by("pk").values_list("pk"))
        pools = {cap.budget_id for cap in every.values() if cap.scope in ("agent", "token") and cap.budget_id}
        list(Budget.objects.select_for_update().filter(pk__in=pools).order_by("pk").values_list("pk"))
    used, reserved = caps_usage(list(every.values()), now=now)
    return Admission(limits, recent, busy, agent_ids, usable, now, caps, used, reserved)


def _caps_of(starts: list[RunStart], agent_ids: dict[Any, int | None], limits: dict[Any, Limits]) -> dict:
    """{(user id, agent profile id, token id): [Cap]} for the starts, in a handful of queries;
    none at all when no budget is set anywhere and no user is under a daily token quota."""
    runs = {
        (s.message.user.pk, agent_ids.get(conversation_key(s.message.conversation.pk)), s.message.api_token_id)
        for s in starts
    }
    if not any(limits[user].daily_token_quota for user, _, _ in runs) and not Budget.objects.exists():
        return {}
    return caps_for_many(runs=runs)


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
