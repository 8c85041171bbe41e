"""Human approval of tool calls (docs/protocol.md, "Approvals"): the interrupt of the seeds' design.

An `ApprovalPolicy` names the tools whose calls wait for a person (fnmatch patterns),
how long a request stays open, and where the answers come from (`Answers`, which the
server implements with its channel layer: chat.runtime.approvals). The loop asks before
a gated call starts: it emits an `approval_request` for every gated call of the model's
turn, waits for them together (the model's stream is complete by then: no connection is
held), emits each `approval_result` as it comes, and then starts the approved calls; a
denied or expired call gets a `tool_end` error the model reads, and the run goes on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Any, Protocol

from .events import AgentEvent, ApprovalRequestEvent, ApprovalResultEvent
from .tools import error_result
from .turns import ToolCall

APPROVED = "approved"
DENIED = "denied"
EXPIRED = "expired"


@dataclass(frozen=True)
class Decision:
    decision: str  # APPROVED | DENIED | EXPIRED
    reason: str = ""

    @property
    def approved(self) -> bool:
        return self.decision == APPROVED


class Answers(Protocol):
    """Where a run's answers come from."""

    def expect(self, tool_call_ids: Sequence[str]) -> dict[str, asyncio.Future[Decision]]:
        """A future per call, each resolved by the first answer to it. Registered before the
        requests are emitted, so that no answer can arrive before its future exists."""
        ...

    def forget(self, tool_call_ids: Sequence[str]) -> None:
        """The wait is over (answered, expired or stopped): later answers are refused."""
        ...


@dataclass(frozen=True)
class ApprovalPolicy:
    patterns: tuple[str, ...]
    timeout: float  # seconds a request stays open; then it expires as denied
    answers: Answers

    def needs_approval(self, tool_name: str) -> bool:
        return any(fnmatchcase(tool_name, pattern) for pattern in self.patterns)


class Unattended:
    """The answers of a run nobody watches (docs/protocol.md, "OpenAI-compatible endpoint"): every
    call that needs approval is denied at once, and the model reads a tool error."""

    REASON = "no one can approve tool calls made through the OpenAI-compatible endpoint"

    def __init__(self, reason: str = REASON) -> None:
        self.reason = reason  # the door's (docs/protocol.md: the MCP server's says MCP)

    def expect(self, tool_call_ids: Sequence[str]) -> dict[str, asyncio.Future[Decision]]:
        futures: dict[str, asyncio.Future[Decision]] = {}
        for call_id in tool_call_ids:
            future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
            future.set_result(Decision(DENIED, self.reason))
            futures[call_id] = future
        return futures

    def forget(self, tool_call_ids: Sequence[str]) -> None:
        pass


def denial_result(decision: Decision, *, timeout: float) -> str:
    """The tool result the model reads for a call that was not approved."""
    if decision.decision == EXPIRED:
        return error_result(f"denied: nobody approved the call within {timeout:g} s")
    return error_result(f"denied by the user: {decision.reason or 'no reason given'}")


def _iso(moment: float) -> str:
    value = datetime.fromtimestamp(moment, UTC)
    return f"{value:%Y-%m-%dT%H:%M:%S}.{value.microsecond // 1000:03d}Z"


async def ask(
    policy: ApprovalPolicy, calls: Sequence[ToolCall], emit: Callable[[AgentEvent], None]
) -> dict[str, Decision]:
    """Ask for every call at once and wait for the answers; {call id: decision}. Cancelled
    (the run is stopped), the calls still open are denied before the cancellation goes on, so
    that every request of the log has its result."""
    ids = list(dict.fromkeys(call.id for call in calls))
    futures = policy.answers.expect(ids)
    expires_at = _iso(time.time() + policy.timeout)
    for call in calls:
        emit(ApprovalRequestEvent(call.id, call.name, call.arguments, expires_at))
    decisions: dict[str, Decision] = {}

    def settle(call_id: str, decision: Decision) -> None:
        decisions[call_id] = decision
        emit(ApprovalResultEvent(call_id, decision.decision, decision.reason))

    deadline = asyncio.get_running_loop().time() + policy.timeout
    try:
        while len(decisions) < len(ids):
            open_futures = {futures[i] for i in ids if i not in decisions}
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining > 0:
                await asyncio.wait(open_futures, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            for call_id in ids:
                future = futures[call_id]
                if call_id not in decisions and future.done():
                    settle(call_id, future.result())
            if remaining <= 0:
                for call_id in ids:
                    if call_id not in decisions:
                        settle(call_id, Decision(EXPIRED, f"no answer within {policy.timeout:g} s"))
    except asyncio.CancelledError:
        for call_id in ids:
            if call_id not in decisions:
                settle(call_id, Decision(DENIED, "the run was stopped"))
        raise
    finally:
        policy.answers.forget(ids)
    return decisions


# How a tool call ended, for whoever counts them: a call not approved is neither a success nor
# a failure of its tool (its tool_end carries isError, for the model and the timeline).
OK = "ok"
ERROR = "error"


def call_outcome(*, is_error: bool, decision: str | None = None) -> str:
    """ok, error, or for a call whose approval request was not granted its decision
    (denied, expired); `decision` is its approval_result's, None when it was not asked."""
    if decision in (DENIED, EXPIRED):
        return decision
    return ERROR if is_error else OK


def open_requests(events: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The `approval_request`s of one run's events (in order) that no `approval_result` answers
    yet. Followed in order: a model may reuse a call id in a later round."""
    waiting: dict[str, Mapping[str, Any]] = {}
    for event in events:
        kind = event.get("type")
        if kind == "approval_request":
            waiting[event["toolCallId"]] = event
        elif kind == "approval_result":
            waiting.pop(event.get("toolCallId", ""), None)
    return list(waiting.values())
