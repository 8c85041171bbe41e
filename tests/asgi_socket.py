"""A WebSocket client of the real ASGI application, speaking JSON as the page does, signed in
with a real session cookie."""

from __future__ import annotations

import json

from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from agentsite.asgi import application


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


class Socket:
    """A WebsocketCommunicator speaking JSON, for the real ASGI application."""

    def __init__(
        self,
        user,
        conversation_id,
        *,
        after: int | None = None,
        origin: str | None = "http://localhost",
        token: str | None = None,
    ):
        """Signed in with `user`'s session cookie, or with an API token (then no cookie is sent
        unless `user` is given too); `origin` None sends no Origin header, as a program does."""
        self.user = user
        self.token = token
        self.path = f"/ws/chat/{conversation_id}/" + (f"?after={after}" if after is not None else "")
        self.origin = origin
        self.comm = None

    async def connect(self):
        headers = [(b"host", b"localhost")]
        if self.origin is not None:
            headers.append((b"origin", self.origin.encode()))
        if self.token is not None:
            headers.append((b"authorization", f"Bearer {self.token}".encode()))
        if self.user is not None:
            cookie = await sync_to_async(session_cookie)(self.user)
            headers.append((b"cookie", f"sessionid={cookie}".encode()))
        self.comm = WebsocketCommunicator(application, self.path, headers=headers)
        return await self.comm.connect(timeout=5)

    async def send(self, frame) -> None:
        await self.comm.send_to(text_data=frame if isinstance(frame, str) else json.dumps(frame))

    async def recv(self, timeout: float = 5) -> dict:
        return json.loads(await self.comm.receive_from(timeout=timeout))

    async def until(self, predicate, timeout: float = 10) -> list[dict]:
        frames = []
        while True:
            frame = await self.recv(timeout)
            frames.append(frame)
            if predicate(frame):
                return frames

    async def history(self) -> list[dict]:
        """Frames up to and including sync."""
        return await self.until(lambda f: f["type"] == "sync")

    async def run_to_end(self) -> list[dict]:
        return await self.until(lambda f: f["type"] == "complete")

    async def silent(self, timeout: float = 0.3) -> bool:
        return await self.comm.receive_nothing(timeout=timeout)

    async def close(self) -> None:
        await self.comm.disconnect()
