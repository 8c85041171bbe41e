from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from agentsite.asgi import application
from chat import assistant, services
from chat.runtime.registry import get_registry


@pytest.fixture
def make_user():
    def make(name: str = "alice"):
        return get_user_model().objects.create_user(username=name, password="pw-for-tests-123")

    return make


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


class Socket:
    """A WebsocketCommunicator speaking JSON, for the real ASGI application."""

    def __init__(self, user, conversation_id, *, after: int | None = None, origin: str = "http://localhost"):
        self.user = user
        self.path = f"/ws/chat/{conversation_id}/" + (f"?after={after}" if after is not None else "")
        self.origin = origin
        self.comm = None

    async def connect(self):
        headers = [(b"origin", self.origin.encode()), (b"host", b"localhost")]
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


@pytest.fixture
async def registry():
    registry = get_registry()
    yield registry
    await registry.wait_idle()
    await assistant.close_client()  # its connections belong to this test's event loop
    await registry.close()
    # The ORM thread's connection would keep PostgreSQL from dropping the test database.
    await sync_to_async(lambda: connection.close())()


@pytest.fixture
def conversation(make_user):
    return services.conversation_create(owner=make_user("alice"), title="test")
