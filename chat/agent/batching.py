"""Batcher: items that arrive while a round is being processed form the next round.

The run starts, the coalescing clock and the group writer all work this way: a
queue, one drain task that exists only while there is something to drain, one
trip (to a thread, or a tick of the clock) for the whole round, and each item's
future set from the round's results.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from chat.agent.perloop import PerLoop


def server_task(coro, *, name: str) -> asyncio.Task:
    """A task of the server's own, in a context of its own rather than its caller's. A run and the
    loops under it outlive the request or frame that started them; a task inherits its creator's
    context, and an HTTP request's (Django runs an async view under async_to_sync) holds asgiref's
    per-request thread executor, which quits with the request: every later thread-sensitive
    sync_to_async of the run (a tool's database read) then failed with "CurrentThreadExecutor
    already quit or is broken"."""
    return asyncio.create_task(coro, name=name, context=contextvars.Context())


T = TypeVar("T")
R = TypeVar("R")

# A round's results: one per item, an exception instance for an item that failed; or None
# when the items were only queued (no futures to set).
Process = Callable[[list[T]], Awaitable[Sequence[R | BaseException] | None]]


class Batcher(Generic[T, R]):
    def __init__(self, process: Process, *, name: str, pause: float = 0.0) -> None:
        self._process = process
        self._name = name
        self._pause = pause  # seconds to gather items before each round (the flush clock's window)
        self._waiting: list[tuple[T, asyncio.Future | None]] = []
        self._task: asyncio.Task | None = None

    @property
    def idle(self) -> bool:
        """No round is being processed or waiting: an item submitted now goes in a round at once."""
        return self._task is None

    def submit(self, item: T) -> asyncio.Future:
        """Queue the item; a future of its result. Items submitted without an await between
        them share a round."""
        future = asyncio.get_running_loop().create_future()
        self._queue(item, future)
        return future

    def add(self, item: T) -> None:
        """Queue the item for the next round, with no result to wait for."""
        self._queue(item, None)

    def _queue(self, item: T, future: asyncio.Future | None) -> None:
        self._waiting.append((item, future))
        if self._task is None:
            self._task = server_task(self._drain(), name=self._name)

    async def wait_idle(self) -> None:
        """Until every item queued so far has been processed."""
        while self._task is not None:
            await asyncio.wait([self._task])

    async def _drain(self) -> None:
        try:
            while self._waiting:
                if self._pause:
                    await asyncio.sleep(self._pause)
                round_, self._waiting = self._waiting, []
                try:
                    results = await self._process([item for item, _ in round_])
                except Exception as exc:
                    results = [exc] * len(round_)
                for (_, future), result in zip(round_, results or ()):
                    if future is None or future.done():
                        continue  # the caller has gone: the item was processed all the same
                    if isinstance(result, BaseException):
                        future.set_exception(result)
                    else:
                        future.set_result(result)
        finally:
            self._task = None


def _each(function: Callable[..., R]) -> Callable[[list[tuple[tuple, dict]]], list[R | Exception]]:
    """The calls of a round ((args, kwargs) each), made in order; a call's exception is its own
    result, not the round's."""

    def calls(items: list[tuple[tuple, dict]]) -> list[R | Exception]:
        out: list[R | Exception] = []
        for args, kwargs in items:
            try:
                out.append(function(*args, **kwargs))
            except Exception as exc:
                out.append(exc)
        return out

    return calls


class GroupedCalls(Generic[R]):
    """A blocking function called by many coroutines at once, its calls grouped: those made while
    a round runs form the next round, and `trip` takes each round's calls in one go (for the
    database, one trip to a thread: `trip` is then e.g. serving.loop_middleware.request_db).
    Each call is made as it would be alone; only their trips are shared. One batcher per loop."""

    def __init__(self, function: Callable[..., R], trip: Callable[[Callable], Callable], *, name: str) -> None:
        process = trip(_each(function))
        self._batchers: PerLoop[Batcher[tuple[tuple, dict], R]] = PerLoop(lambda: Batcher(process, name=name))

    async def __call__(self, *args, **kwargs) -> R:
        return await self._batchers.get().submit((args, kwargs))
