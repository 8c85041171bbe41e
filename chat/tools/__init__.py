"""Built-in tools, one module each, named as docs/tools.md names them, and their confinement
(confine.py, removal.py, sandbox.py, netguard.py). Django-free: see docs/architecture.md,
"chat/tools/ and chat/mcp/"."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import replace

from chat.agent.tools import Tool, ToolRegistry, make_tool
from chat.tools.bash import bash
from chat.tools.calculator import calculator
from chat.tools.clock import current_time
from chat.tools.fetch import fetch_url
from chat.tools.files import list_files, read_file, write_file
from chat.tools.skills import load_skill, read_skill_file
from chat.tools.web_search import web_search

BUILTIN_TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        make_tool(calculator),
        make_tool(current_time),
        make_tool(read_file),
        make_tool(write_file),
        make_tool(list_files),
        make_tool(load_skill),
        make_tool(read_skill_file),
        make_tool(fetch_url),
        make_tool(web_search),
        make_tool(bash),
    )
}

# Tools that come with another: the model can only read a skill's files when it can load skills.
COMPANIONS = {"load_skill": ("read_skill_file",)}


def build_registry(names: Iterable[str], *, timeouts: Mapping[str, float] | None = None) -> ToolRegistry:
    """The enabled built-ins, in the order given, with per-tool timeouts (seconds) applied.

    Unknown names are caught by a system check."""
    timeouts = timeouts or {}
    chosen: list[str] = []
    for name in names:
        for item in (name, *COMPANIONS.get(name, ())):
            if item in BUILTIN_TOOLS and item not in chosen:
                chosen.append(item)
    return ToolRegistry(_with_timeout(name, float(timeouts.get(name) or 0)) for name in chosen)


@functools.cache
def _with_timeout(name: str, timeout: float) -> Tool:
    # One Tool per (name, timeout): a tool computes its JSON schema once per instance.
    tool = BUILTIN_TOOLS[name]
    return replace(tool, timeout=timeout) if timeout else tool
