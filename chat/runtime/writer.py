"""GroupWriter: the batches of every run of one event loop, stored in one transaction.

While one transaction runs, the next round's batches gather (group commit):
hundreds of streams cost a few commits a second instead of twenty each. The
writer has a thread (and so a database connection) of its own: streaming runs'
batches never queue behind the connects and run starts that share
sync_to_async's single thread.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from django import db

from chat import services
from chat.frames import EventFrame

from .batching import Batcher
from .perloop import PerLoop


class GroupWriter:
    def __init__(self) -> None:
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="event-writer")
        self._rounds: Batcher[services.EventBatch, list[EventFrame]] = Batcher(self._store, name="event-group-writer")

    def submit(self, batch: services.EventBatch) -> asyncio.Future:
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

    async def _store(self, batches: list[services.EventBatch]) -> list:
        return await asyncio.get_running_loop().run_in_executor(self._thread, _store, batches)


def _close_connection() -> None:
    try:
        db.connection.close()
    except db.DatabaseError:  # a connection this thread did not open (a test's shared one) is not ours
        pass


def _store(batches: list[services.EventBatch]) -> list:
    """Each batch's frames, or the exception that kept it out (ConversationGone: deleted)."""
    try:
        return _gone_as_errors(batches, services.events_append_many(batches=batches))
    except Exception as exc:
        db.connection.close()  # the writer's connection lives on: never reuse a broken one
        if len(batches) == 1:
            return [exc]
    results = []  # one bad batch must not fail the others: store them one by one
    for batch in batches:
        try:
            results += _gone_as_errors([batch], services.events_append_many(batches=[batch]))
        except Exception as exc:
            db.connection.close()
            results.append(exc)
    return results


def _gone_as_errors(batches, results) -> list:
    return [
        services.ConversationGone(str(batch.conversation_id)) if frames is None else frames
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
