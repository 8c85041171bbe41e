"""A fake OpenAI-compatible chat-completions server: real HTTP on loopback.

The tests (and the benchmarks) point the real `openai` SDK at it. It runs an
asyncio server in a thread of its own, so sync tests, async tests and a daphne
subprocess can all talk to it, and hundreds of concurrent streams cost little.

A reply is a dict (the transcripts in tests/transcripts/*.json hold lists of them):

    {"status": 200,                 # non-200: `body` is sent as JSON, no stream
     "body": {...},
     "headers": {"retry-after": "0"},
     "chunks": [                     # each an SSE event
        {"delta": {"content": "Hi"}},                     # shorthand, wrapped into a chunk
        {"delta": {}, "finish_reason": "stop"},
        {"usage": {"prompt_tokens": 1, ...}},             # usage-only chunk
        {"error": {"message": "overloaded"}},             # a mid-stream error event
        {"raw": {...}}                                    # sent exactly as given
     ],
     "delay": 0.0,                   # seconds before each chunk
     "delays": [],                   # seconds before the first chunks, in place of `delay`
     "truncate_after": null,         # close the connection after N chunks, no [DONE]
     "done": true,                   # send "data: [DONE]" at the end
     "tail_delay": 0.0}              # seconds between [DONE] and the body's end

or a raw stream body, sent byte for byte (a recorded provider response):

    {"sse": "data: {...}\n\ndata: [DONE]\n\n",   # str or bytes; nothing is added
     "delay": 0.0}                                  # seconds before each event

Replies are served in order from a queue; when it is empty the `responder`
(a function of the request body returning a reply) answers, by default a short
fixed answer. `{"sse": ""}` is a 200 with an empty body (llama-cpp-python's answer
to a request it fails on once streaming has begun).

`connections` counts the TCP connections accepted (reuse shows as fewer than
requests; `GET /stats` answers it and the requests' count, for a client in another process);
`ssl` serves HTTPS with that server context (a throwaway CA's certificate: bench/model_tls.py);
`reject_null_content` answers an assistant message whose content is
not a string as llama-cpp-python 0.3.36's server does (HTTP 500, its pydantic text).
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl as tls
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

TRANSCRIPTS = Path(__file__).parent / "transcripts"

Reply = dict[str, Any]


def text_reply(text: str, *, thinking: str | None = None, piece: int = 4, delay: float = 0.0) -> Reply:
    """An answer streamed in pieces of `piece` characters, with optional reasoning_content first."""
    chunks: list[dict[str, Any]] = []
    if thinking:
        chunks += [{"delta": {"reasoning_content": thinking[i : i + piece]}} for i in range(0, len(thinking), piece)]
    chunks += [{"delta": {"content": text[i : i + piece]}} for i in range(0, len(text), piece)]
    chunks.append({"delta": {}, "finish_reason": "stop"})
    return {"chunks": chunks, "delay": delay}


def tool_call_reply(*calls: tuple[str, dict[str, Any] | str], delay: float = 0.0) -> Reply:
    """One round that calls the given tools: (name, arguments) pairs, ids call_0, call_1, ..."""
    chunks: list[dict[str, Any]] = []
    for index, (name, arguments) in enumerate(calls):
        args = arguments if isinstance(arguments, str) else json.dumps(arguments)
        chunks.append(
            {
                "delta": {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": f"call_{index}",
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            }
        )
        chunks.append({"delta": {"tool_calls": [{"index": index, "function": {"arguments": args}}]}})
    chunks.append({"delta": {}, "finish_reason": "tool_calls"})
    return {"chunks": chunks, "delay": delay}


def load_transcript(name: str) -> list[Reply]:
    return json.loads((TRANSCRIPTS / f"{name}.json").read_text())["replies"]


def _null_content_refusal(body: dict[str, Any]) -> dict[str, Any] | None:
    """llama-cpp-python's 500 for an assistant message whose content is null or missing."""
    for index, message in enumerate(body.get("messages") or []):
        if message.get("role") == "assistant" and not isinstance(message.get("content"), str):
            return {
                "error": {
                    "message": f"1 validation error for ChatCompletionRequestAssistantMessage\n"
                    f"messages.{index}.content\n  Input should be a valid string",
                    "type": "internal_server_error",
                }
            }
    return None


def _default_responder(body: dict[str, Any]) -> Reply:
    return text_reply("Hello from the fake model.")


