"""The persisted event frame (PROTOCOL.md section 4): an event's JSON plus `seq` and `runId`.

Every frame that leaves the event log is built by `event_frame`: when events are
stored (services), read back (selectors, Event.to_frame) or replayed as memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Required, TypedDict


class EventFrame(TypedDict, total=False):
    type: Required[str]
    seq: Required[int]
    runId: Required[str]
    # user_message, text, thinking
    content: str
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
    # reference
    references: list[dict[str, str]]


def event_frame(payload: Mapping[str, Any], *, seq: int, run_id: Any) -> EventFrame:
    """The frame of a stored event whose payload (its JSON without seq and runId) is given."""
    return {**payload, "seq": seq, "runId": str(run_id)}  # type: ignore[typeddict-item]
