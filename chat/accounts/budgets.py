"""The budgets that hold a run (docs/protocol.md, "Budgets"), as caps: one limit of one unit
(`tokens` or `cost`) over one period of TIME_ZONE, and what it counts: a user's runs (scopes
`user`, `group`: an allowance per member, `default`: AGENT_DAILY_TOKEN_QUOTA), an agent's runs
(`agent`: one pool) or a token's runs (`token`). Read at every admission and before every model
call (no cache): a change applies at once. Used = the model calls that started in the period;
reserved = what the runs in progress reserved and have not used yet."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db.models import Q, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from chat.accounts.limits import most_generous
from chat.models import Budget, GroupLimits, ModelCall, Run
from chat.pricing import cost, reserve_cost

UNITS = ("tokens", "cost")
# Whether this process has met a budget (a Budget row, a group quota): from then on no run gets a
# head start (chat.runtime.head_start), whose model request would leave before the decision.
_seen = {"budgets": False}
# Seconds a start refused only by reservations is told to wait: runs in progress settle soon.
RESERVED_RETRY_SECONDS = 10


@dataclass(frozen=True)
class Cap:
    scope: str  # user, group, default, agent, token
    budget_id: int | None
    name: str | None
    period: str  # day, week, month
    unit: str  # tokens, cost
    limit: float
    user_id: Any = None  # user, group, default: that user's runs
    agent_id: int | None = None  # agent: that profile's runs (None: the environment's agent)
    token_id: int | None = None  # token: that token's runs

    @property
    def key(self) -> tuple:
        """The pool it counts: caps with one key share their used and reserved."""
        target = self.user_id if self.scope in ("user", "group", "default") else (self.agent_id, self.token_id)
        return (self.scope in ("user", "group", "default"), self.scope, target, self.period, self.unit)

    def runs(self, prefix: str = "") -> Q:
        """The runs it counts, as a filter of Run (`prefix` "run__": of ModelCall)."""
        if self.scope == "agent":
            if self.agent_id is None:
                return Q(**{f"{prefix}agent__isnull": True})
            return Q(**{f"{prefix}agent_id": self.agent_id})
        if self.scope == "token":
            return Q(**{f"{prefix}api_token_id": self.token_id})
        return Q(**{f"{prefix}user_id": self.user_id})


def period_bounds(period: str, now: datetime) -> tuple[datetime, datetime]:
    """The start and end of the period of TIME_ZONE's calendar that holds `now`."""
    local = now.astimezone(ZoneInfo(settings.TIME_ZONE))
    start = local.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "week":
        start -= timedelta(days=start.weekday())
    elif period == "month":
        start = start.replace(day=1)
    if period == "day":
        end = start + timedelta(days=1)
    elif period == "week":
        end = start + timedelta(days=7)
    else:
        end = (start + timedelta(days=32)).replace(day=1)
    # Wall-clock arithmetic (zoneinfo): a DST change shifts the UTC hour, not the day.
    return start, end


def _own_caps(budget: Budget, **counts: Any) -> list[Cap]:
    name = {
        "user": lambda: budget.user.get_username() if budget.user else None,
        "group": lambda: budget.group.name if budget.group else None,
        "agent": lambda: budget.agent.slug if budget.agent else "default",
        "token": lambda: budget.token.name if budget.token else None,
    }[budget.scope]()
    caps = []
    for unit in UNITS:
        limit = getattr(budget, unit)
        if limit:  # None: not set; 0: unlimited
            caps.append(Cap(budget.scope, budget.pk, name, budget.period, unit, limit, **counts))
    return caps


def _group_caps(user_id: Any, budgets: list[Budget], quotas: list[tuple[int | None, str]]) -> list[Cap]:
    """The most generous limit of the user's groups per period and unit (a group's day tokens
    budget is its daily token quota), else AGENT_DAILY_TOKEN_QUOTA for day tokens (`default`).
    `budgets`: their groups' budgets; `quotas`: their groups' (daily token quota, group name)."""
    offers: dict[tuple[str, str], list[tuple[float | None, Budget | None, str]]] = {}
    for budget in budgets:
        for unit in UNITS:
            offers.setdefault((budget.period, unit), []).append((getattr(budget, unit), budget, budget.group.name))
    for quota, name in quotas:
        day = offers.setdefault(("day", "tokens"), [])
        if quota is not None and not any(offered_name == name for _, _, offered_name in day):
            day.append((quota, None, name))
    caps = []
    for (period, unit), offered in offers.items():
        values = [value for value, _, _ in offered if value is not None]
        if not values:
            continue
        limit = most_generous(values, 0)
        if limit:
            _, budget, name = next(o for o in offered if o[0] == limit)
            caps.append(Cap("group", budget.pk if budget else None, name, period, unit, limit, user_id=user_id))
    if not any(value is not None for value, _, _ in offers.get(("day", "tokens"), [])):
        if quota := settings.AGENT_DAILY_TOKEN_QUOTA:
            caps.append(Cap("default", None, None, "day", "tokens", quota, user_id=user_id))
    return caps


