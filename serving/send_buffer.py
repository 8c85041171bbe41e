"""A connection's bounded send buffer: what daphne has taken from the application for a client
and the client has not read yet (AGENT_SEND_BUFFER_BYTES, docs/protocol.md, "Slow clients").

daphne's `send` hands a message to Twisted, which keeps what the socket will not take yet, and
returns at once: a client that read nothing had everything sent to it kept for it, however
much. 50 SSE streams that never read grew a server from 221 to 310 MB over a long run, /events/
requests to 551 MB, and the memory stayed after they closed.

Twisted's own flow control measures it: a transport holding more than its `bufferSize` bytes
calls pauseProducing() on the push producer registered with it, and resumeProducing() once it
has handed them all to the kernel. A SendBuffer is that producer for one connection, registered
with the connection's HTTP channel, which passes the calls on to a request's producer (a
WebSocket keeps the channel it was upgraded from as its transport's producer). The connection's
`send` (Server.bounded_reply) waits, once a message leaves the transport over the limit, until
the client has taken it all, as uvicorn's `send` waits on asyncio's pause_writing/resume_writing.
So a connection holds at most the limit and one message, whatever the application sends at its
own pace (a history, a page of events) goes at the client's, and a live stream whose client does
not keep up sees its sends wait: chat.realtime.backlog counts what queues meanwhile.

The application finds it in its scope (EXTENSION; chat.realtime.backlog) to give up on a client:
its sends no longer wait, so that its last words (an SSE `error` event, a close frame) queue
behind what it has not read; the connection is closed once they are read, or dropped after
AGENT_SLOW_CONSUMER_GRACE_SECONDS, and the memory with it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from django.conf import settings

# Where the server puts a connection's send buffer in its scope (an ASGI extension).
EXTENSION = "agentsite.send_buffer"


class SendBuffer:
    """One connection's flow control: Twisted's IPushProducer (called on the loop's thread: daphne
    runs Twisted on asyncio), and the wait for room that the connection's sends go through."""

    __slots__ = ("transport", "paused", "given_up", "_room")

    def __init__(self, transport) -> None:
        self.transport = transport
        self.paused = False
        self.given_up = False
        self._room: asyncio.Future | None = None

    def pauseProducing(self) -> None:  # noqa: N802 - Twisted's interface
        self.paused = True

    def resumeProducing(self) -> None:  # noqa: N802
        self.paused = False
        self._wake()

    def stopProducing(self) -> None:  # noqa: N802 - the connection is gone: nothing waits for it
        self.paused = False
        self._wake()

    async def room(self) -> None:
        """Back once the client has taken what the connection held past the limit."""
        while self.paused and not self.given_up:
            if self._room is None:
                self._room = asyncio.get_running_loop().create_future()
            # Shielded: a sender cancelled meanwhile leaves the future to the others waiting.
            await asyncio.shield(self._room)

    def give_up(self) -> None:
        if self.given_up:
            return
        self.given_up = True
        self._wake()
        asyncio.get_running_loop().call_later(settings.AGENT_SLOW_CONSUMER_GRACE_SECONDS, self._drop)

    def _wake(self) -> None:
        room, self._room = self._room, None
        if room is not None and not room.done():
            room.set_result(None)

    def _drop(self) -> None:
        """The grace is over: a connection still open has not read its last words."""
        if self.transport.connected:
            self.transport.abortConnection()


def is_last(message: dict[str, Any]) -> bool:
    """The connection's last message: nothing is sent after it to wait for room for."""
    kind = message["type"]
    return kind == "websocket.close" or (kind == "http.response.body" and not message.get("more_body", False))
