"""What the Redis client raises when it cannot reach its server (refused, reset, timed out): the
channel layer, the sign-in state and the token lock-out all carry on without it."""

from __future__ import annotations

from redis.exceptions import RedisError

REDIS_AWAY = (RedisError, OSError)
