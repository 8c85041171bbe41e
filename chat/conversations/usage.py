"""GET /api/usage/'s window (docs/protocol.md, "Usage"): a user's use per calendar day of
TIME_ZONE and per agent, with cost, and the state of every budget a run they could start now is
held to. The figures are sums over the user's model calls, so they equal the sums of the
`complete.usage` of the runs that made them."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db.models import Sum
from django.db.models.functions import TruncDate

from chat.accounts.budgets import budget_json, caps_for_many, caps_usage, period_bounds
from chat.agents.selectors import agent_profiles_for_user
from chat.models import DEFAULT_AGENT_NAME, DEFAULT_AGENT_SLUG, AgentProfile, ModelCall

MAX_DAYS = 366


def _figures(prompt: int, completion: int, total: int, cost: float | None) -> dict[str, Any]:
    return {"promptTokens": prompt, "completionTokens": completion, "totalTokens": total, "cost": cost}


def _add(into: dict[str, Any], row: dict[str, Any]) -> None:
    for key in ("promptTokens", "completionTokens", "totalTokens"):
        into[key] += row[key]
    if row["cost"] is not None:
        into["cost"] = (into["cost"] or 0) + row["cost"]


def usage_window(*, user, days: int, now: datetime, token_id: int | None = None) -> dict[str, Any]:
    """{"timeZone", "days", "agents", "total", "budgets"} for the `days` calendar days ending today."""
    today, _ = period_bounds("day", now)
    first = today - timedelta(days=days - 1)
    zone = ZoneInfo(settings.TIME_ZONE)
    rows = (
        ModelCall.objects.filter(run__user=user, run__imported=False, started_at__gte=first)
        .annotate(day=TruncDate("started_at", tzinfo=zone))
        .values("day", "run__agent__slug")
        .annotate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"), t=Sum("total_tokens"), cost=Sum("cost"))
        .order_by("day", "run__agent__slug")
        .values_list("day", "run__agent__slug", "p", "c", "t", "cost")
    )
    per_day: dict[date, list[dict[str, Any]]] = {}
    agents: dict[str, dict[str, Any]] = {}
    total = _figures(0, 0, 0, None)
    for day, slug, prompt, completion, tokens, cost in rows:
        row = {"agent": slug or DEFAULT_AGENT_SLUG, **_figures(prompt or 0, completion or 0, tokens or 0, cost)}
        per_day.setdefault(day, []).append(row)
        _add(agents.setdefault(row["agent"], {"agent": row["agent"], **_figures(0, 0, 0, None)}), row)
        _add(total, row)
    names = dict(AgentProfile.objects.filter(slug__in=list(agents)).values_list("slug", "name"))
    names.setdefault(DEFAULT_AGENT_SLUG, DEFAULT_AGENT_NAME)
    window = []
    for index in range(days):
        day = (first + timedelta(days=index)).date()
        entries = per_day.get(day, [])
        figures = _figures(0, 0, 0, None)
        for entry in entries:
            _add(figures, entry)
        window.append({"date": day.isoformat(), **figures, "agents": entries})
    return {
        "timeZone": settings.TIME_ZONE,
        "days": window,
        "agents": [{"agent": slug, "name": names.get(slug, slug), **agents[slug]} for slug in sorted(agents)],
        "total": total,
        "budgets": budgets_for_user(user=user, now=now, token_id=token_id),
    }


def budgets_for_user(*, user, now: datetime, token_id: int | None = None) -> list[dict[str, Any]]:
    """Every budget with a limit that a run the user could start now is held to (their agents'
    included), one entry per unit, with what admission counts."""
    profiles = [None, *agent_profiles_for_user(user=user).values_list("pk", flat=True)]
    found = caps_for_many(runs={(user.pk, profile, token_id) for profile in profiles})
    caps = list({cap.key: cap for group in found.values() for cap in group}.values())
    used, reserved = caps_usage(caps, now=now)
    return [budget_json(cap, used=used[cap.key], reserved=reserved[cap.key], now=now) for cap in caps]
