"""One round of tool calls of a run: the calls that need the user's approval asked first, then
every approved call run through the tool interceptors, in parallel up to the agent's
`tool_concurrency`, each `tool_start` ended by exactly one `tool_end` (a stopped run included),
results capped at `max_tool_result_chars`."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from . import approval
from .events import AgentEvent, ToolEndEvent, ToolStartEvent
from .hooks import AgentState, ToolCallRequest, ToolOutcome, chain_tool
from .tools import ToolContext, ToolError, ToolRecord, ToolRegistry, error_result, result_to_text
from .turns import ToolCall

TRUNCATION_MARKER = "\n[... truncated: {omitted} more characters]"


class ToolRound:
    """The tool rounds of one run. `agent` is its Agent (chat.agent.loop), read for its limits,
    approval policy and interceptors; `tools` are the run's tools, its sources' included once
    they are known."""

    def __init__(self, agent: Any, *, emit: Callable[[AgentEvent], None], context: ToolContext) -> None:
        self.agent = agent
        self.tools: ToolRegistry = agent.tools
        self._emit = emit
        self._context = context
        self._tool_calls = 0

    async def run(self, calls: Sequence[ToolCall], state: AgentState) -> list[dict[str, Any]]:
        """Run one round's calls (approvals first, then in parallel up to the agent's
        tool_concurrency); the tool messages for the model, in the calls' order."""
        agent = self.agent
        limit = asyncio.Semaphore(agent.tool_concurrency)
        outcomes: dict[int, ToolOutcome] = {}
        refused = await self._approve(calls)
        began = time.monotonic()
        for call in calls:
            if call.id not in refused:
                self._emit(ToolStartEvent(call.name, call.id, call.arguments))
        # After the starts: a round's calls are all known before its first end (chat.eventlog.history).
        for index, call in enumerate(calls):
            if call.id in refused:
                outcomes[index] = refused[call.id]
                state.tool_records.append(
                    ToolRecord(call.id, call.name, call.arguments, refused[call.id].result, True, time.time(), 0)
                )
                self._emit(ToolEndEvent(call.name, call.id, refused[call.id].result, True, 0))

        async def run_one(index: int, call: ToolCall) -> None:
            async with limit:
                started_at, t0 = time.time(), time.monotonic()
                outcome = await self._execute_tool(call, state)
                duration_ms = int((time.monotonic() - t0) * 1000)
            outcomes[index] = outcome
            state.tool_records.append(
                ToolRecord(
                    call.id, call.name, call.arguments, outcome.result, outcome.is_error, started_at, duration_ms
                )
            )
            self._emit(ToolEndEvent(call.name, call.id, outcome.result, outcome.is_error, duration_ms))

        try:
            async with asyncio.TaskGroup() as group:
                for index, call in enumerate(calls):
                    if index not in outcomes:
                        group.create_task(run_one(index, call))
        except asyncio.CancelledError:
            # Every tool_start gets its tool_end, even when the run is stopped mid-call.
            duration_ms = int((time.monotonic() - began) * 1000)
            for index, call in enumerate(calls):
                if index not in outcomes:
                    result = error_result("cancelled: the run was stopped before the tool finished")
                    self._emit(ToolEndEvent(call.name, call.id, result, True, duration_ms))
            raise
        return [
            {"role": "tool", "tool_call_id": call.id, "content": outcomes[index].result}
            for index, call in enumerate(calls)
        ]

    async def _approve(self, calls: Sequence[ToolCall]) -> dict[str, ToolOutcome]:
        """Ask the user about the calls that need approval; the outcomes of those not approved."""
        policy = self.agent.approval
        gated = [call for call in calls if policy is not None and policy.needs_approval(call.name)]
        if policy is None or not gated:
            return {}
        try:
            decisions = await approval.ask(policy, gated, self._emit)
        except asyncio.CancelledError:
            # No tool_start was emitted for them, but each is in the log (its request): end it.
            result = error_result("cancelled: the run was stopped before the call was approved")
            for call in gated:
                self._emit(ToolEndEvent(call.name, call.id, result, True, 0))
            raise
        return {
            call_id: ToolOutcome(approval.denial_result(decision, timeout=policy.timeout), is_error=True)
            for call_id, decision in decisions.items()
            if not decision.approved
        }

    async def _execute_tool(self, call: ToolCall, state: AgentState) -> ToolOutcome:
        """Run one call through the interceptors; every failure becomes an error outcome."""
        agent = self.agent
        tool = self.tools.get(call.name)
        timeout = (tool.timeout if tool and tool.timeout else None) or agent.tool_timeout
        self._tool_calls += 1
        if agent.max_tool_calls is not None and self._tool_calls > agent.max_tool_calls:
            return ToolOutcome(
                error_result(f"tool-call limit reached ({agent.max_tool_calls} per run); answer with what you have"),
                True,
            )

        async def innermost(request: ToolCallRequest) -> ToolOutcome:
            if tool is None:
                available = ", ".join(self.tools.names()) or "none"
                raise ToolError(f"unknown tool {request.call.name!r}; available tools: {available}")
            async with asyncio.timeout(timeout if timeout != math.inf else None):  # inf: unbounded
                value = await tool.run(request.call.arguments, request.context)
            return ToolOutcome(self._cap(result_to_text(value)))

        handler = chain_tool(agent.tool_interceptors, innermost)
        try:
            return await handler(ToolCallRequest(call, self._context))
        except ToolError as exc:
            return ToolOutcome(error_result(str(exc)), True)
        except TimeoutError:
            return ToolOutcome(error_result(f"{call.name} timed out after {timeout:g} s"), True)
        except Exception as exc:
            return ToolOutcome(error_result(f"{call.name} failed: {type(exc).__name__}: {exc}"), True)

    def _cap(self, text: str) -> str:
        limit = self.agent.max_tool_result_chars
        if len(text) <= limit:
            return text
        return text[:limit] + TRUNCATION_MARKER.format(omitted=len(text) - limit)
