"""The persisted event frame (docs/protocol.md, "Events"): an event's JSON plus `seq`, `runId` and `ts`.

Every frame that leaves the event log is built by `event_frame`: when events are
stored (services), read back (selectors, Event.to_frame) or replayed as memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Required, TypedDict


class EventFrame(TypedDict, total=False):
    type: Required[str]
    seq: Required[int]
    runId: Required[str | None]  # None: `queued`, `unqueued` (the conversation's, not a run's)
    ts: Required[str]  # when the event was stored: its row's created_at (see frame_time)
    # user_message, text, thinking
    content: str
    # user_message: its place among the versions (docs/protocol.md, "Versions: edits, regenerated answers and branches")
    parentSeq: int | None
    edits: int
    regenerates: int
    # tool_start, tool_end
    toolName: str
    toolCallId: str
    arguments: str
    result: str
    isError: bool
    durationMs: int
    # error
    code: str
    message: str
    detail: str
    resumed: bool  # error INTERRUPTED: the run goes on (section 9)
    discards: int  # error ending a failed attempt: seq of the first text event it takes out of the answer
    # complete
    status: str
    usage: dict[str, int]  # and durationMs
    # reference
    references: list[dict[str, str]]
    # every event of a child run
    parentRunId: str
    parentToolCallId: str


def frame_time(moment: datetime) -> str:
    """`ts` of an event stored at `moment`: ISO 8601 UTC to the millisecond. Derived from the stored
    time only, so that the live frame and every replay of it say the same."""
    moment = moment.astimezone(UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


# Every event of a child run carries it (docs/protocol.md, "Sub-agents"): the run whose delegate call
# started it. Such events are never part of the conversation's turns nor of any model's memory.
CHILD_KEY = "parentRunId"

# The events of the conversation rather than of a run (docs/protocol.md, "Queued messages"):
# their runId is null, also when stored in a run's batch (the steers a run leaves at its end).
RUNLESS = frozenset({"queued", "unqueued"})


def event_frame(payload: Mapping[str, Any], *, seq: int, run_id: Any, ts: str) -> EventFrame:
    """The frame of a stored event whose payload (its JSON without seq, runId and ts) is given;
    `ts` is frame_time of its row's created_at (formatted once for a batch that shares it)."""
    run = None if run_id is None else str(run_id)
    return {**payload, "seq": seq, "runId": run, "ts": ts}  # type: ignore[typeddict-item]


def sync_frame(*, last_seq: int, run: Any, pending: list[str], queue: list[str], steers: list[str]) -> dict[str, Any]:
    """The `sync` frame (docs/protocol.md, "The WebSocket"): the last seq sent, the run in progress
    (None: none), its approval requests still waiting and the messages waiting for it (their
    queueIds, in the order they will start) and the steers its run has not taken in yet, as every
    door that replays says it."""
    return {
        "type": "sync",
        "lastSeq": last_seq,
        "running": run is not None,
        "runId": str(run.pk) if run else None,
        "pendingApprovals": pending,
        "queue": queue,
        "pendingSteers": steers,
    }
