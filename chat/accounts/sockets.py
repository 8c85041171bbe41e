"""The WebSockets and SSE streams open in this process, per user, counted together: one cap,
AGENT_MAX_SOCKETS_PER_USER, for both (a per-process cap, as the sockets' always was: each
process counts what it serves). A socket past it is closed 4429 (chat.doors.socket.consumers), a
stream answered 429 (chat.doors.sse.streams). chat.ops.metrics publishes the sockets' total. Kept
apart from the consumer so that the metrics, which the runtime imports, need not import the
socket edge."""

from __future__ import annotations

from collections import Counter

from django.conf import settings

SOCKET, STREAM = "socket", "stream"

_open: Counter = Counter()  # per user: sockets and streams together
_kinds: Counter = Counter()  # per kind, for the metrics


class Seat:
    """One place under a user's cap, given back once (release)."""

    __slots__ = ("user_id", "kind")

    def __init__(self, user_id, kind: str) -> None:
        self.user_id, self.kind = user_id, kind
        _open[user_id] += 1
        _kinds[kind] += 1

    def release(self) -> None:
        if self.user_id is None:
            return
        user_id, self.user_id = self.user_id, None
        _kinds[self.kind] -= 1
        _open[user_id] -= 1
        if _open[user_id] <= 0:
            del _open[user_id]


def take(user_id, kind: str) -> Seat | None:
    """A place for one more socket or stream of the user; None past the cap."""
    limit = settings.AGENT_MAX_SOCKETS_PER_USER
    if limit and _open[user_id] >= limit:
        return None
    return Seat(user_id, kind)


def user_sockets(user_id) -> int:
    """The user's open sockets and streams in this process."""
    return _open[user_id]


def open_socket_count() -> int:
    """Open sockets in this process."""
    return _kinds[SOCKET]
