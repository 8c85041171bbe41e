"""The WebSocket protocol (docs/protocol.md, "The WebSocket"), and nothing else: runs live in chat.runtime.

Connect order (Zulip's register-then-fetch): join the conversation's group,
then read the history after `after`, send it and `sync`. Live batches that
arrived meanwhile are handled after connect returns, and any frame whose seq
was already sent is dropped; a batch that starts past the next seq means the
layer lost something, and the gap is read from the database. A lost last batch
is found by the process's tail watch (chat.doors.socket.tail_watch).

What a socket costs the database: its sign-in and its resume, each read with the
other sockets connecting at the same time (chat.doors.socket.arrivals); then nothing
while it is idle (a ping is answered from memory), a re-check of its credential
now and then when it acts, and a read when the tail watch finds it behind.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson
from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from django.db import DatabaseError

from chat.accounts import sockets
from chat.accounts.held_credentials import HeldCredential
from chat.accounts.revocation import user_group
from chat.agent.text import clean_value
from chat.doors.socket import arrivals
from chat.doors.socket.tail_watch import get_watch
from chat.eventlog.frames import sync_frame
from chat.eventlog.reads import EVENT_PAGE, events_after, history_page
from chat.realtime.hub import HubConsumer
from chat.runs import engine
from chat.runs.client_frames import (
    ProtocolError,
    after_param,
    already_answered,
    parse_frame,
    queue_id_field,
)
from chat.runs.requests import Unqueue, approve_request, cancel_request, compact_request, start_request
from chat.runtime.doorbell import conversation_group
from chat.runtime.registry import get_registry

try:  # daphne's WebSocket layer: a send racing the peer's disconnect raises this
    from autobahn.exception import Disconnected as PeerGone
except ImportError:  # another ASGI server: nothing of the kind to catch
    PeerGone = ()  # type: ignore[assignment,misc]

logger = logging.getLogger(__name__)


CLOSE_NOT_LOGGED_IN = 4401
CLOSE_NOT_FOUND = 4404
CLOSE_TOO_MANY_SOCKETS = 4429
# The server could not reach its database or channel layer while the socket connected: the
# client reconnects with `after` (WebSocket's own "try again later"; the page retries any code
# but 4401 and 4404).
CLOSE_TRY_AGAIN = 1013

PONG = {"type": "pong"}

# The catch-ups under way (a task nobody holds may be collected before it ends).
_catching_up: set[asyncio.Task] = set()


class ChatConsumer(HubConsumer):
    """A socket. Its layer messages (doorbells, revocations) come through the process's hub
    (HubConsumer), handled once the connect has sent `sync`."""

    conversation = None
    last_seq = 0
    seat: sockets.Seat | None = None  # its place under the user's cap (chat.accounts.sockets)
    revoked = False
    credential: HeldCredential | None = None  # what the handshake signed in with, re-checked
    _sending: asyncio.Lock | None = None  # one sender at a time: live frames, pings' and the layer's catch-ups
    _tail_reading = False  # a catch-up asked by the tail watch or a ping is under way

    def __init__(self, conversation_id=None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.conversation_id = conversation_id  # from its path (chat.doors.socket.routing)

    async def connect(self) -> None:
        # Accepted before anything else. A restarted server's pages all reconnect at once and
        # their sign-ins queue on the ORM thread; daphne refuses (403) or drops a handshake not
        # accepted within its connect timeout (5 s), and the page tries again: at 10,000 sockets
        # the retries kept the queue full, and after 300 s 8,138 had not synced. Accepted, a
        # socket waits its turn; a refusal below was already an accept then a close with its
        # code, nothing sent before it.
        await self.accept()
        conversation_id = self.conversation_id
        try:
            # Trip one to the ORM thread, shared with the handshakes that came meanwhile: who signs
            # in, and their conversation (its own columns only: a run start reads its agent afresh).
            signed, conversation = await arrivals.sign_in(self.scope, conversation_id)
        except Exception:
            await self._try_again_later()
            return
        if signed is None:
            await self.close(code=CLOSE_NOT_LOGGED_IN)
            return
        self.user = signed.user
        self.credential = HeldCredential(self.user.pk, signed.token_id, signed.session_key)
        self.seat = sockets.take(self.user.pk, sockets.SOCKET)
        if self.seat is None:
            await self.close(code=CLOSE_TOO_MANY_SOCKETS)
            return
        try:
            await self._join(conversation)
        except asyncio.CancelledError:
            self._uncount()  # a connect that raised is followed by no disconnect
            raise
        except Exception:
            self._uncount()
            await self._try_again_later()

    async def _try_again_later(self) -> None:
        # The database or the layer failed under the connect (an outage, a restart): a code
        # the page reconnects on, not Channels' 1011 and a traceback per socket.
        logger.warning("a socket could not connect; closed with %s", CLOSE_TRY_AGAIN, exc_info=True)
        await self.close(code=CLOSE_TRY_AGAIN)

    async def _join(self, conversation) -> None:
        # Joined before anything else, so that a session ending from here on reaches it.
        await self.join(user_group(self.user.pk))
        if conversation is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.conversation = conversation
        # An `after` past the end (a stale or forged client) would hide the next events as
        # "already sent"; clamped, the client just gets everything from the real end on.
        self.last_seq = min(after_param(self.scope.get("query_string", b"")), conversation.last_seq)
        self._sending = asyncio.Lock()
        await self.join(conversation_group(conversation.pk))
        await get_registry().ensure_started()
        async with self._sending:
            # Trip two, shared with the sockets that joined meanwhile (one more per page of a
            # history longer than one): the history after `after`, then whether a run is under
            # way, read after the history.
            frames, state = await arrivals.resume(conversation.pk, self.last_seq)
            while True:
                for frame in frames:
                    await self._send_frame(frame)
                if state is not None:
                    break
                frames, state = await database_sync_to_async(history_page)(
                    conversation_id=conversation.pk, after=self.last_seq
                )
        run, pending, waiting, steers = state
        await self._send_json(
            sync_frame(last_seq=self.last_seq, run=run, pending=pending, queue=waiting, steers=steers)
        )
        self.go_live()
        get_watch().add(conversation.pk, self)

    def _uncount(self) -> None:
        if self.seat is not None:
            self.seat.release()

    async def disconnect(self, code: int) -> None:
        self._uncount()
        if self.conversation is not None:
            get_watch().remove(self.conversation.pk, self)
        await self.leave_all()

    def layer_back(self) -> None:
        """The hub: the channel layer came back after an outage, or a publish of this process
        failed: what the socket missed meanwhile is in the database, and so is whether its
        credential still holds (a revocation pushed meanwhile was lost with the layer)."""
        get_watch().catch_up_soon()  # one read for every socket of the process
        self._in_background(self._recheck(), name="socket-recheck")

    def tail_missing(self, seq: int) -> None:
        """The tail watch (chat.doors.socket.tail_watch): the conversation had reached `seq`."""
        if seq > self.last_seq and not self._tail_reading and not self.revoked:
            self._tail_reading = True
            self._in_background(self._read_tail(), name="socket-tail")

    async def _read_tail(self) -> None:
        try:
            await self._catch_up()
        finally:
            self._tail_reading = False

    async def _recheck(self) -> None:
        assert self.credential is not None  # the hub knows joined sockets only
        try:
            valid = self.credential.checked(await arrivals.still_current(self.credential))
        except DatabaseError:  # the database is away too: the next frame re-checks
            logger.warning("a socket could not re-check its credential", exc_info=True)
            return
        if not valid:
            await self._revoke()

    @staticmethod
    def _in_background(coro, *, name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        _catching_up.add(task)
        task.add_done_callback(_catching_up.discard)

    async def session_revoked(self, message: dict[str, Any]) -> None:
        """chat.accounts.revocation: a credential of the user ended (this one, or every one)."""
        if self.credential is not None and self.credential.revoked_by(message):
            await self._revoke()

    async def conversation_deleted(self, message: dict[str, Any]) -> None:
        """chat.realtime.deletion: the conversation was deleted, through any process."""
        await self._revoke(code=CLOSE_NOT_FOUND)

    async def _revoke(self, code: int = CLOSE_NOT_LOGGED_IN) -> None:
        if not self.revoked:
            self.revoked = True
            await self.close(code=code)

    async def _session_still_valid(self) -> bool:
        assert self.credential is not None  # a socket that receives frames has signed in
        if not self.credential.due():
            return True
        return self.credential.checked(await database_sync_to_async(self.credential.is_current)())

    # -- client -> server --------------------------------------------------------------
    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.conversation is None or self.revoked:
            return
        kind = None
        try:
            frame = parse_frame(text_data)
            kind = frame["type"]
            if kind == "ping":
                await self._ping()
                return
            if not await self._session_still_valid():
                await self._revoke()
                return
            if kind in ("message", "edit", "regenerate"):
                # first: this socket has seen no event of the conversation
                asked = await start_request(
                    kind,
                    frame,
                    conversation=self.conversation,
                    user=self.user,
                    first=self.last_seq == 0,
                    api_token_id=self.credential.token_id,
                )
                await engine.send(asked)
            elif kind == "compact":
                await engine.start(
                    compact_request(
                        frame, conversation=self.conversation, user=self.user, api_token_id=self.credential.token_id
                    )
                )
            elif kind == "cancel":
                await engine.cancel(cancel_request(frame, conversation_id=self.conversation.pk))
            elif kind == "unqueue":
                await engine.unqueue(Unqueue(self.conversation.pk, queue_id_field(frame)))
            elif kind == "approve":
                await engine.approve(
                    approve_request(frame, conversation_id=self.conversation.pk, reply_to=self.address())
                )
        except ProtocolError as exc:
            await self._send_json(
                {"type": "error", "code": exc.code, "message": exc.message, "detail": exc.detail, **exc.extra}
            )
        except DatabaseError:
            # The database is down or restarting: the socket stays, the frame is refused (nothing
            # of it was stored; a ping is answered all the same, _ping).
            logger.warning("a %s frame failed on the database", kind, exc_info=True)
            exc = engine.database_unavailable()
            await self._send_json({"type": "error", "code": exc.code, "message": exc.message, "detail": exc.detail})

    async def _ping(self) -> None:
        """`pong`, with no trip to the database: 10,000 idle sockets ping 500 times a second.
        What a lost doorbell left out is read only when the process's tail watch has seen the
        conversation go past this socket (chat.doors.socket.tail_watch), and a credential that
        ended is pushed (session_revoked); the frames that act re-check it (receive)."""
        await self._send_json(PONG)
        self.tail_missing(get_watch().known(self.conversation.pk))

    async def approval_refused(self, message: dict[str, Any]) -> None:
        """Our answer reached the run's process after another answer (or the expiry) had won."""
        exc = already_answered()
        await self._send_json({"type": "error", "code": exc.code, "message": exc.message, "detail": exc.detail})

    # -- server -> client --------------------------------------------------------------
    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels hops to the ORM thread before every handler to close stale connections.
        # A doorbell rarely touches the database, and at ~20 a second per socket those
        # hops queued every run start behind them (C = 200: first text 2 s later). A client
        # frame's hop queued behind the run starts just the same, and made 200 messages sent
        # at once reach the registry in dribs: the run starts close stale connections
        # themselves, once per group, on the thread where they query (registry). The connect's
        # hop queued a reconnect storm's handshakes a turn more: every trip to the ORM thread
        # (database_sync_to_async) closes stale connections anyway, so no handler needs it.
        if message["type"] == "chat.events":
            await self.chat_events(message)
        elif message["type"] == "websocket.receive":
            await self.websocket_receive(message)
        else:
            handler = getattr(self, get_handler_name(message), None)
            if handler is None:
                raise ValueError(f"No handler for message type {message['type']}")
            await handler(message)

    async def chat_events(self, message: dict[str, Any]) -> None:
        if self.revoked:
            return
        frames = message["events"]
        assert self._sending is not None  # doorbells ring joined sockets only
        async with self._sending:
            if frames and frames[0]["seq"] > self.last_seq + 1:
                try:
                    await self._send_from_database(until=frames[0]["seq"] - 1)
                except DatabaseError:  # the gap stays; the next doorbell, ping or catch-up fills it
                    logger.warning("a socket could not read a gap from the database", exc_info=True)
                    return
            for frame in frames:
                if frame["seq"] > self.last_seq:
                    await self._send_frame(frame)

    async def chat_title(self, message: dict[str, Any]) -> None:
        """A generated title (chat.runtime.titles): said once, as it comes, never replayed."""
        if self.revoked or self._sending is None:
            return
        async with self._sending:
            await self._send_json({"type": "title", "title": message["title"]})

    async def _catch_up(self) -> None:
        if self.revoked or self._sending is None:
            return
        async with self._sending:
            try:
                await self._send_from_database()
            except DatabaseError:
                logger.warning("a socket could not catch up from the database", exc_info=True)

    async def _send_from_database(self, until: int | None = None) -> None:
        while True:
            frames = await database_sync_to_async(events_after)(
                conversation_id=self.conversation.pk, after=self.last_seq, until=until, limit=EVENT_PAGE
            )
            for frame in frames:
                await self._send_frame(frame)
            if len(frames) < EVENT_PAGE:
                return

    async def _send_frame(self, frame: dict[str, Any]) -> None:
        await self._send_json(frame)
        self.last_seq = frame["seq"]

    async def _send_json(self, data: dict[str, Any]) -> None:
        if self.behind:  # a slow consumer being closed: the close is all it gets (HubConsumer.fall_behind)
            return
        # orjson: 0.3 us a frame against json.dumps' 3.8 us, and every frame goes through here.
        try:
            text = orjson.dumps(data).decode()
        except TypeError:  # a surrogate stored before text was cleaned on the way in: cleaned, not a dead socket
            text = orjson.dumps(clean_value(data)).decode()
        try:
            await self.send(text_data=text)
        except PeerGone:
            # The peer dropped the connection (daphne's autobahn does on a text frame that is not
            # UTF-8) and its disconnect is still on its way: nothing left to send to.
            pass
