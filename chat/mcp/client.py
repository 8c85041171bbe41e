"""One session per MCP server per event loop, owned by one long-lived task.

The SDK's client is a stack of anyio context managers (transport, session, task group) that must
be entered and left by the same task. So each server gets an owner task that enters them, serves
requests from a queue (each in a child task, so calls run in parallel) and leaves them when it
closes or the connection breaks. Callers only put a request on the queue and await its future.

A server that cannot start, dies, hangs past the timeout or answers with something the SDK cannot
read gives an McpUnavailable error; its session is closed and the next use starts a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import pydantic
from mcp import Client, StdioServerParameters
from mcp import types as mcp_types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from chat.mcp.config import ServerConfig

logger = logging.getLogger(__name__)

MAX_LIST_PAGES = 50  # a paginator that never ends must not hang a run's start
# After a failed start, runs starting within this many seconds do not wait for another attempt
# (a call of one of the server's tools still tries at once).
RETRY_LISTING_AFTER = 30.0


class McpUnavailable(Exception):
    """The server could not answer: not started, gone, hung or unreadable. Restarted on next use."""


@dataclass
class _Session:
    """One owner task's state: the next use starts a new session as soon as this one is broken."""

    task: asyncio.Task
    queue: asyncio.Queue
    broken: bool = False


@dataclass
class _Request:
    kind: str  # "list" or "call"
    future: asyncio.Future
    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)