def caps_for_many(*, runs: set[tuple[Any, int | None, int | None]]) -> dict[tuple, list[Cap]]:
    """{(user id, agent profile id, token id): every cap a run of theirs holds to} (agent None: the
    environment's; token None: a session's), in five queries whatever their number."""
    users = {user for user, _, _ in runs}
    agents = {agent for _, agent, _ in runs}
    tokens = {token for _, _, token in runs if token is not None}
    own: dict[Any, list[Budget]] = {}
    for budget in Budget.objects.filter(scope="user", user__in=users).select_related("user"):
        own.setdefault(budget.user_id, []).append(budget)
    of_groups: dict[Any, list[Budget]] = {}
    for member, budget in _member_rows(Budget.objects.filter(scope="group", group__user__in=users), users):
        of_groups.setdefault(member, []).append(budget)
    quotas: dict[Any, list[tuple[int | None, str]]] = {}
    for member, quota, name in GroupLimits.objects.filter(group__user__in=users).values_list(
        "group__user", "daily_token_quota", "group__name"
    ):
        quotas.setdefault(member, []).append((quota, name))
    pools: dict[Any, list[Budget]] = {}
    named = Q(agent__in=[a for a in agents if a is not None]) | (
        Q(agent__isnull=True) if None in agents else Q(pk=None)
    )
    for budget in Budget.objects.filter(named, scope="agent").select_related("agent"):
        pools.setdefault(budget.agent_id, []).append(budget)
    for budget in Budget.objects.filter(scope="token", token__in=tokens).select_related("token"):
        pools.setdefault(("token", budget.token_id), []).append(budget)
    found = {}
    quota_set = any(quota is not None for rows in quotas.values() for quota, _ in rows)
    _seen["budgets"] = _seen["budgets"] or bool(own or of_groups or quota_set or pools)
    for user, agent, token in runs:
        caps = [cap for budget in own.get(user, []) for cap in _own_caps(budget, user_id=user)]
        caps += _group_caps(user, of_groups.get(user, []), quotas.get(user, []))
        caps += [cap for budget in pools.get(agent, []) for cap in _own_caps(budget, agent_id=agent)]
        caps += [cap for budget in pools.get(("token", token), []) for cap in _own_caps(budget, token_id=token)]
        found[(user, agent, token)] = caps
    return found


def _member_rows(budgets, users: set) -> list[tuple[Any, Budget]]:
    """(member id, budget) for each of the budgets' group members among `users`."""
    rows = budgets.select_related("group").prefetch_related("group__user_set")
    return [(member.pk, budget) for budget in rows for member in budget.group.user_set.all() if member.pk in users]


def budgets_may_apply() -> bool:
    """A start may be held to a budget: AGENT_DAILY_TOKEN_QUOTA is set, or this process has met
    one. No model may be called for a start before its budgets admit it."""
    return bool(settings.AGENT_DAILY_TOKEN_QUOTA) or _seen["budgets"]


def any_budget_set() -> bool:
    """Whether any budget is set anywhere (a Budget row, a group's daily token quota). Asked first
    before every model call: on a site with none, the check costs these two existence probes, not
    the run's token and five queries for its caps (bench --only costs: 5 queries, 2.9 ms a call);
    asked afresh each time, so a budget made on any process holds the next call all the same."""
    return Budget.objects.exists() or GroupLimits.objects.filter(daily_token_quota__isnull=False).exists()


def caps_for(*, user_id: Any, agent_id: int | None, token_id: int | None = None) -> list[Cap]:
    """Every cap a run of this user, agent profile (None: the environment's) and token holds to."""
    return caps_for_many(runs={(user_id, agent_id, token_id)})[(user_id, agent_id, token_id)]


