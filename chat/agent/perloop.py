"""Objects that exist once per running event loop: a server process has one loop, tests one per test."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerLoop(Generic[T]):
    """`get()` gives the running loop's instance, made by `make()` on first use; an instance goes
    with its loop."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self.instances: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = weakref.WeakKeyDictionary()

    def pop(self) -> T | None:
        """The running loop's instance, forgotten (None when it has none)."""
        return self.instances.pop(asyncio.get_running_loop(), None)

    def get(self) -> T:
        loop = asyncio.get_running_loop()
        instance = self.instances.get(loop)
        if instance is None:
            instance = self.instances[loop] = self._make()
        return instance
