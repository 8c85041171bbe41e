"""Budgets written (docs/protocol.md, "Budgets", "Managing budgets"): staff create, change and
delete them through /api/budgets/, a token's owner sets their token's through /api/tokens/. Each
function checks what it is given and raises BudgetRefused (400) or BudgetExists (409)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from chat.models import DEFAULT_AGENT_SLUG, AgentProfile, ApiToken, Budget

SCOPES = ("user", "group", "agent", "token")
PERIODS = ("day", "week", "month")


class BudgetRefused(ValueError):
    """A body that names an unknown scope, period or target, or limits that are not usable."""


class BudgetExists(Exception):
    """A second budget of the same scope, target and period."""


def budget_json(budget: Budget) -> dict[str, Any]:
    """A budget as /api/budgets/ gives it: its targets not of its scope null."""
    return {
        "id": budget.pk,
        "scope": budget.scope,
        "user": budget.user.get_username() if budget.user_id else None,
        "group": budget.group.name if budget.group_id else None,
        "agent": (budget.agent.slug if budget.agent_id else DEFAULT_AGENT_SLUG) if budget.scope == "agent" else None,
        "token": budget.token_id,
        "period": budget.period,
        "tokens": budget.tokens,
        "cost": budget.cost,
        "createdAt": budget.created_at.isoformat(),
        "updatedAt": budget.updated_at.isoformat(),
    }


def _limits(body: dict[str, Any], *, partial: bool = False) -> dict[str, Any]:
    """The `tokens` and `cost` of a body (absent ones left out when `partial`)."""
    limits = {}
    for name in ("tokens", "cost"):
        if name not in body:
            continue
        value = body[name]
        if value is None:
            if not partial:
                continue
        elif name == "tokens" and (type(value) is not int or value < 0):
            raise BudgetRefused("tokens must be an integer >= 0")
        elif name == "cost" and (type(value) not in (int, float) or value < 0):
            raise BudgetRefused("cost must be a number >= 0")
        limits[name] = value
    return limits


def _target(scope: str, name: Any, *, owner=None) -> dict[str, Any]:
    """The target field of a budget of `scope` named `name` (a username, group name, agent slug
    or `default`, token id); `owner`: only that user's tokens."""
    found: Any = None
    if scope == "user" and isinstance(name, str):
        found = get_user_model().objects.filter(username=name).first()
    elif scope == "group" and isinstance(name, str):
        found = Group.objects.filter(name=name).first()
    elif scope == "agent" and isinstance(name, str):
        if name == DEFAULT_AGENT_SLUG:
            return {"agent": None}
        found = AgentProfile.objects.filter(slug=name).first()
    elif scope == "token" and type(name) is int:
        tokens = ApiToken.objects.filter(pk=name)
        found = (tokens.filter(user=owner) if owner is not None else tokens).first()
    if found is None:
        raise BudgetRefused(f"no such {scope}: {name!r}")
    return {scope: found}


def budget_create(*, body: dict[str, Any]) -> Budget:
    scope, period = body.get("scope"), body.get("period")
    if scope not in SCOPES:
        raise BudgetRefused(f"scope must be one of {', '.join(SCOPES)}")
    if period not in PERIODS:
        raise BudgetRefused(f"period must be one of {', '.join(PERIODS)}")
    target = _target(scope, body.get(scope))
    limits = _limits(body)
    if not limits:
        raise BudgetRefused("a budget sets tokens, cost or both")
    with transaction.atomic():
        if Budget.objects.filter(scope=scope, period=period, **target).exists():
            raise BudgetExists(f"there is already a {period} budget of this {scope}")
        return Budget.objects.create(scope=scope, period=period, **target, **limits)


def budget_update(*, budget: Budget, body: dict[str, Any]) -> Budget:
    """`tokens` and `cost` changed (null removes that limit); one of them stays set."""
    for name, value in _limits(body, partial=True).items():
        setattr(budget, name, value)
    if budget.tokens is None and budget.cost is None:
        raise BudgetRefused("a budget keeps tokens, cost or both")
    budget.save()
    return budget


def token_budget_set(*, token: ApiToken, body: Any) -> None:
    """The token's budget (`{"period", "tokens"?, "cost"?}`) replaces the ones it had; None: none."""
    if body is not None and not isinstance(body, dict):
        raise BudgetRefused("budget must be an object or null")
    if body is not None:
        if body.get("period") not in PERIODS:
            raise BudgetRefused(f"budget.period must be one of {', '.join(PERIODS)}")
        limits = _limits(body)
        if not limits:
            raise BudgetRefused("a budget sets tokens, cost or both")
    with transaction.atomic():
        Budget.objects.filter(scope="token", token=token).delete()
        if body is not None:
            Budget.objects.create(scope="token", token=token, period=body["period"], **limits)


def token_budget_json(token: ApiToken) -> dict[str, Any] | None:
    budget = Budget.objects.filter(scope="token", token=token).first()
    if budget is None:
        return None
    return {"id": budget.pk, "period": budget.period, "tokens": budget.tokens, "cost": budget.cost}
