"""A client that falls behind: the one rule for every live socket and SSE stream.

A client that reads slowly, or not at all, is bounded twice, each bound counted in one place
for both kinds of connection:

- in bytes, by the server (serving.send_buffer): a connection keeps at most
  AGENT_SEND_BUFFER_BYTES the client has not taken, and a send past it waits until the client
  has taken them. What is sent at the application's own pace (a history, a page of events)
  goes at the client's;
- in live messages, here: while a socket's or stream's send waits, what the hub hands it
  (chat.realtime.hub) queues in its Backlog. Past AGENT_SEND_BACKLOG the client has fallen too
  far behind: it is a slow consumer, closed with a reason it can read (the socket's close
  `4008`, the stream's `error` event `SLOW_CONSUMER`), and what it missed stays in the event
  log, which it resumes from (`after`, `Last-Event-ID`) without loss.

Giving up on it (give_up) lets its last words through: its sends no longer wait, so they queue
behind what the client has not read, and the server closes the connection once the client has
read them, or drops it after serving.send_buffer's grace if it never does.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from serving.mailbox import Mailbox
from serving.send_buffer import EXTENSION

SLOW_CONSUMER = "SLOW_CONSUMER"
CLOSE_SLOW_CONSUMER = 4008
SLOW_CONSUMER_MESSAGE = "The client fell too far behind the conversation; resume from the last seq it read."
# What a backlog holds in place of what it dropped once its member fell behind.
FELL_BEHIND = "backlog.fell_behind"


class Backlog(Mailbox):
    """The hub's messages a member (a socket, an SSE stream) has not sent yet."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(settings.AGENT_SEND_BACKLOG)

    def keep(self, message: dict[str, Any]) -> bool:
        """Kept, or False: the member fell behind, and the backlog drops what it held for one
        FELL_BEHIND message (nothing is lost: the event log has it)."""
        if self.full():
            self._items = [{"type": FELL_BEHIND}]
            self._wake_next()
            return False
        self.put_nowait(message)
        return True


def give_up(scope: dict[str, Any]) -> None:
    """The connection's sends no longer wait (its last words go behind what the client has not
    read) and it is closed within the server's grace. Under a server without a send buffer
    (the in-process tests'), nothing to do."""
    buffer = scope.get("extensions", {}).get(EXTENSION)
    if buffer is not None:
        buffer.give_up()
