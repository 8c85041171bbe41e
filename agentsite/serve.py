"""`python -m agentsite.serve`: daphne, its command line and options unchanged, with a lighter
queue per connection.

daphne gives each connection an `asyncio.Queue` for what it passes the application (a socket's
frames, its disconnect). That queue starts with four deques (its items, its getters, its putters
and its `join()` event's waiters), each a block of 64 slots: 3 KiB of every idle socket, the
largest single line of one by `python -m bench.socket_memory` after daphne's own protocol object.
A connection's queue holds a message or two, has one reader and is never joined or put to
blocking: chat.realtime.mailbox's Mailbox (the channel layers' queue) is what it needs. daphne's
command line takes its server class as an attribute (`server_class`) for this kind of change;
the rest of the server is daphne's, but for its access log, whose lines are escaped as the log's
are (agentsite/daphne_log.py).

    python -m agentsite.serve -b 127.0.0.1 -p 8000 agentsite.asgi:application
"""

from __future__ import annotations

import asyncio
import sys
from functools import partial

from daphne.access import AccessLogGenerator
from daphne.cli import CommandLineInterface
from daphne.server import Server

from agentsite.daphne_log import EscapedAccessLog
from chat.realtime.mailbox import Mailbox


class MailboxServer(Server):
    def __init__(self, *args, action_logger=None, **kwargs):
        if type(action_logger) is AccessLogGenerator:
            action_logger = EscapedAccessLog(action_logger.stream)
        super().__init__(*args, action_logger=action_logger, **kwargs)

    def create_application(self, protocol, scope):
        """daphne 4's create_application with a Mailbox as the connection's input queue."""
        assert "application_instance" not in self.connections[protocol]
        input_queue = Mailbox()
        scope.setdefault("asgi", {"version": "3.0"})
        application_instance = self.application(
            scope=scope, receive=input_queue.get, send=partial(self.handle_reply, protocol)
        )
        if protocol not in self.connections:
            return None
        self.connections[protocol]["application_instance"] = asyncio.ensure_future(
            application_instance, loop=asyncio.get_event_loop()
        )
        return input_queue


class ServeCommand(CommandLineInterface):
    server_class = MailboxServer


def main() -> None:
    ServeCommand.entrypoint()


if __name__ == "__main__":
    sys.exit(main())
