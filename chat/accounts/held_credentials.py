"""The credential a long-lived connection (a WebSocket, a server-sent event stream) signed in
with, held for its life. An ended session or token is pushed to its connections at once
(chat.accounts.revocation); this re-check is the second line, for a push that got lost, so
seconds of staleness are fine, while a burst of messages costs one session or token lookup per
connection per window instead of one per frame, and the usual connect-then-message costs none
(the handshake has just checked). A socket's ping checks nothing (chat.doors.socket.consumers)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from chat.accounts.revocation import revokes, session_is_current
from chat.accounts.tokens import token_is_current

# How long a connection trusts its last check (read at each use: tests shorten it).
SESSION_RECHECK_SECONDS = 5.0


@dataclass
class HeldCredential:
    user_id: Any
    token_id: Any  # None for a session's connection
    session_key: str | None  # None for a token's connection
    checked_at: float = field(default_factory=time.monotonic)  # made when the handshake has just checked

    def due(self) -> bool:
        """Whether the last check is older than the window."""
        return time.monotonic() - self.checked_at >= SESSION_RECHECK_SECONDS

    def is_current(self) -> bool:
        """Whether the token or session still signs its user in. Queries: on the ORM thread."""
        if self.token_id is not None:
            return token_is_current(token_id=self.token_id, user_id=self.user_id)
        return session_is_current(session_key=self.session_key, user_id=self.user_id)

    def checked(self, valid: bool) -> bool:
        """Record a check's answer (a valid one opens a new window); the answer."""
        if valid:
            self.checked_at = time.monotonic()
        return valid

    def revoked_by(self, message: dict[str, Any]) -> bool:
        """Whether a revocation pushed to the user's group ends this credential."""
        return revokes(message, token_id=self.token_id, session_key=self.session_key)
