"""Helpers shared by the agent-core tests."""

from __future__ import annotations

import json
from typing import Any

from chat.agent import AgentRun, ToolRegistry
from chat.agent.tools import ToolError


async def run_events(run: AgentRun) -> list[dict[str, Any]]:
    """Every event of a run as protocol JSON, checked against PROTOCOL.md section 4's invariants."""
    events = [event.to_dict() async for event in run]
    check_invariants(events)
    return events


def check_invariants(events: list[dict[str, Any]]) -> None:
    """complete last and exactly once; every tool_start followed later by exactly one tool_end with its id."""
    kinds = [e["type"] for e in events]
    assert kinds.count("complete") == 1, kinds
    assert kinds[-1] == "complete", kinds
    started: dict[str, int] = {}
    ended: set[str] = set()
    for position, event in enumerate(events):
        if event["type"] == "tool_start":
            assert event["toolCallId"] not in started, f"tool_start twice for {event['toolCallId']}"
            started[event["toolCallId"]] = position
        elif event["type"] == "tool_end":
            call_id = event["toolCallId"]
            assert call_id in started, f"tool_end without tool_start: {call_id}"
            assert call_id not in ended, f"tool_end twice for {call_id}"
            assert events[started[call_id]]["toolName"] == event["toolName"]
            ended.add(call_id)
    assert ended == set(started), f"tool_start without tool_end: {set(started) - ended}"


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
