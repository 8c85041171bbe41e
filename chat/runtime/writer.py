"""GroupWriter: the batches of every run of one event loop, stored in one transaction.

While one transaction runs, the next round's batches gather (group commit):
hundreds of streams cost a few commits a second instead of twenty each. The
writer has a thread (and so a database connection) of its own: streaming runs'
batches never queue behind the connects and run starts that share
sync_to_async's single thread.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from django import db

from chat.agent.batching import Batcher
from chat.agent.perloop import PerLoop
from chat.eventlog import followups
from chat.eventlog.append import CommitUnknown, events_append_many, events_stored
from chat.eventlog.frames import EventFrame
from chat.eventlog.types import EventBatch
from chat.exceptions import ConversationGone

# A connection idle this long is checked before the next round uses it: a restart of the
# database in between broke it. Rounds closer together than this (a stream) skip the check's
# round trip; a connection that breaks under them fails the round, which is retried once.
IDLE_CHECK_SECONDS = 1.0
# How long the retry of a round whose connection broke waits for a new one: a restart of the
# database (pg_ctl restart: about a second) is ridden out, the runs going on as if nothing
# happened; a longer outage fails the round, and its runs are handed over (registry).
RECONNECT_SECONDS = 3.0
RECONNECT_PAUSE = 0.2


class GroupWriter:
    def __init__(self) -> None:
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="event-writer")
        self._rounds: Batcher[EventBatch, list[EventFrame]] = Batcher(self._store, name="event-group-writer")
        self._used_at = float("-inf")  # monotonic time of the last round
        # The registry of this loop (set when it starts): its channel runs what a stored
        # `complete` starts (a waiting message: chat.eventlog.followups), handed to `follow`.
        self.worker = ""
        self.follow: Callable[[list[followups.FollowUp]], None] | None = None

    def submit(self, batch: EventBatch) -> asyncio.Future:
        """A future of the batch's frames once committed (ConversationGone when its conversation
        is gone). Batches submitted one after another without an await between them share a round."""
        return self._rounds.submit(batch)

    async def wait_idle(self) -> None:
        """Until every batch submitted so far is committed (or failed)."""
        await self._rounds.wait_idle()

    async def close(self) -> None:
        """Close the writer thread's database connection and end the thread (its loop is ending:
        a test's, or a server's at shutdown). Without it every ended loop left a connection open."""
        await self._rounds.wait_idle()
        await asyncio.get_running_loop().run_in_executor(self._thread, _close_connection)
        self._thread.shutdown(wait=False)

    async def check(self) -> None:
        """/healthz: the writer thread's connection answers (replaced first if it broke)."""
        await asyncio.get_running_loop().run_in_executor(self._thread, _check_connection_now)

    async def _store(self, batches: list[EventBatch]) -> list:
        idle = time.monotonic() - self._used_at >= IDLE_CHECK_SECONDS
        try:
            results, started = await asyncio.get_running_loop().run_in_executor(
                self._thread, _store_following, batches, idle, self.worker if self.follow else None
            )
        finally:
            self._used_at = time.monotonic()
        if started and self.follow is not None:
            self.follow(started)
        return results


def _close_connection() -> None:
    try:
        db.connection.close()
    except db.DatabaseError:  # a connection this thread did not open (a test's shared one) is not ours
        pass


def _check_connection() -> None:
    """The connection this thread kept may have broken since its last use (the database
    restarted): checked at its next use and replaced, not used (CONN_HEALTH_CHECKS' check,
    which Django arms only at a request's start, and this thread serves no requests)."""
    db.close_old_connections()


def _check_connection_now() -> None:
    _check_connection()
    with db.connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _store_following(batches: list[EventBatch], idle: bool, worker: str | None) -> tuple[list, list]:
    """_store, with the runs its `complete`s started for `worker` (None: nobody runs them, so
    none is started: the waiting messages wait on)."""
    if worker is None:
        return _store(batches, idle), []
    with followups.collecting(worker) as started:
        return _store(batches, idle), list(started)


def _store(batches: list[EventBatch], idle: bool) -> list:
    """Each batch's frames, or the exception that kept it out (ConversationGone: deleted)."""
    if idle:
        _check_connection()
    try:
        return _gone_as_errors(batches, _append_retrying(batches))
    except Exception as exc:
        _close_connection()  # the writer's connection lives on: never reuse a broken one
        if len(batches) == 1:
            return [exc]
    results = []  # one bad batch must not fail the others: store them one by one
    for batch in batches:
        try:
            results += _gone_as_errors([batch], _append_retrying([batch]))
        except Exception as exc:
            _close_connection()
            results.append(exc)
    return results


def _append_retrying(batches: list[EventBatch]) -> list:
    """The round stored, once more on a new connection if the one it used broke under it (the
    database restarted or a proxy dropped it): the round is one transaction, so a retry after a
    rollback stores it once; after a failed COMMIT it is retried only if it is not stored."""
    try:
        return events_append_many(batches=batches)
    except CommitUnknown as exc:
        if not _connection_broke():
            raise
        _reconnect()
        if events_stored(results=exc.results):
            return exc.results
    except db.DatabaseError:
        if not _connection_broke():
            raise
        _reconnect()
    return events_append_many(batches=batches)


def _reconnect() -> None:
    """A new connection, waiting up to RECONNECT_SECONDS for the database to accept one (the
    last failure is raised past that)."""
    _close_connection()
    deadline = time.monotonic() + RECONNECT_SECONDS
    while True:
        try:
            db.connection.ensure_connection()
            return
        except db.DatabaseError:
            _close_connection()
            if time.monotonic() >= deadline:
                raise
            time.sleep(RECONNECT_PAUSE)


def _connection_broke() -> bool:
    connection = db.connection
    return connection.connection is None or not connection.is_usable()


def _gone_as_errors(batches, results) -> list:
    return [
        ConversationGone(str(batch.conversation_id)) if frames is None else frames
        for batch, frames in zip(batches, results)
    ]


_writers: PerLoop[GroupWriter] = PerLoop(GroupWriter)
# The writer of the running event loop.
get_writer = _writers.get


async def close_writer() -> None:
    """Close the running loop's writer, if it has one."""
    writer = _writers.pop()
    if writer is not None:
        await writer.close()
