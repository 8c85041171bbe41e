"""The reference row's server: the least a Channels server can do to stream a model to a socket.

One AsyncWebsocketConsumer per socket and nothing else: no database, no login, no channel
layer, no coalescing, no agent loop. A `message` frame opens a stream through the openai
SDK (its typed `create(stream=True)`, as a tutorial would write it) and every delta goes to
the socket as a `text` frame at once. It speaks just enough of PROTOCOL (`sync`, then
`user_message`, `text` and `complete` with a contiguous `seq`) for bench/clients.py to
read and check its streams exactly as it checks the project's, so the figures compare.

    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 daphne bench.reference_relay:application
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import openai
from django.conf import settings

if not settings.configured:
    # Channels reads CHANNEL_LAYERS from Django's settings; none here, so no layer.
    settings.configure()

from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402

_client: openai.AsyncOpenAI | None = None


def model_client() -> openai.AsyncOpenAI:
    """One SDK client per process (its connection pool shared by every socket)."""
    global _client
    if _client is None:
        _client = openai.AsyncOpenAI(
            base_url=os.environ.get("OPENAI_BASE_URL"), api_key=os.environ.get("OPENAI_API_KEY", "x"), max_retries=0
        )
    return _client


class RelayConsumer(AsyncWebsocketConsumer):
    model = "fake-model"

    async def connect(self) -> None:
        self.seq = 0
        self.task: asyncio.Task | None = None
        await self.accept()
        await self.send(text_data=json.dumps({"type": "sync", "lastSeq": 0}))

    async def disconnect(self, code: int) -> None:
        if self.task is not None:
            self.task.cancel()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        frame = json.loads(text_data or "{}")
        if frame.get("type") != "message" or (self.task is not None and not self.task.done()):
            return
        await self.emit({"type": "user_message", "content": frame["content"]})
        # In a task: the consumer keeps reading its socket (a disconnect cancels the stream).
        self.task = asyncio.create_task(self.relay(frame["content"]))

    async def emit(self, frame: dict[str, Any]) -> None:
        self.seq += 1
        await self.send(text_data=json.dumps({**frame, "seq": self.seq}))

    async def relay(self, content: str) -> None:
        try:
            stream = await model_client().chat.completions.create(
                model=self.model, messages=[{"role": "user", "content": content}], stream=True
            )
            async for chunk in stream:
                for choice in chunk.choices:
                    if choice.delta.content:
                        await self.emit({"type": "text", "content": choice.delta.content})
        except openai.OpenAIError as exc:
            await self.send(text_data=json.dumps({"type": "error", "code": "model_error", "message": str(exc)}))
            return
        await self.emit({"type": "complete", "status": "succeeded"})


websocket_app = RelayConsumer.as_asgi()


async def application(scope: dict[str, Any], receive, send) -> None:
    if scope["type"] == "websocket":
        await websocket_app(scope, receive, send)
    elif scope["type"] == "http":  # the readiness probe
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"ok"})
