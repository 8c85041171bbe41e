"""Tools from MCP servers (AGENT_MCP_CONFIG): the config file, one session per server per event
loop, and the servers' tools as agent tools named `<server>__<tool>`. See docs/tools.md,
"MCP servers"."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from pathlib import Path

from chat.agent.perloop import PerLoop
from chat.agent.tools import Tool
from chat.mcp import config
from chat.mcp.client import McpServers, ServerConnection
from chat.mcp.tools import agent_tools

logger = logging.getLogger(__name__)

_servers: PerLoop[McpServers] = PerLoop(McpServers)
# The running event loop's connections.
get_servers = _servers.get


@functools.lru_cache(maxsize=4)
def _read(path: str, _mtime_ns: int) -> list[config.ServerConfig]:
    servers, problems = config.read(path)
    for problem in problems:  # the system checks show them at start-up; the valid servers still serve
        level = logging.WARNING if problem.warning else logging.ERROR
        logger.log(level, "AGENT_MCP_CONFIG %s: %s (%s)", path, problem.message, problem.id)
    return servers


def configured(path: str | Path) -> list[config.ServerConfig]:
    """The valid servers of the file, read again when it changes."""
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        mtime = -1
    return _read(str(path), mtime)


async def connections(path: str | Path, *, timeout: float) -> list[ServerConnection]:
    return await get_servers().configure(configured(path), timeout=timeout)


async def available_tools(path: str | Path, *, timeout: float) -> list[Tool]:
    """Every configured server's current tools (servers started, and listings refreshed, as needed)."""
    servers = await connections(path, timeout=timeout)
    await asyncio.gather(*(server.listing() for server in servers))
    # A call may first restart its server: two waits of `timeout`, then the loop's own limit.
    return agent_tools(servers, timeout=2 * timeout + 5)


async def close() -> None:
    """Stop this event loop's sessions (their processes belong to the loop)."""
    await get_servers().close()
