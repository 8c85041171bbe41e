"""`python -m serving.serve`: daphne, its command line and options unchanged, with a lighter
queue per connection.

daphne gives each connection an `asyncio.Queue` for what it passes the application (a socket's
frames, its disconnect). That queue starts with four deques (its items, its getters, its putters
and its `join()` event's waiters), each a block of 64 slots: 3 KiB of every idle socket, the
largest single line of one by `python -m bench.socket_memory` after daphne's own protocol object.
A connection's queue holds a message or two, has one reader and is never joined or put to
blocking: serving.mailbox's Mailbox (the channel layers' queue) is what it needs. daphne's
command line takes its server class as an attribute (`server_class`) for this kind of change;
the rest of the server is daphne's, but for its access log, whose lines are escaped as the log's
are (serving/daphne_log.py).

Each connection also gets a bounded send buffer (serving.send_buffer): its `send` waits while
the client has not taken AGENT_SEND_BUFFER_BYTES.

    python -m serving.serve -b 127.0.0.1 -p 8000 agentsite.asgi:application
"""

from __future__ import annotations

import asyncio
import sys
import time
from functools import partial

from autobahn import util as autobahn_util
from autobahn.websocket import protocol as websocket_protocol
from daphne.access import AccessLogGenerator
from daphne.cli import CommandLineInterface
from daphne.http_protocol import WebRequest
from daphne.server import Server
from daphne.ws_protocol import WebSocketProtocol
from django.conf import settings
from twisted.internet import reactor
from twisted.web.http import HTTPChannel

from serving.daphne_log import EscapedAccessLog
from serving.mailbox import Mailbox
from serving.send_buffer import EXTENSION, SendBuffer, is_last


def send_buffer(protocol, limit: int) -> SendBuffer | None:
    """A SendBuffer registered for the connection's flow control; None when it has no HTTP
    channel to register with (a transport daphne wraps, as its own TLS)."""
    if isinstance(protocol, WebRequest):
        transport, register = protocol.channel.transport, protocol.registerProducer
    else:  # a WebSocket: the channel it was upgraded from stays its transport's producer
        transport = getattr(protocol, "transport", None)
        channel = getattr(transport, "producer", None)
        if not isinstance(channel, HTTPChannel):
            return None
        register = channel.registerProducer
    buffer = SendBuffer(transport)
    try:
        register(buffer, True)
    except (RuntimeError, ValueError):  # another producer holds the channel: left unbounded
        return None
    transport.bufferSize = limit
    return buffer


# autobahn formats each new WebSocket's 29 options with pprint for a debug line, and colours
# names for others with click, before the logger decides whether they are wanted (daphne never
# logs autobahn's debug lines): 0.3 ms of every handshake on this machine, a quarter of a
# reconnect storm's CPU per socket (cProfile of the restarted server, docs/performance.md). A
# plain repr and no colours give the same lines, should anyone turn them on.
websocket_protocol.pformat = repr
autobahn_util._HAS_CLICK = False

# The listening socket's queue of connections not yet accepted (the kernel caps it at
# net.core.somaxconn). Twisted's default is 50: a restarted server's pages all reconnect within
# two seconds, the queue overflowed, the kernel dropped their SYNs and each client sent its own
# again after 1, 3, 7, 15 s (TCP's backoff): at 2,000 sockets most synced only 7-15 s into the
# storm with the server idle meanwhile (docs/performance.md, "10,000 idle sockets and a
# reconnect storm").
LISTEN_BACKLOG = 4096


def with_backlog(endpoint: str) -> str:
    """A TCP or Unix listening endpoint of daphne's with LISTEN_BACKLOG, unless it names its own."""
    if endpoint.startswith(("tcp:", "unix:")) and ":backlog=" not in endpoint:
        return f"{endpoint}:backlog={LISTEN_BACKLOG}"
    return endpoint