def caps_usage(caps: list[Cap], *, now: datetime, exclude_run: Any = None) -> tuple[dict, dict]:
    """({Cap.key: used}, {Cap.key: reserved}): what the model calls of each cap's runs that started
    in its period used (imported runs never; `exclude_run`'s left out), and what its runs in
    progress reserved and have not used yet. A query per period and unit for the users' caps,
    one per agent or token cap, and one for every reservation."""
    used: dict[tuple, float] = {}
    per_user: dict[tuple[str, str], dict[Any, Cap]] = {}
    for cap in caps:
        if cap.user_id is not None:
            per_user.setdefault((cap.period, cap.unit), {})[cap.user_id] = cap
        else:
            used[cap.key] = _sum_calls(cap.runs("run__"), cap, now=now, exclude_run=exclude_run).get(None, 0)
    for by_user in per_user.values():
        sums = _sum_calls(
            Q(run__user__in=list(by_user)),
            by_user[next(iter(by_user))],
            now=now,
            exclude_run=exclude_run,
            per_user=True,
        )
        for user, cap in by_user.items():
            used[cap.key] = sums.get(user, 0)
    reserved: dict[tuple, float] = {cap.key: 0.0 for cap in caps}
    if caps:
        which = Q(pk=None)
        for cap in caps:
            which |= cap.runs()
        rows = (
            Run.objects.filter(which, status=Run.Status.RUNNING, imported=False)
            .annotate(spent=Coalesce(Sum("model_calls__total_tokens"), 0))
            .values_list("user_id", "agent_id", "api_token_id", "reserved_tokens", "spent", "model")
        )
        for user, agent, token, tokens, spent, model in rows:
            left = max(tokens - spent, 0)
            for cap in caps:
                if _counts(cap, user, agent, token):
                    worth = (
                        left
                        if cap.unit == "tokens"
                        else reserve_cost(settings.AGENT_MODEL_PRICES, model=model, tokens=left)
                    )
                    reserved[cap.key] += worth or 0
    return used, reserved


def _counts(cap: Cap, user: Any, agent: int | None, token: int | None) -> bool:
    if cap.scope == "agent":
        return agent == cap.agent_id
    if cap.scope == "token":
        return token == cap.token_id
    return user == cap.user_id


def _sum_calls(which: Q, cap: Cap, *, now: datetime, exclude_run: Any, per_user: bool = False) -> dict[Any, float]:
    start, _ = period_bounds(cap.period, now)
    calls = ModelCall.objects.filter(which, started_at__gte=start, run__imported=False)
    if exclude_run is not None:
        calls = calls.exclude(run_id=exclude_run)
    field = "total_tokens" if cap.unit == "tokens" else "cost"
    if not per_user:
        return {None: calls.aggregate(n=Sum(field))["n"] or 0}
    return {user: n or 0 for user, n in calls.values("run__user").annotate(n=Sum(field)).values_list("run__user", "n")}


def reserve_setting(value: Any) -> int | None:
    """AGENT_RUN_TOKEN_RESERVE as a whole number of tokens above 0 (None: unset). ValueError names
    what is wrong; only ASCII digits count, so "1.5", "1e3", "²" or "١٠" are refused rather than
    read as something else (system check agentsite.E008)."""
    if value is None:
        return None
    text = str(value).strip() if not isinstance(value, bool) else ""
    if not (text.isascii() and text.isdigit()):
        raise ValueError(f"must be a whole number of tokens, like 4096, not {value!r}")
    if int(text) < 1:
        raise ValueError(f"must be above 0, not {value!r}")
    return int(text)


def run_reserve(*, profile_max_tokens: int | None) -> int:
    """AGENT_RUN_TOKEN_RESERVE, else the run's max_tokens (its profile's, else AGENT_MAX_TOKENS), else 4096."""
    reserve = reserve_setting(settings.AGENT_RUN_TOKEN_RESERVE)
    if reserve is not None:
        return reserve
    return profile_max_tokens or int(settings.AGENT_MAX_TOKENS or 0) or 4096


def retry_after(cap: Cap, *, used: float, now: datetime) -> tuple[int, datetime]:
    """(seconds, when): the end of the period for a cap used up, soon for one filled by reservations."""
    if used >= cap.limit:
        _, end = period_bounds(cap.period, now)
        return max(1, math.ceil((end - now).total_seconds())), end
    return RESERVED_RETRY_SECONDS, now + timedelta(seconds=RESERVED_RETRY_SECONDS)


