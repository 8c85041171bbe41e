"""Helpers shared by the agent-core tests."""

from __future__ import annotations

import json
from typing import Any

from chat.agent import AgentRun, ToolRegistry
from chat.agent.tools import ToolError


async def run_events(run: AgentRun) -> list[dict[str, Any]]:
    """Every event of a run as protocol JSON, checked against the invariants of docs/protocol.md, "Events"."""
    events = [event.to_dict() async for event in run]
    check_invariants(events)
    return events


def check_invariants(events: list[dict[str, Any]]) -> None:
    """complete last and exactly once; every tool_start followed later by exactly one tool_end with its id.

    A model may reuse an id in a later round (the demo model does), so an id is
    checked while it is open, from its tool_start to its tool_end.
    """
    kinds = [e["type"] for e in events]
    assert kinds.count("complete") == 1, kinds
    assert kinds[-1] == "complete", kinds
    open_calls: dict[str, str] = {}
    asked: dict[str, str] = {}  # approval requests (docs/protocol.md, "Approvals")
    for event in events:
        if event["type"] == "approval_request":
            asked[event["toolCallId"]] = event["toolName"]
        elif event["type"] == "approval_result":
            name = asked.pop(event["toolCallId"])
            if event["decision"] != "approved":  # ends with a tool_end and no tool_start
                open_calls[event["toolCallId"]] = name
        elif event["type"] == "tool_start":
            assert event["toolCallId"] not in open_calls, f"tool_start twice for {event['toolCallId']}"
            open_calls[event["toolCallId"]] = event["toolName"]
        elif event["type"] == "tool_end":
            call_id = event["toolCallId"]
            assert call_id in open_calls, f"tool_end without an open tool_start: {call_id}"
            assert open_calls.pop(call_id) == event["toolName"]
    assert not open_calls, f"tool_start without tool_end: {set(open_calls)}"
    assert not asked, f"approval_request without approval_result: {set(asked)}"


def sample_tools() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @registry.tool
    async def mul(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    @registry.tool
    async def explode() -> str:
        """Always fails."""
        raise RuntimeError("kaboom")

    @registry.tool
    async def refuse() -> str:
        """Always refuses."""
        raise ToolError("not today")

    return registry


def without_durations(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events with durationMs dropped (it depends on the clock); asserted separately where it matters."""
    out = []
    for event in events:
        if event["type"] == "tool_end":
            assert isinstance(event["durationMs"], int) and event["durationMs"] >= 0
            event = {k: v for k, v in event.items() if k != "durationMs"}
        out.append(event)
    return out


def error(message: str) -> str:
    return json.dumps({"error": message})
