"""The data the runtime passes to the event log: what a run start asks for, a batch of events
with the rows that go with them, a run's outcome, a take-over's result. Plain frozen
dataclasses, so that the runtime and the event log share shapes without sharing modules."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chat.agent.approval import OK
from chat.agent.turns import ModelOptions
from chat.eventlog.frames import EventFrame
from chat.models import (
    Conversation,
    Run,
)


@dataclass(frozen=True)
class ToolRecordData:
    tool_call_id: str
    tool_name: str
    arguments: str
    result: str
    is_error: bool
    started_at: datetime
    duration_ms: int
    outcome: str = OK  # chat.agent.approval.call_outcome
    offered: bool = True  # False: the model called a tool its run did not offer


@dataclass(frozen=True)
class ModelCallData:
    """A ModelCall row to be (chat.agent.trace.ModelCallRecord, its time made a datetime)."""

    iteration: int
    attempt: int
    started_at: datetime
    first_token_ms: int | None
    duration_ms: int
    message_count: int
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    finish_reason: str
    error: str
    request_messages: list[dict[str, Any]] | None = None
    usage_estimated: bool = False
    purpose: str = "agent"


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended. Its tokens are not here: they are summed from its ModelCall rows, which
    count every attempt, those of a process that died before a resume included."""

    status: str
    iterations: int = 0
    error: str = ""


@dataclass(frozen=True)
class EventBatch:
    """A run's events to store together, with the tool records that ended in them, the model
    calls made meanwhile and, for the batch holding `complete`, the run's outcome."""

    conversation_id: Any
    run_id: Any
    payloads: list[dict[str, Any]]
    tool_records: Sequence[ToolRecordData] = ()
    outcome: RunOutcome | None = None
    model_calls: Sequence[ModelCallData] = ()


@dataclass(frozen=True)
class Message:
    """A message to start a run with: a user's message, an edit or a regenerate. Every door asks
    for one (chat.runs.requests.StartRun is one), the start stores it (chat.runs.starts)."""

    conversation: Conversation
    user: Any
    content: str  # "" for a regenerate: it repeats the content of the message it names
    # At most one of these, each the seq of a user_message of the conversation: the turn a
    # message follows (None: the newest), the message an edit replaces, the message a regenerate
    # answers again (docs/protocol.md, "Versions: edits, regenerated answers and branches").
    parent_seq: int | None = None
    edits: int | None = None
    regenerates: int | None = None
    # The user_message's `attachments` (chat.conversations.uploads.attachments_resolve): [{"path", "size"}].
    # An edit or regenerate keeps those of the message it replaces instead.
    attachments: tuple[dict[str, Any], ...] = ()
    # The user_message's `history`: the earlier messages of an OpenAI-compatible request.
    history: tuple[dict[str, Any], ...] = ()
    # An OpenAI-compatible request's temperature and max_tokens (None: the agent's own options).
    options: ModelOptions | None = None
    # The queueId of the waiting message this starts (docs/protocol.md, "Queued messages").
    queue_id: str | None = None
    # The schedule whose slot this starts (docs/protocol.md, "Schedules"): the Run's and the
    # user_message's `scheduleId`, and `via: "schedule"`.
    schedule_id: Any = None
    # The trigger whose call starts this (docs/protocol.md, "Triggers"): the Run's and the
    # user_message's `triggerId`, and `via: "trigger"`.
    trigger_id: Any = None
    # The API token that sent it (its run counts against that token's budget); None: a session.
    api_token_id: int | None = None
    # The door that started the run and what it was asked besides the message (the user_message's
    # `via` and `request`, docs/protocol.md, "Responses API").
    via: str | None = None
    request: dict[str, Any] | None = None
    # A compaction run (docs/protocol.md, "Compaction", on demand), of the branch ending at the
    # user_message `parent_seq` (None: the newest): no user_message is stored.
    compact: bool = False

    @property
    def named_seq(self) -> int | None:
        return next((s for s in (self.parent_seq, self.edits, self.regenerates) if s is not None), None)

    @property
    def follows_newest(self) -> bool:
        """A new message after the newest turn, not an edit, a regenerate or a branch."""
        return self.named_seq is None


@dataclass(frozen=True)
class RunStart:
    """One message to start a run for, as the start queue hands it over (see runs_start)."""

    message: Message
    model: str
    worker: str
    # The Run's id, chosen before it is stored (a head start's: chat.runtime.head_start); None: a new one.
    run_id: uuid.UUID | None = None
    # When a head start began the run, before it was stored: its started_at (None: when stored).
    began_at: datetime | None = None


@dataclass(frozen=True)
class Interruption:
    run: Run
    frames: list[EventFrame]
    resumed: bool  # the run goes on under `worker`; else it is complete `interrupted`
