"""`/ws/notifications/` (docs/protocol.md, "Notifications"): the user's live bell. It signs in as
a chat socket does, in the rounds of the sockets connecting meanwhile (chat.doors.socket.arrivals), takes a place under the user's socket cap,
joins the user's group (a credential that ends closes it 4401) and the user's bell group
(chat.notifications.push), then says the unread count first; from then on each new notification
and each change of the count, on any process. It watches no conversation. Its pings cost no
database work, as a chat socket's: a revocation is pushed, and when the layer comes back after an
outage (the pushes it lost) the bell re-checks its credential and says the count again."""

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
from chat.doors.socket import arrivals
from chat.doors.socket.consumers import CLOSE_NOT_LOGGED_IN, CLOSE_TOO_MANY_SOCKETS, CLOSE_TRY_AGAIN, PONG
from chat.notifications.push import bell_group
from chat.notifications.services import unread_count
from chat.realtime.hub import HubConsumer

logger = logging.getLogger(__name__)

# The re-checks under way after the layer came back (a task nobody holds may be collected).
_rechecking: set[asyncio.Task] = set()


class BellConsumer(HubConsumer):
    seat: sockets.Seat | None = None
    credential: HeldCredential | None = None
    revoked = False

    async def connect(self) -> None:
        await self.accept()
        try:
            # With the sockets connecting meanwhile (a restarted server's pages: each a bell and a chat socket).
            signed, _ = await arrivals.sign_in(self.scope, None)
        except Exception:
            logger.warning("a bell could not connect", exc_info=True)
            await self.close(code=CLOSE_TRY_AGAIN)
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
            await self.join(user_group(self.user.pk))
            await self.join(bell_group(self.user.pk))
            # Read after the joins: a notification made meanwhile is in the count or pushed after it.
            count = await database_sync_to_async(unread_count)(user=self.user)
        except Exception:
            self._uncount()
            logger.warning("a bell could not connect", exc_info=True)
            await self.close(code=CLOSE_TRY_AGAIN)
            return
        await self._send_json({"type": "unread", "count": count})
        self.go_live()

    def _uncount(self) -> None:
        if self.seat is not None:
            self.seat.release()

    async def disconnect(self, code: int) -> None:
        self._uncount()
        await self.leave_all()

    async def dispatch(self, message: dict[str, Any]) -> None:
        # As the chat socket's: no hop to the ORM thread before each handler (a ping needs none).
        if message["type"] == "websocket.receive":
            await self.websocket_receive(message)
            return
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.credential is None or self.revoked:
            return
        try:
            frame = orjson.loads(text_data or "")
        except orjson.JSONDecodeError:
            frame = None
        if not isinstance(frame, dict) or frame.get("type") != "ping":
            await self._send_json(
                {"type": "error", "code": "BAD_REQUEST", "message": "The bell takes only ping frames.", "detail": ""}
            )
            return
        await self._send_json(PONG)

    def layer_back(self) -> None:
        """The hub: the layer came back after an outage. A revocation or a notification pushed
        meanwhile was lost with it: whether the credential holds, and the count, are read."""
        task = asyncio.create_task(self._recheck(), name="bell-recheck")
        _rechecking.add(task)
        task.add_done_callback(_rechecking.discard)

    async def _recheck(self) -> None:
        assert self.credential is not None  # the hub knows joined sockets only
        try:
            valid = self.credential.checked(await arrivals.still_current(self.credential))
            count = await database_sync_to_async(unread_count)(user=self.user) if valid else 0
        except DatabaseError:  # the database is away too: the push comes when it is back
            logger.warning("a bell could not re-check its credential", exc_info=True)
            return
        if not valid:
            await self._revoke()
            return
        await self._send_json({"type": "unread", "count": count})

    async def session_revoked(self, message: dict[str, Any]) -> None:
        if self.credential is not None and self.credential.revoked_by(message):
            await self._revoke()

    async def _revoke(self) -> None:
        if not self.revoked:
            self.revoked = True
            await self.close(code=CLOSE_NOT_LOGGED_IN)

    async def notification_new(self, message: dict[str, Any]) -> None:
        await self._send_json({"type": "notification", **message["notification"]})

    async def notification_unread(self, message: dict[str, Any]) -> None:
        await self._send_json({"type": "unread", "count": message["count"]})

    async def _send_json(self, data: dict[str, Any]) -> None:
        if self.behind or self.revoked:  # being closed: the close is all it gets
            return
        await self.send(text_data=orjson.dumps(data).decode())
