"""A Chainlit client for the bench's measurements: python-socketio's asyncio client speaking to
Chainlit's socket.io as its React client does (libs/react-client, useChatSession and
useChatInteract): connect to /ws/socket.io with a new sessionId in `auth` (and the sign-in cookie),
emit `connection_successful`, then `client_message` with a user step.

`connect` and the socket it returns stand in for bench/clients.py's `connect` and WebSocket, so
that bench/concurrency.py's `level` runs and checks Chainlit's streams as it does the project's:
Chainlit's events become PROTOCOL-shaped frames, numbered here in arrival order, `task_start`
(the message taken) as `user_message`, `stream_start` (its step carries the first token) and
each `stream_token` as `text`, `task_end` as `complete`.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime

import socketio

PATH = "/ws/socket.io"


class ChainlitSocket:
    def __init__(self) -> None:
        self.client = socketio.AsyncClient(reconnection=False)
        self.frames: asyncio.Queue[dict] = asyncio.Queue()
        self.ready = asyncio.Event()  # the task_end that answers connection_successful
        self.asked = False
        self.seq = 0
        self.client.on("task_start", self._task_start)
        self.client.on("stream_start", self._stream_start)
        self.client.on("stream_token", self._token)
        self.client.on("task_end", self._task_end)
        self.client.on("new_message", self._message)
        self.client.on("disconnect", self._disconnect)

    def _push(self, frame: dict) -> None:
        self.seq += 1
        self.frames.put_nowait({**frame, "seq": self.seq})

    async def _task_start(self, _data) -> None:
        if self.asked:
            self._push({"type": "user_message"})

    async def _stream_start(self, step: dict) -> None:
        # Chainlit's first stream_token call sends the message's step, the first token its output.
        self._push({"type": "text", "content": step["output"]})

    async def _token(self, data: dict) -> None:
        self._push({"type": "text", "content": data["token"]})

    async def _task_end(self, _data) -> None:
        if self.asked:
            self._push({"type": "complete", "status": "succeeded"})
        self.ready.set()

    async def _message(self, data: dict) -> None:
        if data.get("isError"):  # Chainlit's ErrorMessage: a problem, as an error frame without a seq
            self.frames.put_nowait({"type": "error", "code": "chainlit_error", "message": data.get("output")})

    async def _disconnect(self, *_reason) -> None:
        self.frames.put_nowait({"type": "error", "code": "disconnected"})

    async def send(self, text: str) -> None:
        """A bench/clients.py `message` frame, sent as the React client's sendMessage sends it."""
        frame = json.loads(text)
        self.asked = True
        step = {
            "threadId": "",
            "id": str(uuid.uuid4()),
            "name": "User",
            "type": "user_message",
            "output": frame["content"],
            "createdAt": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        }
        await self.client.emit("client_message", {"message": step, "fileReferences": []})

    async def recv(self) -> str:
        return json.dumps(await self.frames.get())

    async def close(self) -> None:
        await self.client.disconnect()


async def connect(base: str, conversation_id: str, session: str, *, after: int = 0, timeout: float = 30.0):
    """bench/clients.py's connect for Chainlit: `session` is its auth cookie ('-' for none); the
    conversation is the socket's own new thread. Returns once the session is ready."""
    socket = ChainlitSocket()
    headers = {"Cookie": session} if session and session != "-" else {}
    auth = {"clientType": "webapp", "sessionId": str(uuid.uuid4()), "threadId": "", "userEnv": "{}", "chatProfile": ""}
    await socket.client.connect(
        base, socketio_path=PATH, transports=["websocket"], headers=headers, auth=auth, wait_timeout=timeout
    )
    await socket.client.emit("connection_successful")
    await asyncio.wait_for(socket.ready.wait(), timeout)
    return socket, {"type": "sync", "lastSeq": 0}, []
