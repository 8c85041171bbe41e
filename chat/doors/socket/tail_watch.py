"""The tail watch: the events a lost doorbell left a socket without, found for every socket of the
process by one read a round, not by a read per ping.

The layer may drop a doorbell (docs/protocol.md, "Delivery and reconnection"); a lost batch is
caught by the next one, but a lost *last* batch has no next. Each ping used to read its
conversation's tail to find it: with 10,000 idle sockets pinging every 20 s that was 500 reads a
second (and a credential re-check each), 98% of a core for nothing. Here, once a round
(WATCH_SECONDS), the process reads the last seq of every conversation it has sockets of in one
query (eventlog.reads.last_seqs) and tells each socket the seq its conversation had one round
earlier: a socket still short of it has lost a doorbell (a doorbell in flight has had a whole
round to arrive) and reads what it misses from the database. An idle server pays a query a round;
a socket pays a read only when it missed something. A ping compares with the last round's seq too,
without a query (ChatConsumer._ping).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from channels.db import database_sync_to_async
from django.db import DatabaseError

from chat.agent.perloop import PerLoop
from chat.eventlog.reads import last_seqs

logger = logging.getLogger(__name__)

# Seconds between two reads (read at each use: tests shorten it). A lost last batch reaches its
# socket within two rounds; the page's ping, 20 s apart, found it within one ping.
WATCH_SECONDS = 5.0


class Watched(Protocol):
    def tail_missing(self, seq: int) -> None: ...


class TailWatch:
    def __init__(self) -> None:
        self.sockets: dict[Any, set[Watched]] = {}  # by conversation id
        self.last: dict[Any, int] = {}  # the last round's seq of each conversation
        self._task: asyncio.Task | None = None
        self._catching_up: asyncio.Task | None = None

    def add(self, conversation_id, socket: Watched) -> None:
        self.sockets.setdefault(conversation_id, set()).add(socket)
        if self._task is None:
            self._task = asyncio.create_task(self._watch(), name="socket-tail-watch")

    def remove(self, conversation_id, socket: Watched) -> None:
        sockets = self.sockets.get(conversation_id)
        if sockets is not None:
            sockets.discard(socket)
            if not sockets:
                del self.sockets[conversation_id]
                self.last.pop(conversation_id, None)

    def known(self, conversation_id) -> int:
        """The conversation's last seq as the last round read it (0: not read yet)."""
        return self.last.get(conversation_id, 0)

    def catch_up_soon(self) -> None:
        """The layer came back after an outage (every socket of the process is told at once):
        one read of the last seqs, and each socket behind reads what it missed."""
        if self._catching_up is None:
            self._catching_up = asyncio.create_task(self._catch_up_all(), name="socket-tail-catch-up")

    async def _catch_up_all(self) -> None:
        try:
            await asyncio.sleep(0)  # the rest of the hub's sockets, told in the same turn
            now = await self._read()
        finally:
            self._catching_up = None
        for conversation_id, seq in (now or {}).items():
            for socket in tuple(self.sockets.get(conversation_id, ())):
                socket.tail_missing(seq)

    async def _read(self) -> dict[Any, int] | None:
        try:
            return await database_sync_to_async(last_seqs)(conversation_ids=list(self.sockets))
        except DatabaseError:  # the database is away: the next round reads again
            logger.warning("the sockets' tail watch could not read the database", exc_info=True)
            return None

    async def _watch(self) -> None:
        try:
            while self.sockets:
                await asyncio.sleep(WATCH_SECONDS)
                try:
                    await self.round()
                except Exception:  # the watch outlives a bad round: the sockets still need it
                    logger.exception("a round of the sockets' tail watch failed")
        finally:
            self._task = None

    async def round(self) -> None:
        """Read every watched conversation's last seq; each socket short of the previous round's
        reads what it misses."""
        if not self.sockets:
            return
        now = await self._read()
        if now is None:
            return
        earlier, self.last = self.last, {cid: seq for cid, seq in now.items() if cid in self.sockets}
        for conversation_id, seq in earlier.items():
            for socket in tuple(self.sockets.get(conversation_id, ())):
                socket.tail_missing(seq)


_watches: PerLoop[TailWatch] = PerLoop(TailWatch)


def get_watch() -> TailWatch:
    return _watches.get()
