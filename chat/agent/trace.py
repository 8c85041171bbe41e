"""Facts about each model call attempt, for whoever watches a run (the run inspector's store,
metrics): not events, which are what the user sees, but the measurements behind them.

    agent = Agent(model, observers=[records.append])   # each attempt, failed ones included

An observer is called synchronously from the run's task as each attempt ends: it must be
quick and must not raise (an observer that raises is logged and the run goes on).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


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


# The error of an attempt cut by the run's cancellation: not a failure of the model.
CANCELLED = "cancelled"


ModelCallObserver = Callable[[ModelCallRecord], None]
