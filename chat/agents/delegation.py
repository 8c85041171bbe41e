"""Delegates (docs/protocol.md, "Sub-agents"): the profiles a profile may hand a task to, each
offered to its runs as a tool `agent__<slug>`. What the admin refuses to save, and which of a
profile's delegates a user may use."""

from __future__ import annotations

from collections.abc import Iterable

from chat.agents.selectors import agent_profiles_for_user
from chat.models import AgentProfile

# The prefix of the delegate tools' names; reserved: no MCP server may be named `agent`.
TOOL_PREFIX = "agent__"
# OpenAI's limit on a function's name (64) minus the prefix.
MAX_DELEGATE_SLUG = 64 - len(TOOL_PREFIX)


def tool_name(slug: str) -> str:
    return f"{TOOL_PREFIX}{slug}"


def delegate_problems(
    profile: AgentProfile, delegates: list[AgentProfile], *, everyone: bool, users, groups
) -> list[str]:
    """Why `profile` (open to everyone, to `users` and to `groups` as the form says) may not have
    each of `delegates`: itself, disabled, a slug too long for a tool name, or an audience that
    does not cover this profile's."""
    problems = []
    for delegate in delegates:
        label = f"{delegate.name} ({delegate.slug})"
        if profile.pk is not None and delegate.pk == profile.pk:
            problems.append(f"{label}: a profile cannot delegate to itself.")
        elif not delegate.enabled:
            problems.append(f"{label} is disabled.")
        elif len(delegate.slug) > MAX_DELEGATE_SLUG:
            problems.append(
                f"{label}: its slug is longer than {MAX_DELEGATE_SLUG} characters, too long for the tool name "
                f"{TOOL_PREFIX}<slug> (64 at most)."
            )
        elif gap := _audience_gap(delegate, everyone=everyone, users=users, groups=groups):
            problems.append(f"{label} is not open to {gap}, who may use this profile.")
    return problems


def _audience_gap(delegate: AgentProfile, *, everyone: bool, users: Iterable, groups: Iterable) -> str:
    """Who may use the profile but not `delegate` ("" when nobody)."""
    if delegate.everyone:
        return ""
    if everyone:
        return "everyone"
    delegate_users = set(delegate.users.values_list("pk", flat=True))
    delegate_groups = set(delegate.groups.values_list("pk", flat=True))
    for user in users:
        if user.pk in delegate_users:
            continue
        if delegate_groups & set(user.groups.values_list("pk", flat=True)):
            continue
        return f"the user {user.get_username()}"
    for group in groups:
        if group.pk not in delegate_groups:
            return f"the group {group.name}"
    return ""


def usable_delegates(profile: AgentProfile | None, *, user) -> list[AgentProfile]:
    """The delegates of `profile` that `user` may use now (enabled and open to them), by slug."""
    if profile is None:
        return []
    usable = agent_profiles_for_user(user=user)
    return list(usable.filter(pk__in=profile.delegates.values("pk")).exclude(pk=profile.pk).order_by("slug"))
