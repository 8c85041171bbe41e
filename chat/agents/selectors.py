"""Reads of agent profiles: the ones a user may use (active, open to one of the user's groups or
to everyone), newest first."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from chat.models import DEFAULT_AGENT_SLUG, AgentProfile


def agent_profiles_for_user(*, user) -> QuerySet[AgentProfile]:
    """The enabled profiles the user may pick: open to everyone, or naming the user or one of
    the user's groups."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return AgentProfile.objects.none()
    allowed = Q(everyone=True) | Q(users=user) | Q(groups__in=user.groups.all())
    # pk IN (...) rather than .distinct(): the M2M joins repeat a profile once per matching row.
    return AgentProfile.objects.filter(enabled=True, pk__in=AgentProfile.objects.filter(allowed).values("pk")).order_by(
        "name", "slug"
    )


def agent_profile_for_user(*, user, slug: str) -> AgentProfile | None:
    # A NUL is never in a stored slug; PostgreSQL would refuse the lookup (DataError), not miss.
    if "\x00" in slug:
        return None
    return agent_profiles_for_user(user=user).filter(slug=slug).first()


def agent_chosen(*, user, slug) -> AgentProfile | None:
    """The agent a request names for a conversation, checked in this one place for every route that
    creates a conversation or changes its agent (POST and PATCH /api/conversations/, the
    OpenAI-compatible endpoint's `model`): None for the default agent, the profile for a slug the
    user may use; ValueError when `slug` is not a string, LookupError for a slug the user may not
    use, disabled or unknown (answered like a missing one: 404)."""
    if not isinstance(slug, str):
        raise ValueError("agent must be the slug of an agent (GET /api/agents/)")
    if slug == DEFAULT_AGENT_SLUG:
        return None
    profile = agent_profile_for_user(user=user, slug=slug)
    if profile is None:
        raise LookupError(slug)
    return profile
