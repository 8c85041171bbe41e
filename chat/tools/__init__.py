"""Built-in tools, one module each, named as PROTOCOL.md section 5 names them."""

from __future__ import annotations

from collections.abc import Iterable

from chat.agent.tools import Tool, ToolRegistry, make_tool

from .calculator import calculator
from .clock import current_time

BUILTIN_TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        make_tool(calculator),
        make_tool(current_time),
    )
}


def build_registry(names: Iterable[str]) -> ToolRegistry:
    """The enabled built-ins, in the order given; unknown names are caught by a system check."""
    return ToolRegistry(BUILTIN_TOOLS[name] for name in names if name in BUILTIN_TOOLS)
