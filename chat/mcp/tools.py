"""MCP tools as agent tools: `<server>__<tool>` with the server's own JSON schema.

A result's text content is joined; images and other binary content are saved into the
conversation's workspace under a generated name, which the result names; `isError` results
become tool errors (`{"error": "<the text>"}`), as every other tool's failures do.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import mimetypes
import re
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from mcp import types as mcp_types

from chat.agent.hooks import ToolCallRequest, ToolHandler, ToolInterceptor, ToolOutcome
from chat.agent.tools import SchemaTool, ToolContext, ToolError, schema_tool
from chat.mcp.client import McpUnavailable, ServerConnection
from chat.tools.config import settings_of
from chat.tools.files import quota_write

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_NAME = 64
MAX_DESCRIPTION = 2000  # a server's description is sent with every model call
# Extensions for saved content; anything else is saved as .bin (never an executable or .html name).
SAFE_EXTENSIONS = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".svg", ".mp3", ".wav", ".ogg", ".txt", ".json",
                   ".csv", ".pdf"}  # fmt: skip


def tool_name(server: str, tool: str, taken: set[str]) -> str:
    """`<server>__<tool>` in the model's allowed alphabet; cut and made unique by a hash when needed."""
    raw = f"{server}__{tool}"
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", raw)
    if len(name) > MAX_NAME or name in taken:
        digest = hashlib.sha256(raw.encode()).hexdigest()[:8]
        name = f"{name[: MAX_NAME - 9]}_{digest}"
    return name


def _schema(tool: mcp_types.Tool) -> dict[str, Any]:
    schema = dict(tool.input_schema or {})
    # Models want an object schema; the server still validates the arguments against its own.
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    schema.pop("title", None)
    return schema


def agent_tools(connections: Iterable[ServerConnection], *, timeout: float) -> list[SchemaTool]:
    """The current tools of these servers' last listings."""
    tools: list[SchemaTool] = []
    taken: set[str] = set()
    for connection in connections:
        for tool in connection.tools:
            name = tool_name(connection.config.name, tool.name, taken)
            taken.add(name)
            description = (tool.description or tool.title or tool.name)[:MAX_DESCRIPTION]
            tools.append(
                schema_tool(
                    name,
                    f"{description}\n(from the MCP server {connection.config.name!r})",
                    _schema(tool),
                    _caller(connection, tool.name),
                    timeout=timeout,
                )
            )
    return tools


def _caller(connection: ServerConnection, tool: str):
    async def call(arguments: dict[str, Any], context: ToolContext) -> str:
        try:
            result = await connection.call(tool, arguments)
        except McpUnavailable as exc:
            raise ToolError(str(exc)) from None
        text = await render(result, context, server=connection.config.name)
        if result.is_error:
            raise ToolError(text or f"{tool} failed on the MCP server {connection.config.name!r}")
        return text

    return call


async def render(result: mcp_types.CallToolResult, context: ToolContext, *, server: str) -> str:
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, (mcp_types.ImageContent, mcp_types.AudioContent)):
            parts.append(await _save(block.data, block.mime_type, context, server=server, what=block.type))
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, mcp_types.TextResourceContents):
                parts.append(resource.text)
            else:
                parts.append(await _save(resource.blob, resource.mime_type, context, server=server, what="resource"))
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource link: {block.uri} ({block.name})]")
        else:
            parts.append(f"[{getattr(block, 'type', 'unknown')} content skipped]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


async def _save(data: str, mime_type: str | None, context: ToolContext, *, server: str, what: str) -> str:
    """Decode base64 content into a new workspace file; a line naming it, or saying why not."""
    mime_type = mime_type or "application/octet-stream"
    try:
        content = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"[{what} ({mime_type}) skipped: its data is not valid base64]"
    limit = settings_of(context).files.max_file_bytes
    if len(content) > limit:
        return f"[{what} ({mime_type}, {len(content)} bytes) not saved: larger than the {limit}-byte file limit]"
    extension = mimetypes.guess_extension(mime_type.split(";")[0].strip()) or ".bin"
    if extension not in SAFE_EXTENSIONS:
        extension = ".bin"
    prefix = re.sub(r"[^a-zA-Z0-9_-]", "_", server)[:32]
    name = f"mcp-{prefix}-{uuid.uuid4().hex[:12]}{extension}"
    try:
        await quota_write(context, name, content)
    except ToolError as exc:
        return f"[{what} ({mime_type}, {len(content)} bytes) not saved: {exc}]"
    return f"[{what} saved to the workspace as {name} ({mime_type}, {len(content)} bytes)]"


class UnstartedServers(ToolInterceptor):
    """A call under the prefix of a server that never started (so offers no tools) is answered
    with the cause, not with "unknown tool": the model, or the user reading the timeline, learns
    that the server is down rather than that the tool does not exist."""

    def __init__(self, connections: Callable[[], Iterable[ServerConnection]]):
        self._connections = connections

    async def intercept_tool(self, request: ToolCallRequest, call_next: ToolHandler) -> ToolOutcome:
        for connection in self._connections():
            prefix = tool_name(connection.config.name, "", set())
            if not connection.tools and connection.last_error and request.call.name.startswith(prefix):
                raise ToolError(f"MCP server {connection.config.name!r} is not available: {connection.last_error}")
        return await call_next(request)
