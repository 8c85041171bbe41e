"""Full garbage collections on a clock, on the event loop.

agentsite.asgi freezes what start-up loaded and raises the collector's thresholds to
(10,000, 20, 100), which keeps streaming's short-lived objects from costing collections. With
them, a full collection waits for 100 collections of the middle generation, and a server under
steady load reaches that after hours: objects in reference cycles that were still alive at a
young collection and died later (requests, sockets, runs) piled up in the oldest generation,
and pymalloc's arenas grew with them and never came back. In the soak (bench/soak.py, two
daphnes under mixed load) a process read with `sys._debugmallocstats()` every minute went
from 93 to 101 arenas of 1 MiB in 9 minutes, none ever freed; with a full collection every
minute it stayed at 96 for as long (docs/performance.md, "Soak").

A full collection walks only the objects not frozen (some 15,000 in a busy process), a few
milliseconds a minute. It runs on the loop rather than on a thread of its own so that the
finalizers of what it frees (transports, sockets) run where they belong.
"""

from __future__ import annotations

import asyncio
import gc

from asgiref.sync import markcoroutinefunction

FULL_EVERY_SECONDS = 60.0


class FullCollections:
    """An ASGI wrapper that starts the clock with the process's first connection (daphne sends
    no lifespan events)."""

    _asgi_single_callable = True  # hands back the inner coroutine: no frame per connection

    def __init__(self, app, every: float = FULL_EVERY_SECONDS) -> None:
        self.app = app
        self.every = every
        self.started = False

    @markcoroutinefunction  # an ASGI 3 application to servers that ask (uvicorn took it for ASGI 2)
    def __call__(self, scope, receive, send):
        if not self.started:
            self.started = True
            asyncio.get_running_loop().call_later(self.every, self._collect)
        return self.app(scope, receive, send)

    def _collect(self) -> None:
        gc.collect()
        asyncio.get_running_loop().call_later(self.every, self._collect)
