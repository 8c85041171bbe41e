"""Failed API token attempts (docs/protocol.md, "API tokens", "Failed attempts"): counted per
client address and per token prefix, so that a client guessing tokens is stopped without
locking out the other programs behind the same address (one NAT, one office, one CI runner).

A failure is counted against its address, and also against its prefix (the `hint`, `as_` and
four characters) when a token with that prefix exists: a wrong secret under a real token's
prefix is someone aiming at that token. Within LOGIN_LOCKOUT_MINUTES:

- an address past ADDRESS_LIMIT_FACTOR x LOGIN_FAILURE_LIMIT failures gets `429` for every
  token that does not hold, without its attempt counting further; a token that holds is still
  taken from it. A guesser learns nothing more (a guessed 256-bit secret never holds), and its
  neighbours' tokens keep working. The limit is higher than a prefix's because many clients
  share an address.
- a prefix past LOGIN_FAILURE_LIMIT failures gets `429` for every token under it, the right one
  too and from any address, before it is looked up: attempts at one token from many addresses
  (which no address count sees) stop there. Locking a token out this way takes its first
  characters, which only its user and staff see.

The counts live in the cache that every process shares when REDIS_URL is set.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from django.conf import settings

from chat.accounts.process_cache import cache
from chat.accounts.tokens import tokens_users
from chat.models import ApiToken
from chat.redis_errors import REDIS_AWAY

logger = logging.getLogger(__name__)

ADDRESS_LIMIT_FACTOR = 5
# A token's hint: what a presented value is counted under, once a token with it exists.
_PREFIX = re.compile(r"as_[A-Za-z0-9_-]{4}")


@dataclass(frozen=True)
class TokenCheck:
    """The user and token a presented value signs in, or neither; `locked` when it was refused
    by a lock-out (`429`) rather than for not holding (`401`)."""

    user: object | None = None
    token: ApiToken | None = None
    locked: bool = False


def token_check(value: str, address: str) -> TokenCheck:
    return token_checks([(value, address)])[0]


def token_checks(asked: list[tuple[str, str]]) -> list[TokenCheck]:
    """token_check of each (presented value, client address), as made alone, with one read of the
    failure counts and one query of the tokens for all (chat.accounts.token_checks)."""
    limit = settings.LOGIN_FAILURE_LIMIT
    prefixes = [value[:7] if _PREFIX.match(value) else None for value, _ in asked]
    failures = _failures_many([(address, prefix) for (_, address), prefix in zip(asked, prefixes)])
    locked = [limit > 0 and by_prefix >= limit for _, by_prefix in failures]
    found = iter(tokens_users([value for (value, _), out in zip(asked, locked) if not out]))
    checks = []
    for (_, address), prefix, (by_address, _), out in zip(asked, prefixes, failures, locked):
        if out:
            checks.append(TokenCheck(locked=True))
            continue
        user, token = next(found)
        if user is not None:
            checks.append(TokenCheck(user, token))
        elif limit <= 0:
            checks.append(TokenCheck())
        elif by_address >= limit * ADDRESS_LIMIT_FACTOR:
            checks.append(TokenCheck(locked=True))
        else:
            known = prefix is not None and ApiToken.objects.filter(hint=prefix).exists()
            _count(_address_key(address), *([_prefix_key(prefix)] if known and prefix else []))
            checks.append(TokenCheck())
    return checks


def _failures_many(asked: list[tuple[str, str | None]]) -> list[tuple[int, int]]:
    """_failures of each (address, prefix), in one read of the cache; none counted when there is
    no limit."""
    if settings.LOGIN_FAILURE_LIMIT <= 0:
        return [(0, 0)] * len(asked)
    keys = {_address_key(address) for address, _ in asked} | {_prefix_key(p) for _, p in asked if p}
    try:
        counts = cache.get_many(list(keys))
    except REDIS_AWAY:
        logger.warning("failed token attempts are not counted: the cache does not answer")
        counts = {}
    return [
        (counts.get(_address_key(address), 0), counts.get(_prefix_key(prefix), 0) if prefix else 0)
        for address, prefix in asked
    ]


def _address_key(address: str) -> str:
    return f"token-failures:{address}"


def _prefix_key(prefix: str) -> str:
    return f"token-failures:prefix:{prefix}"


def _failures(address: str, prefix: str | None) -> tuple[int, int]:
    keys = [_address_key(address), *([_prefix_key(prefix)] if prefix else [])]
    try:
        counts = cache.get_many(keys)
    except REDIS_AWAY:
        # The counts live in Redis (shared by the processes): while it is away tokens still work,
        # uncounted, rather than every program getting a 500.
        logger.warning("failed token attempts are not counted: the cache does not answer")
        return 0, 0
    return counts.get(keys[0], 0), counts.get(keys[1], 0) if prefix else 0


def _count(*keys: str) -> None:
    window = int(settings.AXES_COOLOFF_TIME.total_seconds())
    try:
        for key in keys:
            cache.add(key, 0, timeout=window)
            try:
                cache.incr(key)
            except ValueError:  # expired between add and incr: a new window
                cache.set(key, 1, timeout=window)
    except REDIS_AWAY:
        logger.warning("a failed token attempt is not counted: the cache does not answer")


def address_locked(address: str) -> bool:
    """Whether a trigger's hook refuses every call from the address (docs/protocol.md, "Triggers"):
    its failed secrets and API tokens reached LOGIN_FAILURE_LIMIT in LOGIN_LOCKOUT_MINUTES."""
    limit = settings.LOGIN_FAILURE_LIMIT
    return limit > 0 and _failures(address, None)[0] >= limit


def address_failed(address: str) -> None:
    """A hook call from the address gave no valid secret: counted with its failed API tokens."""
    if settings.LOGIN_FAILURE_LIMIT > 0:
        _count(_address_key(address))
