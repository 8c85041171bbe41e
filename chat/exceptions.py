"""Why a write or a run start was refused. Each maps to one error code of docs/protocol.md
section 2 (frames) and to one HTTP status (chat.doors.api.api)."""

from __future__ import annotations


class RunInProgress(Exception):
    pass


class RateLimited(Exception):
    pass


class QuotaExceeded(Exception):
    """The user's tokens today (UTC) reached AGENT_DAILY_TOKEN_QUOTA."""


class QuotaBusy(QuotaExceeded):
    """Under a daily quota not used up yet, a run of the user's is in progress and may use it
    up: the next one waits for its end (the same error code, its own message)."""


class ConversationGone(Exception):
    """The conversation was deleted while something was writing to it."""


class AgentUnavailable(Exception):
    """The conversation's agent profile is disabled, or its user may no longer use it."""


class UnknownApproval(Exception):
    """An answer to an approval request the conversation never had."""


class ApprovalClosed(Exception):
    """An answer to an approval request that was answered, expired, or whose run ended."""


class NotAUserMessage(ValueError):
    """A message, edit or regenerate named a seq that is not a user_message of its conversation."""


class QueueFull(Exception):
    """The conversation holds AGENT_MAX_QUEUED waiting messages already."""


class NotQueued(Exception):
    """No waiting message of the conversation has that queueId."""
