"""The WebSocket protocol (PROTOCOL.md section 3), and nothing else: runs live in chat.runtime.

Connect order (Zulip's register-then-fetch): join the conversation's group,
then read the history after `after`, send it and `sync`. Live batches that
arrived meanwhile are handled after connect returns, and any frame whose seq
was already sent is dropped; a batch that starts past the next seq means the
layer lost something, and the gap is read from the database.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from . import selectors, services
from .runtime.doorbell import conversation_group
from .runtime.registry import get_registry
from .text import clean_value, invalid_reason

logger = logging.getLogger(__name__)

CLOSE_NOT_LOGGED_IN = 4401
CLOSE_NOT_FOUND = 4404


class ProtocolError(Exception):
    def __init__(self, code: str, message: str, detail: str = ""):
        super().__init__(message)
        self.code, self.message, self.detail = code, message, detail


class ChatConsumer(AsyncWebsocketConsumer):
    conversation = None
    group = None
    last_seq = 0

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.accept()
            await self.close(code=CLOSE_NOT_LOGGED_IN)
            return
        self.user = user
        conversation_id = self.scope["url_route"]["kwargs"]["conversation_id"]
        self.conversation = await sync_to_async(selectors.conversation_for_user)(
            user=user, conversation_id=conversation_id
        )
        if self.conversation is None:
            await self.accept()
            await self.close(code=CLOSE_NOT_FOUND)
            return
        # An `after` past the end (a stale or forged client) would hide the next events as
        # "already sent"; clamped, the client just gets everything from the real end on.
        self.last_seq = min(_after_param(self.scope.get("query_string", b"")), self.conversation.last_seq)
        self.group = conversation_group(self.conversation.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await get_registry().ensure_started()
        await self._send_from_database()
        run = await sync_to_async(selectors.running_run)(conversation_id=self.conversation.pk)
        await self._send_json(
            {"type": "sync", "lastSeq": self.last_seq, "running": run is not None,
             "runId": str(run.pk) if run else None}
        )

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    # -- client -> server --------------------------------------------------------------
    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.conversation is None:
            return
        try:
            frame = _parse(text_data)
            kind = frame["type"]
            if kind == "message":
                await self._start_run(_message_content(frame))
            elif kind == "cancel":
                await get_registry().cancel(conversation_id=self.conversation.pk)
            elif kind == "ping":
                await self._send_json({"type": "pong"})
                # A cheap catch-up: if the layer dropped the tail of a run, the next ping finds it.
                await self._send_from_database()
        except ProtocolError as exc:
            await self._send_json({"type": "error", "code": exc.code, "message": exc.message, "detail": exc.detail})

    async def _start_run(self, content: str) -> None:
        try:
            await get_registry().start(conversation=self.conversation, user=self.user, content=content)
        except services.RunInProgress:
            raise ProtocolError("RUN_IN_PROGRESS", "A run is already in progress in this conversation.") from None
        except services.RateLimited as exc:
            raise ProtocolError("RATE_LIMITED", "Too many messages; wait a minute.", str(exc)) from None

    # -- server -> client --------------------------------------------------------------
    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels hops to the ORM thread before every handler to close stale connections.
        # A doorbell rarely touches the database, and at ~20 a second per socket those
        # hops queued every run start behind them (C = 200: first text 2 s later).
        if message["type"] == "chat.events":
            await self.chat_events(message)
        else:
            await super().dispatch(message)

    async def chat_events(self, message: dict[str, Any]) -> None:
        frames = message["events"]
        if frames and frames[0]["seq"] > self.last_seq + 1:
            await self._send_from_database(until=frames[0]["seq"] - 1)
        for frame in frames:
            if frame["seq"] > self.last_seq:
                await self._send_frame(frame)

    async def _send_from_database(self, until: int | None = None) -> None:
        while True:
            frames = await sync_to_async(selectors.events_after)(
                conversation_id=self.conversation.pk, after=self.last_seq, until=until, limit=selectors.EVENT_PAGE
            )
            for frame in frames:
                await self._send_frame(frame)
            if len(frames) < selectors.EVENT_PAGE:
                return

    async def _send_frame(self, frame: dict[str, Any]) -> None:
        await self._send_json(frame)
        self.last_seq = frame["seq"]

    async def _send_json(self, data: dict[str, Any]) -> None:
        # orjson: 0.3 us a frame against json.dumps' 3.8 us, and every frame goes through here.
        try:
            text = orjson.dumps(data).decode()
        except TypeError:  # a surrogate stored before chat.text existed: cleaned, not a dead socket
            text = orjson.dumps(clean_value(data)).decode()
        await self.send(text_data=text)


def _after_param(query_string: bytes) -> int:
    from urllib.parse import parse_qs

    values = parse_qs(query_string.decode("latin-1")).get("after")
    try:
        return max(0, int(values[0])) if values else 0
    except ValueError:
        return 0


def _parse(text_data: str | None) -> dict[str, Any]:
    if text_data is None:
        raise ProtocolError("BAD_REQUEST", "Frames must be JSON text.", "binary frame")
    try:
        frame = json.loads(text_data)
    except ValueError as exc:
        raise ProtocolError("BAD_REQUEST", "The frame is not valid JSON.", str(exc)) from None
    if not isinstance(frame, dict):
        raise ProtocolError("BAD_REQUEST", "The frame must be a JSON object.", type(frame).__name__)
    kind = frame.get("type")
    if "type" not in frame:
        raise ProtocolError("BAD_REQUEST", "The frame has no type.", "missing field: type")
    if not isinstance(kind, str):
        raise ProtocolError("BAD_REQUEST", "The frame type must be a string.", "wrong type: type")
    if kind not in ("message", "cancel", "ping"):
        raise ProtocolError("BAD_REQUEST", f"Unknown frame type {kind[:50]!r}.", "unknown type")
    return frame


def _message_content(frame: dict[str, Any]) -> str:
    if "content" not in frame:
        raise ProtocolError("BAD_REQUEST", "A message needs a content field.", "missing field: content")
    content = frame["content"]
    if not isinstance(content, str):
        raise ProtocolError("BAD_REQUEST", "The content must be a string.", "wrong type: content")
    if not content.strip():
        raise ProtocolError("BAD_REQUEST", "The message is empty.", "empty content")
    limit = settings.AGENT_MAX_MESSAGE_CHARS
    if len(content) > limit:
        raise ProtocolError("TOO_LARGE", f"The message is longer than {limit} characters.", f"{len(content)} > {limit}")
    reason = invalid_reason(content)
    if reason:
        raise ProtocolError("BAD_REQUEST", "The message contains text that cannot be stored.", f"content: {reason}")
    return content
