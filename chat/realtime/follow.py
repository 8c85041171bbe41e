"""Following a conversation's events live, for the doors that stream over HTTP: the SSE stream
(chat.doors.sse), the OpenAI-compatible door's streamed completions (chat.doors.openai), and
this round's Responses and AG-UI doors. A Stream yields the conversation's frames in seq order
exactly as the WebSocket sends them; each door renders them in its own format.

The order is the socket's (register-then-fetch): the stream joins the conversation's group before
the history is read, live batches whose seq was already sent are dropped, and a batch that starts
past the next seq has its gap read from the database. Every tick (the keep-alive, the credential
re-check) also reads what the layer may have lost.

A stream is served as the process's sockets are, by the hub (chat.realtime.hub): its groups'
messages reach the process's one channel and are handed to the stream's queue, so a stream has
no channel of the layer (on Redis, no subscription) of its own.

The credential holds for the stream's life: a revocation pushed to the user's group
(chat.accounts.revocation) ends it at once, and the session or token is re-checked every
held_credentials.SESSION_RECHECK_SECONDS for a push that was lost. The conversation's deletion,
pushed to its group (chat.realtime.deletion), ends it at once with an `error` frame NOT_FOUND.
`until_complete` ends it after the first `complete` past `after` of a top-level run that has a
user_message (a child run's, docs/protocol.md "Sub-agents", and a compaction run's,
"Compaction", do not end it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from django.db import DatabaseError

from chat.accounts import held_credentials
from chat.accounts.held_credentials import HeldCredential
from chat.accounts.revocation import REVOKED, user_group
from chat.agent.batching import GroupedCalls
from chat.eventlog.compacting import turn_runs
from chat.eventlog.frames import CHILD_KEY, sync_frame
from chat.eventlog.reads import EVENT_PAGE, events_after, sync_state
from chat.realtime.backlog import FELL_BEHIND, Backlog, give_up
from chat.realtime.deletion import DELETED
from chat.realtime.ending import to_the_end
from chat.realtime.hub import get_hub
from chat.runtime.doorbell import conversation_group
from chat.runtime.registry import get_registry
from serving.loop_middleware import request_db

logger = logging.getLogger(__name__)

# A comment line this often keeps proxies and clients from timing the stream out: every door
# that streams over HTTP speaks server-sent events, and writes KEEPALIVE as it comes.
KEEPALIVE_SECONDS = 15.0
KEEPALIVE = b": keep-alive\n\n"
# What the stream's queue is handed when the layer came back after an outage (Hub.layer_back).
LAYER_BACK = "stream.layer_back"
# The last frame of a stream whose conversation was deleted meanwhile.
DELETED_FRAME = {"type": "error", "code": "NOT_FOUND", "message": "This conversation was deleted."}

# The streams' reads, grouped with the other streams' of the moment: one trip to a request
# database thread per group, each read made as alone. A burst of AG-UI runs on their threads
# joined their streams with two trips each, queued on the four threads (issue 55).
_events_after = GroupedCalls(events_after, request_db, name="stream-history")
_sync_state = GroupedCalls(sync_state, request_db, name="stream-state")


class Stream:
    """One open stream: a member of the hub in the conversation's and the user's groups, the
    messages the hub hands it, and the last seq sent."""

    def __init__(
        self,
        *,
        conversation,
        user,
        token_id,
        session_key,
        after: int,
        until_complete: bool,
        new: bool = False,
        state: bool = True,
        scope: dict[str, Any] | None = None,
    ):
        """`new`: the conversation was just made for this stream and nothing is stored in it yet
        (the OpenAI-compatible endpoint's), so that once joined it has no history to read.
        `state`: whether the `sync` says the run in progress, its approvals, queue and steers; a
        door that renders only stored events (AG-UI) reads none, a trip fewer, and its `sync`
        then says none.
        `scope`: the request's, whose send buffer is given up on if the client falls behind."""
        self.conversation, self.user = conversation, user
        self.credential = HeldCredential(user.pk, token_id, session_key)
        self.last_seq = min(after, conversation.last_seq)
        self.until_complete = until_complete
        self.new = new
        self.state = state
        self.done = False
        # Why the server ended the stream: "deleted" (the conversation), "revoked" (its credential).
        self.ended_by: str | None = None
        self.behind = False  # a slow consumer (chat.realtime.backlog): it ends with SLOW_CONSUMER
        self.scope = scope or {}
        self.groups = (user_group(user.pk), conversation_group(conversation.pk))
        self._inbox = Backlog()
        self._turns: set[str] = set()  # runs known to have a user_message (until_complete)

    def deliver(self, message: dict[str, Any]) -> None:
        """The hub's: a message of the stream's groups, read by `_live` in the order it came;
        past the backlog the client has fallen too far behind, and the stream ends."""
        if not self.behind and not self._inbox.keep(message):
            self.behind = True
            give_up(self.scope)

    def layer_back(self) -> None:
        """The hub's: the layer came back after an outage; what it lost is read now, not at the tick."""
        self.deliver({"type": LAYER_BACK})

    async def frames(self) -> AsyncIterator[dict[str, Any] | bytes]:
        """The stream's frames in seq order, one `sync` frame after the history, and KEEPALIVE
        whenever the keep-alive is due (the OpenAI-compatible endpoint follows a run with it too).

        The groups are joined at the first step, which ends with the `sync` of a new stream:
        stepping to it before starting a run (the OpenAI-compatible endpoint) puts every event
        of the run after the join. Closing the iterator leaves them, and so does collecting it
        (asyncio closes a started async generator that is dropped)."""
        # Joined before anything is read (register-then-fetch), the user's group first so that a
        # credential ending from here on reaches the stream.
        hub = get_hub()
        try:
            for group in self.groups:
                await hub.join(group, self)
            await get_registry().ensure_started()
            if self.new:
                # Nothing stored before the join: no history, run or approval to read; what
                # comes next comes live, and a batch the layer loses is read by its gap.
                yield sync_frame(last_seq=self.last_seq, run=None, pending=[], queue=[], steers=[])
            else:
                for chunk in await self._from_database():
                    yield chunk
                if self.done:  # until=complete, and the complete was in the history
                    return
                run, pending, waiting, steers = (
                    await _sync_state(conversation_id=self.conversation.pk) if self.state else (None, [], [], [])
                )
                yield sync_frame(last_seq=self.last_seq, run=run, pending=pending, queue=waiting, steers=steers)
            async for chunk in self._live():
                yield chunk
        finally:
            await to_the_end(self._leave(hub))

    async def _leave(self, hub) -> None:
        for group in self.groups:
            await hub.leave(group, self)

    async def _live(self) -> AsyncIterator[dict[str, Any] | bytes]:
        kept_at = time.monotonic()
        self.credential.checked(True)  # checked when the request came in
        tick = min(KEEPALIVE_SECONDS, held_credentials.SESSION_RECHECK_SECONDS)
        # One get waits across the ticks (a get timed out at each tick would be a task a tick).
        receiving: asyncio.Future | None = None
        try:
            while not self.done and not self.behind:
                if receiving is None:
                    receiving = asyncio.ensure_future(self._inbox.get())
                await asyncio.wait((receiving,), timeout=tick)
                message = None
                if receiving.done():
                    message, receiving = receiving.result(), None
                now = time.monotonic()
                kind = message.get("type") if message is not None else None
                if kind == REVOKED:
                    if self.credential.revoked_by(message):
                        self.ended_by = "revoked"
                        return
                elif kind == DELETED:
                    self.ended_by = "deleted"
                    yield {**DELETED_FRAME}
                    return
                elif kind == FELL_BEHIND:
                    return
                elif kind == "chat.events":
                    for chunk in await self._batch(message["events"]):
                        yield chunk
                elif kind == "chat.title":  # a generated title (chat.runtime.titles): no seq, no id
                    yield {"type": "title", "title": message["title"]}
                elif kind == LAYER_BACK:
                    for chunk in await self._from_database():
                        yield chunk
                if self.credential.due():
                    if not self.credential.checked(await self._credential_holds()):
                        self.ended_by = "revoked"
                        return
                    for chunk in await self._from_database():  # what the layer may have lost
                        yield chunk
                if now - kept_at >= KEEPALIVE_SECONDS and not self.done:
                    kept_at = now
                    yield KEEPALIVE
        finally:
            if receiving is not None:
                receiving.cancel()

    async def _credential_holds(self) -> bool:
        try:
            return await request_db(self.credential.is_current)()
        except DatabaseError:  # not known to have ended: checked again at the next tick
            logger.warning("a stream could not re-check its credential", exc_info=True)
            return True

    async def _batch(self, frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if frames and frames[0]["seq"] > self.last_seq + 1:
            out += await self._from_database(until=frames[0]["seq"] - 1)
            if frames[0]["seq"] > self.last_seq + 1:  # the gap could not be read: the next tick fills it
                return out
        await self._learn_turns(frames)
        for frame in frames:
            if frame["seq"] > self.last_seq and not self.done:
                out.append(self._send(frame))
        return out

    async def _learn_turns(self, frames: list[dict[str, Any]]) -> None:
        """For until_complete: which runs whose `complete` is among `frames` have a user_message
        (a compaction run's complete does not end the stream). Read only for runs not seen
        starting; a database that does not answer counts them as turns (the stream ends)."""
        if not self.until_complete:
            return
        self._turns |= {str(f.get("runId")) for f in frames if f["type"] == "user_message"}
        unknown = {
            str(f.get("runId"))
            for f in frames
            if f["type"] == "complete" and CHILD_KEY not in f and str(f.get("runId")) not in self._turns
        }
        if unknown:
            try:
                self._turns |= await request_db(turn_runs)(run_ids=unknown)
            except DatabaseError:
                self._turns |= unknown

    async def _from_database(self, until: int | None = None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        try:
            while not self.done:
                frames = await _events_after(
                    conversation_id=self.conversation.pk, after=self.last_seq, until=until, limit=EVENT_PAGE
                )
                await self._learn_turns(frames)
                out += [self._send(frame) for frame in frames if not self.done]
                if len(frames) < EVENT_PAGE:
                    break
        except DatabaseError:
            logger.warning("a stream could not read from the database", exc_info=True)
        return out

    def _send(self, frame: dict[str, Any]) -> dict[str, Any]:
        self.last_seq = frame["seq"]
        if self.until_complete and frame["type"] == "complete" and CHILD_KEY not in frame:  # a top-level run's
            self.done = self.done or str(frame.get("runId")) in self._turns  # not a compaction run's
        return frame
