"""Which text is the answer: the one place that rule is coded (docs/protocol.md, "Events").

A model call that fails may already have streamed text. That text stays in the
event log (the user saw it) but is not part of the answer: the retry answers
anew. Likewise the text of an attempt whose process died, when another process
resumes the run. The events of such an attempt are the text and thinking deltas
right before the error that ends it: an attempt that got as far as a tool call
did not fail (tool calls come only from a finished model call).

The agent core follows its own events with `Answer`; the server follows the
stored events with it (the model's memory, `chat/eventlog/history.py`) and writes its
verdict into the ending error as `discards` (the seq of the first discarded
text event), which is what clients read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .events import ErrorCode

DELTA_TYPES = frozenset({"text", "thinking"})
# Events stored among a run's by someone else, at any moment (a user's steer, the queue's): they
# end no attempt, which a model call's deltas may straddle.
FROM_OUTSIDE = frozenset({"steer", "queued", "unqueued"})


def ends_failed_attempt(event: Mapping[str, Any]) -> bool:
    """An error after which the model is called anew (or the run fails) and the attempt's text is
    dropped: a failed model call, or a run resumed after its process died."""
    return event.get("type") == "error" and (
        event.get("code") == ErrorCode.LLM_CALL_FAILED
        or (event.get("code") == ErrorCode.INTERRUPTED and bool(event.get("resumed")))
    )


class Answer:
    """Follows one run's events in order: the answer so far, and what a failed attempt discards."""

    def __init__(self) -> None:
        self._kept: list[str] = []
        self._attempt: list[Mapping[str, Any]] = []  # text events of the model call under way

    def add(self, event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """Follow one more event; returns the text events it discards (those of the attempt it ends)."""
        kind = event.get("type")
        if kind == "text":
            self._attempt.append(event)
        elif kind in DELTA_TYPES or kind in FROM_OUTSIDE:
            pass
        elif ends_failed_attempt(event):
            discarded, self._attempt = self._attempt, []
            return discarded
        else:
            self._kept += [e["content"] for e in self._attempt]
            self._attempt = []
        return []

    @property
    def attempt(self) -> list[Mapping[str, Any]]:
        """The text events an attempt failing now would discard."""
        return list(self._attempt)

    @property
    def text(self) -> str:
        return "".join(self._kept) + "".join(e["content"] for e in self._attempt)


def without_discarded(events: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """One run's events in order, less the text of its failed attempts."""
    answer = Answer()
    dropped: set[int] = set()
    for event in events:
        dropped.update(id(e) for e in answer.add(event))
    return [e for e in events if id(e) not in dropped]