class ServerConnection:
    def __init__(self, config: ServerConfig, *, timeout: float):
        self.config = config
        self.timeout = timeout
        self.tools: list[mcp_types.Tool] = []  # the last listing: offered even while the server is down
        self.last_error = ""
        self._stale = True
        self._session: _Session | None = None
        self._start_lock = asyncio.Lock()
        self._failed_at: float | None = None

    @property
    def running(self) -> bool:
        session = self._session
        return session is not None and not session.broken and not session.task.done()

    # -- what callers use ------------------------------------------------------
    async def listing(self) -> list[mcp_types.Tool]:
        """The server's tools, started and refreshed (after `tools/list_changed`) as needed.
        When the server cannot answer, the last listing: calling one of those tools then gives the error."""
        recently_failed = self._failed_at is not None and time.monotonic() - self._failed_at < RETRY_LISTING_AFTER
        if recently_failed and not self.running:
            return self.tools
        try:
            await self._ensure_started()
            if self._stale:
                await self._request(_Request("list", asyncio.get_running_loop().create_future()))
        except McpUnavailable as exc:
            logger.warning("%s", exc)
        return self.tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        await self._ensure_started()
        return await self._request(_Request("call", asyncio.get_running_loop().create_future(), tool, arguments))

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.task.done():
            task = session.task
            session.queue.put_nowait(None)
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout=10)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    # -- the owner task ---------------------------------------------------------
    async def _ensure_started(self) -> None:
        async with self._start_lock:
            if self.running:
                return
            ready = asyncio.get_running_loop().create_future()
            queue: asyncio.Queue[_Request | None] = asyncio.Queue()
            task = asyncio.create_task(self._own(ready, queue), name=f"mcp-{self.config.name}")
            self._session = _Session(task, queue)
            try:
                async with asyncio.timeout(self.timeout):
                    await asyncio.shield(ready)
            except TimeoutError:
                ready.cancel()
                await self._stop()
                self._failed_at = time.monotonic()
                self.last_error = f"did not start within {self.timeout:g} s"
                raise McpUnavailable(f"MCP server {self.config.name!r} {self.last_error}") from None
            except McpUnavailable:
                self._failed_at = time.monotonic()
                raise
            self._failed_at = None

    async def _stop(self) -> None:
        session = self._session
        if session is not None and not session.task.done():
            session.task.cancel()
            with contextlib.suppress(BaseException):
                await session.task

    async def _request(self, request: _Request) -> Any:
        session = self._session
        assert session is not None
        task = session.task
        session.queue.put_nowait(request)
        # The owner may end (crash, close) before it takes the request: then nobody would answer.
        try:
            await asyncio.wait({request.future, task}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            request.future.cancel()  # the run was stopped: nobody will read the answer
            raise
        if not request.future.done() or request.future.cancelled():
            request.future.cancel()
            raise McpUnavailable(f"MCP server {self.config.name!r} stopped: {self.last_error or 'closed'}")
        return request.future.result()

    def _transport(self):
        config = self.config
        if config.url:
            # Our own client only to add the configured headers; timeouts as the SDK's default client.
            http = httpx2.AsyncClient(headers=dict(config.headers), timeout=httpx2.Timeout(30, read=300))
            return http, streamable_http_client(config.url, http_client=http)
        # The SDK's default environment for a stdio server is HOME, LOGNAME, PATH, SHELL, TERM and
        # USER, never this process's own (API keys, SECRET_KEY, DATABASE_URL); `env` adds to it.
        params = StdioServerParameters(command=config.command, args=list(config.args), env=dict(config.env),
                                       cwd=config.cwd)  # fmt: skip
        return None, stdio_client(params, errlog=_errlog())

    async def _own(self, ready: asyncio.Future, queue: asyncio.Queue) -> None:
        name = self.config.name
        started = time.monotonic()
        try:
            if problem := self.config.command_problem():
                raise McpUnavailable(problem)  # the check's own words, not the OS's ENOENT
            async with contextlib.AsyncExitStack() as stack:
                http, transport = self._transport()
                if http is not None:
                    await stack.enter_async_context(http)
                # No start timeout here (a cancel scope around contexts left later would break
                # anyio's nesting): the caller waiting for `ready` bounds the start and cancels us.
                client = Client(transport, cache=None, message_handler=self._on_message)
                await stack.enter_async_context(client)
                tasks = await stack.enter_async_context(anyio.create_task_group())
                await self._list(client)
                if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    tasks.start_soon(self._watch, client)
                logger.info("MCP server %r started (%s, %d tools)", name, client.protocol_version, len(self.tools))
                self.last_error = ""
                ready.set_result(None)
                session = self._session
                while (request := await queue.get()) is not None:
                    tasks.start_soon(self._serve, client, request, session, tasks.cancel_scope)
                tasks.cancel_scope.cancel()
        except BaseException as exc:
            reason = _reason(exc)
            starting = not ready.done()
            if starting:  # the waiting caller reports it, once
                self.last_error = f"could not start: {reason}"
                ready.set_exception(McpUnavailable(f"MCP server {name!r} {self.last_error}"))
            elif not self.last_error:
                self.last_error = reason
            if not isinstance(exc, Exception):
                raise
            if not starting:
                logger.warning("MCP server %r stopped after %.1f s: %s", name, time.monotonic() - started, reason)
        finally:
            self._stale = True
            while not queue.empty():  # requests nobody took: the caller's wait sees this task end
                request = queue.get_nowait()
                if request is not None and not request.future.done():
                    request.future.cancel()

    async def _serve(
        self, client: Client, request: _Request, session: _Session | None, owner_scope: anyio.CancelScope
    ) -> None:
        name = self.config.name
        try:
            with anyio.fail_after(self.timeout):
                if request.kind == "list":
                    result = await self._list(client)
                else:
                    result = await client.call_tool(request.tool, request.arguments)
            if not request.future.done():
                request.future.set_result(result)
            return
        except MCPError as exc:
            if exc.code != mcp_types.CONNECTION_CLOSED:
                # The server answered with a JSON-RPC error: it is alive, the call failed.
                _fail(request, McpUnavailable(f"MCP server {name!r} refused the call: {exc.error.message}"))
                return
            self.last_error = "the connection closed (the server exited or crashed)"
        except TimeoutError:
            self.last_error = f"no answer within {self.timeout:g} s"
        except Exception as exc:
            self.last_error = f"unreadable answer: {_reason(exc)}"
        # Anything but an answer: this session is done for; the next use starts a new one.
        _fail(request, McpUnavailable(f"MCP server {name!r}: {self.last_error}; it will be restarted on next use"))
        if session is not None:
            session.broken = True  # new calls start a new session while this one shuts down
        owner_scope.cancel()

    async def _list(self, client: Client) -> list[mcp_types.Tool]:
        self._stale = False  # a change announced while listing marks it stale again
        tools: list[mcp_types.Tool] = []
        cursor = None
        for _ in range(MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        self.tools = tools
        return tools

    async def _on_message(self, message: Any) -> None:
        # Servers of the initialize-handshake era announce changes as a notification.
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._stale = True

    async def _watch(self, client: Client) -> None:
        # 2026-07-28 servers announce changes on a `subscriptions/listen` stream instead.
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    self._stale = True
        except Exception as exc:
            logger.info("MCP server %r: no tools/list_changed subscription (%s)", self.config.name, _reason(exc))


def _errlog():
    """Where a stdio server's stderr goes: ours, when it is a real file (a replaced sys.stderr,
    as under a test's capture, may have no descriptor to hand to a child process)."""
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (OSError, ValueError, AttributeError):
            continue
    return _devnull()


@functools.cache
def _devnull():
    return open(os.devnull, "w")


def _fail(request: _Request, error: Exception) -> None:
    if not request.future.done():
        request.future.set_exception(error)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_reason(inner) for inner in exc.exceptions)
    if isinstance(exc, pydantic.ValidationError):
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'result'}: {error['msg']}" for error in exc.errors()[:5]
        )
        return f"not a valid MCP result ({problems})"
    if isinstance(exc, asyncio.CancelledError):
        return "stopped"
    if isinstance(exc, McpUnavailable):
        return str(exc)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class McpServers:
    """This event loop's connections, one per configured server, kept while its config is unchanged."""

    def __init__(self) -> None:
        self.connections: dict[str, ServerConnection] = {}
        self._lock = asyncio.Lock()  # runs starting together after a config change make one set

    async def configure(self, servers: Iterable[ServerConfig], *, timeout: float) -> list[ServerConnection]:
        wanted = {server.name: server for server in servers}
        async with self._lock:
            for name, connection in list(self.connections.items()):
                if wanted.get(name) != connection.config or connection.timeout != timeout:
                    del self.connections[name]
                    await connection.close()
            for name, server in wanted.items():
                if name not in self.connections:
                    self.connections[name] = ServerConnection(server, timeout=timeout)
            return [self.connections[name] for name in wanted]

    async def close(self) -> None:
        connections, self.connections = list(self.connections.values()), {}
        await asyncio.gather(*(connection.close() for connection in connections))
