"""WebSocket clients: connect with a session cookie, send a bench order, read a run to its end.

Every frame is timestamped on arrival with the wall clock, which the fake
model's token stamps share (same machine), so per-token delays can be computed.
Browser-like: the client offers permessage-deflate and sends no pings.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

import websockets


def order(tokens: int, rate: float) -> str:
    return f"bench tokens={tokens} rate={rate:g}"


async def connect(base: str, conversation_id: str, session: str, *, after: int = 0, timeout: float = 30.0):
    """Open the socket and read up to `sync`; returns (ws, sync frame, replayed frames)."""
    url = base.replace("http://", "ws://") + f"/ws/chat/{conversation_id}/?after={after}"
    ws = await asyncio.wait_for(
        websockets.connect(
            url,
            additional_headers={"Cookie": f"sessionid={session}", "Origin": base},
            ping_interval=None,
            max_size=None,
            open_timeout=timeout,
            close_timeout=2,
        ),
        timeout,
    )
    replayed = []
    async with asyncio.timeout(timeout):
        while True:
            frame = json.loads(await ws.recv())
            if frame.get("type") == "sync":
                return ws, frame, replayed
            replayed.append(frame)


@dataclass
class Stream:
    """One run as a client saw it."""

    tokens: int
    sent_at: float = 0.0
    first_text_at: float | None = None
    done_at: float | None = None
    frames: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    problem: str = ""

    @property
    def text_frames(self) -> list[tuple[float, dict[str, Any]]]:
        return [(t, f) for t, f in self.frames if f.get("type") == "text"]


async def run(ws, stream: Stream, *, rate: float, timeout: float) -> Stream:
    """Send the order and read frames until `complete` (or the timeout, which is a problem)."""
    stream.sent_at = time.time()
    await ws.send(json.dumps({"type": "message", "content": order(stream.tokens, rate)}))
    try:
        async with asyncio.timeout(timeout):
            while True:
                raw = await ws.recv()
                now = time.time()
                frame = json.loads(raw)
                stream.frames.append((now, frame))
                kind = frame.get("type")
                if kind == "text" and stream.first_text_at is None:
                    stream.first_text_at = now
                if kind == "complete":
                    stream.done_at = now
                    return stream
                if kind == "error" and "seq" not in frame:
                    stream.problem = f"error frame {frame.get('code')}"
                    return stream
    except TimeoutError:
        stream.problem = f"no complete within {timeout:g} s"
    except websockets.ConnectionClosed as exc:
        stream.problem = f"socket closed: {exc}"
    return stream


def check(stream: Stream, *, after_seq: int) -> str:
    """'' when the run arrived whole: contiguous seqs, user_message first, every token once in
    order, complete `succeeded` last; otherwise what is wrong."""
    if stream.problem:
        return stream.problem
    seqs = [f.get("seq") for _, f in stream.frames]
    if seqs != list(range(after_seq + 1, after_seq + 1 + len(seqs))):
        return f"seq not contiguous from {after_seq + 1}: {seqs[:5]}..."
    kinds = [f["type"] for _, f in stream.frames]
    if kinds[0] != "user_message" or kinds[-1] != "complete" or stream.frames[-1][1].get("status") != "succeeded":
        return f"unexpected run shape {kinds[:3]}...{kinds[-2:]}"
    words = "".join(f["content"] for _, f in stream.text_frames).split()
    indices = [int(w.split("@", 1)[0]) for w in words]
    if indices != list(range(stream.tokens)):
        return f"text incomplete: {len(indices)} of {stream.tokens} tokens"
    return ""


def token_delays(stream: Stream) -> tuple[list[float], list[float]]:
    """Per text frame: (arrival - stamp of its newest token) = the delay the server added after
    the model wrote the last token it carries; and (arrival - stamp of its oldest token)."""
    added, oldest = [], []
    for at, frame in stream.text_frames:
        stamps = [float(w.split("@", 1)[1]) for w in frame["content"].split()]
        if stamps:
            added.append(at - max(stamps))
            oldest.append(at - min(stamps))
    return added, oldest


def first_token_stamp(stream: Stream) -> float:
    """When the model wrote the stream's first token (its stamp, in the first text frame)."""
    _, frame = stream.text_frames[0]
    return float(frame["content"].split()[0].split("@", 1)[1])


def percentile(values: list[float], p: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))
    return ordered[k]


async def close_all(sockets) -> None:
    await asyncio.gather(*(ws.close() for ws in sockets if ws is not None), return_exceptions=True)