def budget_json(cap: Cap, *, used: float, reserved: float, now: datetime) -> dict[str, Any]:
    """The budget object of GET /api/usage/ and of refusals."""
    _, end = period_bounds(cap.period, now)
    number = int if cap.unit == "tokens" else float
    return {
        "id": cap.budget_id,
        "scope": cap.scope,
        "name": cap.name,
        "period": cap.period,
        "unit": cap.unit,
        "limit": number(cap.limit),
        "used": number(used),
        "reserved": number(reserved),
        "remaining": number(max(cap.limit - used - reserved, 0)),
        "resetsAt": iso_ms(end),
        "exhausted": used >= cap.limit,
    }


def iso_ms(when: datetime) -> str:
    """ISO 8601 UTC with milliseconds, like an event's `ts`."""
    return when.astimezone(ZoneInfo("UTC")).strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def budget_stop(
    *, run_id: Any, user_id: Any, agent_id: int | None, own: tuple[str, int, int, int], since: datetime
) -> dict | None:
    """Before a model call of the run: BUDGET_EXHAUSTED's fields ({"budget", "retryAfter",
    "resetsAt"}) once a budget of the run has its used at its limit (reservations aside), None
    while every one has room. Of several used up, the one that resets last is told: retryAfter is
    until every one has room again (as an admission refusal's, chat.runs.admission). `own`: (model, prompt, completion, total tokens) the
    run has used in this process since `since` (when this process took it up), counted in place
    of its calls stored since then (which the sink may not have written yet); its calls from
    before, in a process that died, count as stored."""
    if not settings.AGENT_DAILY_TOKEN_QUOTA and not any_budget_set():
        return None
    token_id = Run.objects.filter(pk=run_id).values_list("api_token_id", flat=True).first()
    caps = caps_for(user_id=user_id, agent_id=agent_id, token_id=token_id)
    if not caps:
        return None
    now = timezone.now()
    used, reserved = caps_usage(caps, now=now, exclude_run=run_id)
    model, prompt, completion, total = own
    own_cost = cost(settings.AGENT_MODEL_PRICES, model=model, prompt_tokens=prompt, completion_tokens=completion)
    before = ModelCall.objects.filter(run_id=run_id, started_at__lt=since)
    stops = []
    for cap in caps:
        start, _ = period_bounds(cap.period, now)
        earlier = before.filter(started_at__gte=start).aggregate(
            n=Sum("total_tokens" if cap.unit == "tokens" else "cost")
        )
        spent = used[cap.key] + (earlier["n"] or 0) + (total if cap.unit == "tokens" else own_cost or 0)
        if spent >= cap.limit:
            seconds, when = retry_after(cap, used=spent, now=now)
            stops.append((when, seconds, cap, spent))
    if not stops:
        return None
    when, seconds, cap, spent = max(stops, key=lambda stop: stop[0])
    budget = budget_json(cap, used=spent, reserved=reserved[cap.key], now=now)
    return {"budget": budget, "retryAfter": seconds, "resetsAt": iso_ms(when)}


def every_budget_state(*, now: datetime) -> list[dict[str, Any]]:
    """Every budget set, as the staff's usage page shows it: per unit, with used and reserved for
    the pools (user, agent, token budgets); a group's is an allowance per member (None)."""
    rows = []
    budgets = list(Budget.objects.select_related("user", "group", "agent", "token").order_by("scope", "id"))
    targets = {"user": "user_id", "agent": "agent_id", "token": "token_id"}
    caps = [
        (budget, cap)
        for budget in budgets
        for cap in _own_caps(
            budget,
            **({targets[budget.scope]: getattr(budget, targets[budget.scope])} if budget.scope in targets else {}),
        )
    ]
    pools = [cap for budget, cap in caps if budget.scope != "group"]
    used, reserved = caps_usage(pools, now=now)
    for budget, cap in caps:
        if budget.scope == "group":
            rows.append(
                {
                    **budget_json(cap, used=0, reserved=0, now=now),
                    "used": None,
                    "reserved": None,
                    "remaining": None,
                    "exhausted": None,
                }
            )
        else:
            rows.append(budget_json(cap, used=used[cap.key], reserved=reserved[cap.key], now=now))
    return rows