class FakeLLM:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, ssl: tls.SSLContext | None = None):
        self.host = host
        self.port = port
        self.ssl = ssl
        self.replies: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        # How each streamed reply ended: "done", "truncated", or "aborted" (the client went away).
        self.stream_endings: list[str] = []
        self.connections = 0
        self.reject_null_content = False
        self.responder: Callable[[dict[str, Any]], Reply] = _default_responder
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # -- control -----------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"{'https' if self.ssl else 'http'}://{self.host}:{self.port}/v1"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def load(self, name: str) -> list[Reply]:
        replies = load_transcript(name)
        self.script(*replies)
        return replies

    async def endings(self, count: int = 1, timeout: float = 5.0) -> list[str]:
        """stream_endings once `count` streams have ended: the server notes an ending after its
        last write, which the client may have read (and the test moved on) a moment before."""
        deadline = time.monotonic() + timeout
        while len(self.stream_endings) < count and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return list(self.stream_endings)

    def reset(self) -> None:
        with self._lock:
            self.replies.clear()
            self.requests.clear()
            self.stream_endings.clear()
            self.responder = _default_responder
            self.connections = 0
            self.reject_null_content = False

    def start(self) -> FakeLLM:
        ready = threading.Event()

        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._handle, self.host, self.port, backlog=2048, ssl=self.ssl)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, name="fake-llm", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is None:
            return

        async def shutdown() -> None:
            self._server.close()
            handlers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in handlers:
                task.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- HTTP ----------------------------------------------------------------------
    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            if self.replies:
                return self.replies.popleft()
            responder = self.responder
        return responder(body)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:  # keep-alive: the SDK reuses connections
                request_line = await reader.readline()
                if not request_line:
                    return
                method, path, _ = request_line.decode("latin-1").split(" ", 2)
                headers: dict[str, str] = {}
                while True:
                    line = await reader.readline()
                    if line in (b"\r\n", b"\n", b""):
                        break
                    key, _, value = line.decode("latin-1").partition(":")
                    headers[key.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0"))
                raw = await reader.readexactly(length) if length else b""
                if method == "GET" and path == "/stats":
                    await self._send_json(
                        writer, 200, {"connections": self.connections, "requests": len(self.requests)}
                    )
                    continue
                if method != "POST" or not path.rstrip("/").endswith("/chat/completions"):
                    await self._send_json(writer, 404, {"error": {"message": f"no route {method} {path}"}})
                    continue
                body = json.loads(raw or b"{}")
                if self.reject_null_content and (refusal := _null_content_refusal(body)):
                    with self._lock:
                        self.requests.append(body)
                    await self._send_json(writer, 500, refusal)
                    continue
                reply = self._next_reply(body)
                keep_open = await self._send_reply(writer, reply, body)
                if not keep_open:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            # CancelledError: the server is shutting down with this connection idle.
            return
        finally:
            writer.close()

    async def _send_json(self, writer: asyncio.StreamWriter, status: int, body: Any, headers=None) -> None:
        data = json.dumps(body).encode()
        head = [f"HTTP/1.1 {status} X", "content-type: application/json", f"content-length: {len(data)}"]
        head += [f"{k}: {v}" for k, v in (headers or {}).items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
        await writer.drain()

    async def _send_reply(self, writer: asyncio.StreamWriter, reply: Reply, body: dict[str, Any]) -> bool:
        status = reply.get("status", 200)
        if status != 200:
            await self._send_json(
                writer, status, reply.get("body", {"error": {"message": "fake error"}}), reply.get("headers")
            )
            return True
        try:
            ending = await self._send_stream(writer, reply, body)
        except ConnectionError:
            self.stream_endings.append("aborted")
            raise
        self.stream_endings.append(ending)
        return ending == "done"

    async def _send_stream(self, writer: asyncio.StreamWriter, reply: Reply, body: dict[str, Any]) -> str:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        delay = reply.get("delay", 0.0)
        if "sse" in reply:
            return await self._send_raw(writer, reply["sse"], delay)
        truncate_after = reply.get("truncate_after")
        model = body.get("model", "fake")
        delays = reply.get("delays", [])
        for count, chunk in enumerate(reply.get("chunks", [])):
            if truncate_after is not None and count >= truncate_after:
                await writer.drain()
                return "truncated"  # the connection dies mid-stream
            if wait := (delays[count] if count < len(delays) else delay):
                await asyncio.sleep(wait)
            self._write_event(writer, self._wrap(chunk, model))
            await writer.drain()
        if truncate_after is not None:
            return "truncated"
        if reply.get("done", True):
            self._write_event(writer, "[DONE]")
        if reply.get("tail_delay"):  # the body's end in a later read (llama-cpp-python's sse-starlette)
            await writer.drain()
            await asyncio.sleep(reply["tail_delay"])
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return "done"

    async def _send_raw(self, writer: asyncio.StreamWriter, sse: str | bytes, delay: float) -> str:
        raw = sse.encode() if isinstance(sse, str) else sse
        # One HTTP chunk per event, as a server flushes them, so the client sees several reads.
        for event in re.split(rb"(?<=\n\n)", raw):
            if not event:
                continue
            if delay:
                await asyncio.sleep(delay)
            writer.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return "done"

    @staticmethod
    def _wrap(chunk: dict[str, Any], model: str) -> Any:
        if "raw" in chunk:
            return chunk["raw"]
        if "error" in chunk:
            return {"error": chunk["error"]}
        out: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [],
        }
        if "delta" in chunk or "finish_reason" in chunk:
            out["choices"] = [
                {"index": 0, "delta": chunk.get("delta", {}), "finish_reason": chunk.get("finish_reason")}
            ]
        if "usage" in chunk:
            out["usage"] = chunk["usage"]
        return out

    @staticmethod
    def _write_event(writer: asyncio.StreamWriter, payload: Any) -> None:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        event = f"data: {data}\n\n".encode()
        writer.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")


if __name__ == "__main__":  # python tests/fakellm.py: serve on a fixed port for manual runs and benchmarks
    import sys

    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8765
    with FakeLLM(port=port) as fake:
        print(f"fake OpenAI-compatible server on {fake.base_url}", flush=True)
        threading.Event().wait()
