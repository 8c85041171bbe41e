"""`python manage.py ask "question"`: one run in the terminal, its timeline printed as it streams."""

from __future__ import annotations

import asyncio
import json
import sys

from django.core.management.base import BaseCommand

from chat import mcp
from chat.agent import (
    CompleteEvent,
    ErrorEvent,
    ReferenceEvent,
    TextEvent,
    ThinkingEvent,
    ToolEndEvent,
    ToolStartEvent,
)
from chat.runtime.build import build_agent, close_client, tool_context


class Command(BaseCommand):
    help = "Ask the configured model one question and print the run's timeline."

    def add_arguments(self, parser):
        parser.add_argument("question")
        parser.add_argument("--json", action="store_true", help="print each event as a JSON line")

    def handle(self, *args, question: str, json: bool = False, **options):
        status = asyncio.run(self._run_and_close(question, as_json=json))
        if status != "succeeded":
            sys.exit(1)

    async def _run_and_close(self, question: str, *, as_json: bool) -> str:
        try:
            return await self._run(question, as_json=as_json)
        finally:
            await close_client()  # its connections belong to this event loop
            await mcp.close()  # so do the MCP servers' sessions

    async def _run(self, question: str, *, as_json: bool) -> str:
        out = self.stdout
        status = "failed"
        last = None
        async for event in build_agent().stream(question, context=tool_context(conversation_id="cli")):
            if isinstance(event, CompleteEvent):
                status = event.status
            if as_json:
                out.write(json.dumps(event.to_dict(), ensure_ascii=False))
                out.flush()
                continue
            kind = type(event)
            if kind is not last and last in (ThinkingEvent, TextEvent):
                out.write("\n")
            if isinstance(event, ThinkingEvent):
                out.write(("[thinking] " if last is not ThinkingEvent else "") + event.content, ending="")
            elif isinstance(event, TextEvent):
                out.write(("[answer] " if last is not TextEvent else "") + event.content, ending="")
            elif isinstance(event, ToolStartEvent):
                out.write(f"[tool] {event.tool_name}({event.arguments}) ...")
            elif isinstance(event, ToolEndEvent):
                mark = "failed" if event.is_error else "done"
                out.write(f"[tool] {event.tool_name} {mark} in {event.duration_ms} ms: {event.result}")
            elif isinstance(event, ErrorEvent):
                out.write(
                    self.style.ERROR(f"[error {event.code}] {event.message}")
                    + (f" - {event.detail}" if event.detail else "")
                )
            elif isinstance(event, ReferenceEvent):
                for ref in event.references:
                    out.write(f"[source] {ref.title} <{ref.url}>")
            elif isinstance(event, CompleteEvent):
                out.write(f"[complete] {event.status}")
            out.flush()
            last = kind
        return status
