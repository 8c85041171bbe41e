"""The fake OpenAI-compatible model of the benchmarks, in a process of its own.

`python -m bench.fakemodel PORT [CERT KEY]` serves tests/fakellm.FakeLLM with a responder
that reads its orders from the last user message, `bench tokens=N rate=R`
(R chunks per second, 0 = as fast as it can). One token is one streamed chunk;
chunk i carries the text `"<i>@<unix time it was written> "`, so a client can
check that a stream arrived whole and in order and how long each token took.

Two orders make a run of several model calls (bench/costs.py), read from the newest user message
holding one (a steer is a user message after it):
- `bench calls=K tokens=N rate=R`: K model calls, each a stream of N tokens, all but the last
  ending with a `calculator` tool call;
- `bench delegate=SLUG tokens=N rate=R`: a call of the delegate tool `agent__SLUG` with the task
  `bench tokens=N rate=R`, then, with its result, a closing call.
Each such call's text begins with the word `c<k>s<n>@<unix time the request was read>`: k the
run's model calls before it, n the user messages after the order (steers taken in).

Pacing follows an absolute schedule (token i is due at start + (i+1)/R) and a
late writer sends everything already due in one write: under load the model
keeps its nominal rate instead of drifting, as a real provider's would.
The chunks are formatted from a byte template, not json.dumps, so that the
fake costs little CPU next to the server it feeds. With CERT and KEY (PEM files) it serves HTTPS.
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.fakellm import FakeLLM  # noqa: E402

ORDER = re.compile(r"bench tokens=(\d+) rate=(\d+(?:\.\d+)?)")
CALLS = re.compile(r"bench (calls|delegate)=([\w-]+) tokens=(\d+) rate=(\d+(?:\.\d+)?)")
BATCH_AT_FULL_SPEED = 64

CHUNK = (
    'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":0,"model":"%s",'
    '"choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":null}]}\n\n'
)
FINISH = (
    'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":0,"model":"%s",'
    '"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":0,"model":"%s",'
    '"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":%d,"total_tokens":%d}}\n\n'
    "data: [DONE]\n\n"
)


def order_of(body: dict[str, Any]) -> tuple[int, float] | None:
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            match = ORDER.search(str(message.get("content") or ""))
            return (int(match.group(1)), float(match.group(2))) if match else None
    return None


def calls_order(body: dict[str, Any]) -> dict[str, Any] | None:
    """A `calls` or `delegate` order's next reply: {"bench": (tokens, rate), "prefix", "tool": (the
    call's index, the tool's name, its arguments) or None}."""
    messages = body.get("messages", [])
    for at in range(len(messages) - 1, -1, -1):
        if messages[at].get("role") == "user" and (match := CALLS.search(str(messages[at].get("content") or ""))):
            break
    else:
        return None
    kind, value, tokens, rate = match.group(1), match.group(2), int(match.group(3)), float(match.group(4))
    after = messages[at + 1 :]
    done = sum(1 for m in after if m.get("role") == "assistant")
    steers = sum(1 for m in after if m.get("role") == "user")
    prefix = f"c{done}s{steers}@{time.time():.4f} "
    if kind == "delegate":
        task = {"task": f"bench tokens={tokens} rate={rate:g}"}
        tool = (done, f"agent__{value}", task) if done == 0 else None
        return {"bench": (0, 0.0), "prefix": prefix, "tool": tool}
    last = done >= int(value) - 1
    return {
        "bench": (tokens, rate),
        "prefix": prefix,
        "tool": None if last else (done, "calculator", {"expression": "1+1"}),
    }


def _tool_call(model: str, index: int, name: str, arguments: dict[str, Any]) -> str:
    call = {"index": 0, "id": f"call_{index}", "type": "function"}
    call["function"] = {"name": name, "arguments": json.dumps(arguments)}
    chunk = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": model}
    chunk["choices"] = [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]
    return f"data: {json.dumps(chunk)}\n\n"


def _http_chunk(text: str) -> bytes:
    data = text.encode()
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


class BenchModel(FakeLLM):
    def __init__(self, port: int, tls: ssl.SSLContext | None = None):
        super().__init__(port=port, ssl=tls)
        self.responder = self._respond

    @staticmethod
    def _respond(body: dict[str, Any]) -> dict[str, Any]:
        if (reply := calls_order(body)) is not None:
            return reply
        order = order_of(body)
        if order is None:
            return {"chunks": [{"delta": {"content": "not a bench order"}}, {"delta": {}, "finish_reason": "stop"}]}
        return {"bench": order}

    async def _send_reply(self, writer, reply, body) -> bool:
        if "bench" not in reply:
            return await super()._send_reply(writer, reply, body)
        tokens, rate = reply["bench"]
        model = str(body.get("model", "fake"))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        loop = asyncio.get_running_loop()
        interval = 1.0 / rate if rate > 0 else 0.0
        start = loop.time()
        sent = 0
        if reply.get("prefix"):
            writer.write(_http_chunk(CHUNK % (model, reply["prefix"])))
        while sent < tokens:
            if interval:
                due = start + (sent + 1) * interval
                now = loop.time()
                if due > now:
                    await asyncio.sleep(due - now)
                    now = loop.time()
                upto = min(tokens, max(sent + 1, int((now - start) / interval)))
            else:
                upto = min(tokens, sent + BATCH_AT_FULL_SPEED)
            stamp = f"{time.time():.4f}"
            writer.write(_http_chunk("".join(CHUNK % (model, f"{i}@{stamp} ") for i in range(sent, upto))))
            await writer.drain()
            sent = upto
        finish = FINISH % (model, model, tokens, tokens + 10)
        if tool := reply.get("tool"):
            finish = _tool_call(model, *tool) + finish.replace('"finish_reason":"stop"', '"finish_reason":"tool_calls"')
        writer.write(_http_chunk(finish) + b"0\r\n\r\n")
        await writer.drain()
        return True


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8765
    tls = None
    if len(sys.argv) > 3:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(sys.argv[2], sys.argv[3])
    with BenchModel(port, tls) as fake:
        print(f"bench model on {fake.base_url}", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
