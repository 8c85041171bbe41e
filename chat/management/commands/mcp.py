"""`python manage.py mcp`: each server of AGENT_MCP_CONFIG started, with its status and tools."""

from __future__ import annotations

import asyncio
import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from chat import mcp
from chat.mcp.config import read
from chat.mcp.tools import agent_tools


class Command(BaseCommand):
    help = "Start each configured MCP server and list its status and the tools it offers the model."

    def handle(self, *args, **options):
        path = settings.AGENT_MCP_CONFIG
        if not path:
            raise CommandError("AGENT_MCP_CONFIG is not set: no MCP servers are configured.")
        _servers, problems = read(path)
        for problem in problems:
            self.stderr.write(f"{path}: {problem.message} ({problem.id})")
        failed = asyncio.run(self._report()) + len(problems)
        if failed:
            sys.exit(1)

    async def _report(self) -> int:
        try:
            connections = await mcp.connections(settings.AGENT_MCP_CONFIG, timeout=settings.AGENT_MCP_TIMEOUT)
            await asyncio.gather(*(connection.listing() for connection in connections))
            failed = 0
            for connection in connections:
                config = connection.config
                if connection.running:
                    status = self.style.SUCCESS(f"running, {len(connection.tools)} tools")
                else:
                    failed += 1
                    status = self.style.ERROR(f"not running: {connection.last_error}")
                self.stdout.write(f"{config.name} ({config.describe()}): {status}")
                for tool in agent_tools([connection], timeout=0):
                    summary = tool.description.splitlines()[0] if tool.description else ""
                    self.stdout.write(f"  {tool.name}  {summary}")
            if not connections:
                self.stdout.write("no valid server in the file")
            return failed
        finally:
            await mcp.close()  # the servers' processes belong to this event loop
