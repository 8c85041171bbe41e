"""The limits that apply to each user (docs/configuration.md, "Limits per group"): the most
generous of their groups' that set one, else AGENT_DAILY_TOKEN_QUOTA / AGENT_MESSAGES_PER_MINUTE.
0 means unlimited, in a group as in the settings, so it beats any number. Read at each run start
(no cache): a change in the admin applies to the next message without a restart."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from chat.models import GroupLimits


@dataclass(frozen=True)
class Limits:
    """One user's limits; 0: none."""

    daily_token_quota: int
    messages_per_minute: int


def most_generous(values: Iterable[int | None], default: int) -> int:
    """The most generous of the values set (None: not set; 0: unlimited), else `default`."""
    chosen = [v for v in values if v is not None]
    if not chosen:
        return default
    return 0 if 0 in chosen else max(chosen)


def limits_for_users(*, user_ids: Iterable[Any]) -> dict[Any, Limits]:
    """{user id: Limits} for each of `user_ids`, in one query whatever the number of users and
    groups: the rows of the groups they belong to that carry limits."""
    ids = set(user_ids)
    quotas: dict[Any, list[int | None]] = {pk: [] for pk in ids}
    rates: dict[Any, list[int | None]] = {pk: [] for pk in ids}
    rows = GroupLimits.objects.filter(group__user__in=ids).values_list(
        "group__user", "daily_token_quota", "messages_per_minute"
    )
    for user_id, quota, rate in rows:
        quotas[user_id].append(quota)
        rates[user_id].append(rate)
    return {
        pk: Limits(
            daily_token_quota=most_generous(quotas[pk], settings.AGENT_DAILY_TOKEN_QUOTA),
            messages_per_minute=most_generous(rates[pk], settings.AGENT_MESSAGES_PER_MINUTE),
        )
        for pk in ids
    }


def limits_for_user(*, user) -> Limits:
    return limits_for_users(user_ids=[user.pk])[user.pk]
