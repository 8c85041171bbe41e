"""Facts about each model call attempt, for whoever watches a run (the run inspector's store,
metrics): not events, which are what the user sees, but the measurements behind them.

    agent = Agent(model, observers=[records.append])   # each attempt, failed ones included

An observer is called synchronously from the run's task as each attempt ends: it must be
quick and must not raise (an observer that raises is logged and the run goes on).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .estimate import estimate_usage
from .turns import ModelRequest, ModelTurn, Usage

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ModelCallRecord:
    iteration: int  # the loop's round, from 1
    attempt: int  # 1 for the first try of the round, 2 for its first retry, ...
    started_at: float  # wall clock (time.time()) when the request was sent
    first_token_ms: int | None  # until the first text or thinking delta; None when none streamed (tool calls only)
    duration_ms: int
    message_count: int  # messages sent, system prompt included
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    finish_reason: str = ""  # empty for a failed attempt
    error: str = ""  # why the attempt failed; empty when it succeeded
    # The request's messages, only when the agent was asked to keep them (trace_requests).
    messages: list[dict[str, Any]] | None = None
    # The tokens are an estimate (chat.agent.estimate): the call was cut (error CANCELLED)
    # before the endpoint reported its usage.
    estimated: bool = False
    # Why the call was made: "agent" for the loop's rounds, "compaction" for a summary
    # (chat.agent.compaction), "title" for a conversation's title (chat.agent.titles).
    purpose: str = "agent"


# The error of an attempt cut by the run's cancellation: not a failure of the model.
CANCELLED = "cancelled"


ModelCallObserver = Callable[[ModelCallRecord], None]


def attempt_record(
    request: ModelRequest,
    *,
    iteration: int,
    attempt: int,
    started_at: float,
    t0: float,
    first_delta_at: float | None = None,
    received: str = "",
    turn: ModelTurn | None = None,
    error: str = "",
    keep_messages: bool = False,
    purpose: str = "agent",
) -> ModelCallRecord:
    """The record of one attempt that began at `started_at` (wall clock) and `t0` (monotonic) and
    ended now. A cancelled attempt counts an estimate of what it spent (chat.agent.estimate)."""
    usage, estimated = (turn.usage if turn else None) or Usage(), False
    if error == CANCELLED:
        usage = estimate_usage(request.messages, request.tools, received)
        estimated = True
    return ModelCallRecord(
        iteration=iteration,
        attempt=attempt,
        started_at=started_at,
        first_token_ms=None if first_delta_at is None else int((first_delta_at - t0) * 1000),
        duration_ms=int((time.monotonic() - t0) * 1000),
        message_count=len(request.messages),
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
        finish_reason=(turn.finish_reason or "") if turn else "",
        error=error,
        messages=list(request.messages) if keep_messages else None,
        estimated=estimated,
        purpose=purpose,
    )


def notify(observers: Sequence[ModelCallObserver], record: ModelCallRecord) -> None:
    for observer in observers:
        try:
            observer(record)
        except Exception:  # watching a run must never break it
            logger.exception("a model call observer failed")
