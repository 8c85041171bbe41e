"""The sockets open in this process, per user: the consumer counts them (AGENT_MAX_SOCKETS_PER_USER
is a per-process cap) and chat.ops.metrics publishes their total. Kept apart from the consumer so
that the metrics, which the runtime imports, need not import the socket edge."""

from __future__ import annotations

from collections import Counter

_open: Counter = Counter()


def user_sockets(user_id) -> int:
    return _open[user_id]


def count_in(user_id) -> None:
    _open[user_id] += 1


def count_out(user_id) -> None:
    _open[user_id] -= 1
    if _open[user_id] <= 0:
        del _open[user_id]


def open_socket_count() -> int:
    """Open sockets in this process."""
    return sum(_open.values())