class HeardFromProtocol(WebSocketProtocol):
    """daphne's socket, whose keep-alive ping waits while the client is heard from. daphne pings
    every socket every --ping-interval (20 s) to keep proxies' idle timers running and to find a
    dead peer by its missing pong; a frame from the client shows both as well, and the page sends
    its own `ping` every 20 s (static/chat/socket.js). Counted from the client's last frame, the
    server's ping goes only to a socket silent that long: with 10,000 idle pages, 500 pings and
    pongs a second fewer through autobahn and Twisted's timers (docs/performance.md, "10,000
    idle sockets and a reconnect storm"). A dead peer is still found within an interval and
    --ping-timeout of its last sign of life."""

    def onMessage(self, payload, isBinary):
        self.last_ping = time.time()  # daphne's "last ping sent": the next one is due from here
        super().onMessage(payload, isBinary)


# daphne walks every connection every 2 s (timeout_checker) to send the pings due and end the
# handshakes and requests over their time: with 10,000 idle sockets the walk was a tenth of the
# server's idle CPU (py-spy). Every third tick, 6 s: a ping goes at most 6 s late (proxies idle
# out after a minute or more: deploy/), a handshake or request over its time ends 6 s late at most.
SWEEP_EVERY = 3


class MailboxServer(Server):
    _ticks = 0

    def __init__(self, *args, action_logger=None, endpoints=None, **kwargs):
        if type(action_logger) is AccessLogGenerator:
            action_logger = EscapedAccessLog(action_logger.stream)
        endpoints = [with_backlog(e) for e in endpoints or ()]
        super().__init__(*args, action_logger=action_logger, endpoints=endpoints, **kwargs)

    def timeout_checker(self) -> None:
        self._ticks += 1
        if self._ticks % SWEEP_EVERY:
            reactor.callLater(2, self.timeout_checker)  # daphne's tick, without its walk
            return
        super().timeout_checker()

    @property
    def ws_factory(self):
        return self._ws_factory

    @ws_factory.setter
    def ws_factory(self, factory) -> None:
        # daphne's run() makes its WebSocket factory and serves at once; as it is set, the
        # factory builds HeardFromProtocol instead of daphne's protocol.
        factory.protocol = HeardFromProtocol
        self._ws_factory = factory

    def create_application(self, protocol, scope):
        """daphne 4's create_application with a Mailbox as the connection's input queue, and a
        send that waits while the client is behind."""
        assert "application_instance" not in self.connections[protocol]
        input_queue = Mailbox()
        scope.setdefault("asgi", {"version": "3.0"})
        limit = settings.AGENT_SEND_BUFFER_BYTES
        buffer = send_buffer(protocol, limit) if limit > 0 else None
        if buffer is None:
            send = partial(self.handle_reply, protocol)
        else:
            scope["extensions"] = {**scope.get("extensions", {}), EXTENSION: buffer}
            send = partial(self.bounded_reply, protocol, buffer, getattr(protocol, "channel", None))
        application_instance = self.application(scope=scope, receive=input_queue.get, send=send)
        if protocol not in self.connections:
            return None
        self.connections[protocol]["application_instance"] = asyncio.ensure_future(
            application_instance, loop=asyncio.get_event_loop()
        )
        return input_queue

    async def bounded_reply(self, protocol, buffer: SendBuffer, channel: HTTPChannel | None, message) -> None:
        """daphne's handle_reply, then, past the limit, the wait for the client to take it. An
        HTTP request's channel (None for a WebSocket) serves the next request of the connection
        once this one ends: the buffer leaves it before the last message."""
        last = is_last(message)
        if last and channel is not None and protocol.producer is buffer:
            protocol.unregisterProducer()
        if last and buffer.given_up and channel is None:
            protocol.closeHandshakeTimeout = 0  # the grace is the buffer's, not autobahn's second
        await self.handle_reply(protocol, message)
        if last:
            if buffer.given_up and channel is not None:
                channel.loseConnection()  # after what the client has not read, the response's end
            return
        await buffer.room()


class ServeCommand(CommandLineInterface):
    server_class = MailboxServer


def main() -> None:
    ServeCommand.entrypoint()


if __name__ == "__main__":
    sys.exit(main())
