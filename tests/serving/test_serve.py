"""`python -m serving.serve` (serving/serve.py): daphne with a Mailbox as each connection's queue."""

from __future__ import annotations

import asyncio

from daphne.server import Server
from daphne.ws_protocol import WebSocketFactory, WebSocketProtocol

from serving import serve
from serving.mailbox import Mailbox
from serving.serve import LISTEN_BACKLOG, SWEEP_EVERY, HeardFromProtocol, MailboxServer, ServeCommand


async def test_each_connection_gets_a_mailbox_that_its_application_reads():
    got: list[dict] = []

    async def app(scope, receive, send):
        got.append(await receive())
        got.append(await receive())

    server = MailboxServer(application=app, endpoints=["tcp:port=0:interface=127.0.0.1"])  # not listened on
    server.connections = {}  # as run() starts it, without listening
    protocol = object()
    server.protocol_connected(protocol)
    queue = server.create_application(protocol, {"type": "websocket"})
    assert isinstance(queue, Mailbox)
    queue.put_nowait({"type": "websocket.connect"})
    queue.put_nowait({"type": "websocket.disconnect", "code": 1000})
    await asyncio.wait_for(server.connections[protocol]["application_instance"], 5)
    assert got == [{"type": "websocket.connect"}, {"type": "websocket.disconnect", "code": 1000}]


def test_the_command_line_is_daphnes_with_the_mailbox_server():
    assert ServeCommand.server_class is MailboxServer


def test_the_listening_sockets_queue_holds_a_reconnect_storm():
    """Twisted listens with a queue of 50 connections: a storm of reconnects overflowed it and the
    kernel dropped SYNs that TCP sent again only seconds later."""
    server = MailboxServer(
        application=None,
        endpoints=["tcp:port=0:interface=127.0.0.1", "unix:/tmp/x.sock", "tcp:port=1:backlog=7", "fd:fileno=3"],
    )
    assert server.endpoints == [
        f"tcp:port=0:interface=127.0.0.1:backlog={LISTEN_BACKLOG}",
        f"unix:/tmp/x.sock:backlog={LISTEN_BACKLOG}",
        "tcp:port=1:backlog=7",  # named by the command line: kept
        "fd:fileno=3",  # a socket listened on already: its queue is its own
    ]


def test_a_handshake_formats_no_debug_line_nobody_logs():
    """autobahn pprints each new WebSocket's options and colours names with click for debug lines
    daphne never logs: a quarter of a reconnect's CPU."""
    from autobahn import util
    from autobahn.websocket import protocol

    assert protocol.pformat is repr
    assert util.hl("name", bold=True) == "name"  # no terminal colours made


def test_the_servers_websocket_factory_builds_sockets_whose_ping_waits_while_the_client_talks(monkeypatch):
    server = MailboxServer(application=None, endpoints=["tcp:port=0:interface=127.0.0.1"])  # not listened on
    server.ws_factory = WebSocketFactory(server)  # as daphne's run() makes it
    assert server.ws_factory.protocol is HeardFromProtocol

    received = []
    monkeypatch.setattr(WebSocketProtocol, "onMessage", lambda self, payload, binary: received.append(payload))
    pinged = []
    socket = HeardFromProtocol()
    socket.server = type("S", (), {"websocket_timeout": -1, "ping_interval": 20})()
    socket.state, socket.last_ping, socket.duration = socket.STATE_OPEN, 0.0, lambda: 1.0
    socket._sendAutoPing = lambda: pinged.append(True)

    socket.onMessage(b'{"type":"ping"}', False)
    socket.check_timeouts()  # heard from just now: no ping of the server's
    assert received == [b'{"type":"ping"}'] and pinged == []
    socket.last_ping -= 21  # silent for longer than the interval
    socket.check_timeouts()
    assert pinged == [True]


def test_daphnes_walk_of_every_connection_runs_every_third_tick(monkeypatch):
    walks, later = [], []
    monkeypatch.setattr(Server, "timeout_checker", lambda self: walks.append(1))
    monkeypatch.setattr(serve.reactor, "callLater", lambda seconds, call: later.append(seconds))
    server = MailboxServer(application=None, endpoints=["tcp:port=0:interface=127.0.0.1"])  # not listened on
    for _ in range(2 * SWEEP_EVERY):
        server.timeout_checker()
    assert len(walks) == 2  # daphne's own walk (which schedules its next tick itself)
    assert later == [2] * (2 * SWEEP_EVERY - 2)  # the skipped ticks keep daphne's 2 s beat
