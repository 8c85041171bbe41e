"""The official SDK's low-level MCP server with the project's two handlers, and its
Streamable HTTP session managers, entered once per event loop (daphne sends no ASGI lifespan
events: the first /mcp request starts them, as RunRegistryStarter starts the run registry).

Two managers, both stateless (chat.doors.mcp_server.gate says why): one answers each request
`application/json`, the other `text/event-stream`, and the gate sends a handshake-era request
to the second only when it asked for progress (the only notifications sent before a result). The
2026-07-28 era always goes to the second, which itself answers JSON unless a notification comes first."""

from __future__ import annotations

import asyncio
from importlib.metadata import PackageNotFoundError, version

import mcp_types as types
from django.conf import settings
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from chat.agent.perloop import PerLoop
from chat.doors.mcp_server.calls import CALLER, Caller, call_tool
from chat.doors.mcp_server.tools import input_schema_of, tools_for
from serving.loop_middleware import request_db

MAX_BODY = 4 * 1024 * 1024


def server_version() -> str:
    try:
        return version("agentsite")
    except PackageNotFoundError:  # run from a checkout that was not installed
        return "0"


async def list_tools(ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    caller: Caller = ctx.request.scope[CALLER]
    return types.ListToolsResult(tools=await request_db(tools_for)(user=caller.user))


def mcp_server() -> Server:
    return Server(
        settings.AGENT_SITE_NAME,
        version=server_version(),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=input_schema_of,
    )


class Managers:
    """The running loop's two session managers, started by the first request that needs them."""

    def __init__(self) -> None:
        server = mcp_server()
        self.json = StreamableHTTPSessionManager(
            server, json_response=True, stateless=True, max_request_body_size=MAX_BODY
        )
        self.events = StreamableHTTPSessionManager(server, stateless=True, max_request_body_size=MAX_BODY)
        self._started: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None  # held: the loop keeps only a weak reference

    async def started(self) -> Managers:
        if self._started is None:
            self._started = asyncio.get_running_loop().create_future()
            self._task = asyncio.ensure_future(self._run(self._started))
        await asyncio.shield(self._started)
        return self

    async def _run(self, started: asyncio.Future[None]) -> None:
        async with self.json.run(), self.events.run():
            started.set_result(None)
            await asyncio.Event().wait()  # for the life of the process


_managers: PerLoop[Managers] = PerLoop(Managers)


async def managers() -> Managers:
    return await _managers.get().started()
