"""An HTTP request to the real ASGI application as daphne makes it, its response read message by
message: for streamed responses (server-sent events, streamed completions) and for what the
handler does around a request."""

from __future__ import annotations

import asyncio

import orjson

from agentsite.asgi import application


class RawStream:
    """One request of a stream as daphne would make it (a GET, or a POST with a JSON body): the
    ASGI messages the app sends, in order."""

    def __init__(self, path: str, headers: list[tuple[bytes, bytes]], *, body: dict | None = None):
        path, _, query = path.partition("?")
        self.body = b"" if body is None else orjson.dumps(body)
        if body is not None:
            headers = [(b"content-type", b"application/json"), *headers]
        self.scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET" if body is None else "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "headers": [(b"host", b"localhost"), *headers],
            "client": ("127.0.0.1", 5000),
            "server": ("localhost", 80),
        }
        self.sent: asyncio.Queue = asyncio.Queue()
        self.gone = asyncio.Event()
        self.requested = False

    async def _receive(self):
        if not self.requested:
            self.requested = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message):
        await self.sent.put(message)

    async def open(self) -> dict:
        self.task = asyncio.create_task(application(self.scope, self._receive, self._send))
        start = await asyncio.wait_for(self.sent.get(), 10)
        assert start["type"] == "http.response.start"
        return start

    async def chunk(self, timeout: float = 10.0) -> bytes | None:
        """The next body chunk; None once the response has ended."""
        while True:
            message = await asyncio.wait_for(self.sent.get(), timeout)
            if message.get("body"):
                return message["body"]
            if not message.get("more_body", False):
                return None

    async def rest(self) -> bytes:
        """The rest of the body, to the response's end."""
        body = b""
        while True:
            message = await asyncio.wait_for(self.sent.get(), 10)
            body += message.get("body", b"")
            if not message.get("more_body", False):
                return body

    async def close(self) -> None:
        self.gone.set()
        await asyncio.wait_for(self.task, 10)
