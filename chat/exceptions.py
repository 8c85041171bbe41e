"""Why a write or a run start was refused. Each maps to one error code of docs/protocol.md
section 2 (frames) and to one HTTP status (chat.doors.api.api)."""

from __future__ import annotations


class RunInProgress(Exception):
    pass


class RateLimited(Exception):
    pass


class QuotaExceeded(Exception):
    """A budget that applies to the start has no room (docs/protocol.md, "Budgets"): its used
    reached its limit. `retry_after` seconds until every refusing budget has room, `resets_at`
    (ISO 8601 UTC) then, `budget` the refusing budget's object (GET /api/usage/'s)."""

    def __init__(self, message: str = "", *, retry_after: int = 1, resets_at: str = "", budget: dict | None = None):
        super().__init__(message)
        self.retry_after = retry_after
        self.resets_at = resets_at
        self.budget = budget


class QuotaBusy(QuotaExceeded):
    """A budget not used up yet is filled by the reservations of runs in progress: the start
    waits for them to settle (the same error code, its own message)."""


class ConversationGone(Exception):
    """The conversation was deleted while something was writing to it."""


class AgentUnavailable(Exception):
    """The conversation's agent profile is disabled, or its user may no longer use it."""


class UnknownApproval(Exception):
    """An answer to an approval request the conversation never had."""


class ApprovalClosed(Exception):
    """An answer to an approval request that was answered, expired, or whose run ended."""


class NothingToCompact(Exception):
    """A compaction run asked for a branch with no turn to summarize beyond the ones it keeps."""


class NotAUserMessage(ValueError):
    """A message, edit or regenerate named a seq that is not a user_message of its conversation."""


class QueueFull(Exception):
    """The conversation holds AGENT_MAX_QUEUED waiting messages already."""


class NotQueued(Exception):
    """No waiting message of the conversation has that queueId."""
