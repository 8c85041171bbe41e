"""Start a server process's run registry with its first connection of any kind.

daphne sends no ASGI lifespan events, so the registry's loops (heartbeat, the
reaper of dead processes' runs, the cancel listener) start with the first HTTP
request or WebSocket a process serves: a load balancer's /healthz probe is
enough for a fresh process to start reaping runs of the one it replaced.
"""

from __future__ import annotations

import asyncio
import weakref

from asgiref.sync import markcoroutinefunction

from chat.runtime.registry import get_registry

_kicked: weakref.WeakSet = weakref.WeakSet()


class RunRegistryStarter:
    # A plain call handing back the inner application's coroutine rather than awaiting it: no
    # frame of this wrapper lives as long as each connection (an idle socket's memory).
    _asgi_single_callable = True

    def __init__(self, app):
        self.app = app

    @markcoroutinefunction  # an ASGI 3 application to servers that ask (uvicorn took it for ASGI 2)
    def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket"):
            registry = get_registry()
            if registry not in _kicked:
                _kicked.add(registry)
                asyncio.ensure_future(registry.ensure_started())
        return self.app(scope, receive, send)
