"""A channel's queue, light enough for every idle socket to hold one.

Both channel layers keep a queue per channel, and every socket has a channel of its own. An
asyncio.Queue starts with four deques (its items, its getters, its putters and its `join()`
event's waiters), each with a block of 64 slots: 3 KiB of every idle socket's ~37 KiB
(bench/socket_memory.py, 500 sockets). A socket's channel has one reader waiting, a few
doorbells at most, and no `join()` or blocking `put()`. Mailbox keeps the part of
asyncio.Queue the layers use (put_nowait, get, get_nowait, empty, full, qsize), with the same
wake-up and cancellation rules, its items and its readers' futures in two short lists.
"""

from __future__ import annotations

import asyncio
from typing import Any


class Mailbox:
    __slots__ = ("maxsize", "_items", "_getters")

    def __init__(self, maxsize: int = 0) -> None:
        self.maxsize = maxsize
        self._items: list[Any] = []
        self._getters: list[asyncio.Future] = []

    def qsize(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items

    def full(self) -> bool:
        return 0 < self.maxsize <= len(self._items)

    def first(self) -> Any:
        """The oldest item, left in place (the layer's expiry scan reads its deadline)."""
        return self._items[0]

    def put_nowait(self, item: Any) -> None:
        if self.full():
            raise asyncio.QueueFull
        self._items.append(item)
        self._wake_next()

    def get_nowait(self) -> Any:
        if not self._items:
            raise asyncio.QueueEmpty
        return self._items.pop(0)

    async def get(self) -> Any:
        while not self._items:
            getter = asyncio.get_running_loop().create_future()
            self._getters.append(getter)
            try:
                await getter
            except BaseException:
                getter.cancel()
                try:
                    self._getters.remove(getter)
                except ValueError:
                    pass
                # Woken for an item and cancelled before taking it: the next reader gets it.
                if self._items and not getter.cancelled():
                    self._wake_next()
                raise
        return self._items.pop(0)

    def _wake_next(self) -> None:
        while self._getters:
            getter = self._getters.pop(0)
            if not getter.done():
                getter.set_result(None)
                return
