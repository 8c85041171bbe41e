"""The runs bench/costs.py times, one each on a fresh socket: each returns its figures (seconds)
and `problem`, '' when the run went as the protocol says.

Times are the wall clock, shared by this client, the servers (an event's `ts`) and the fake
model (its stamps, bench/fakemodel.py): a model call of a `calls` or `delegate` order begins its
text with `c<k>s<n>@<when the request was read>` and each token carries when it was written, so
the gap between two model calls and what a request held are read from the run's own text.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime

from . import clients

TIMEOUT = 60.0


def ts_of(frame: dict) -> float:
    """An event's `ts` (ISO 8601 UTC with milliseconds) as a unix time."""
    return datetime.fromisoformat(frame["ts"].replace("Z", "+00:00")).timestamp()


def top_level(frame: dict) -> bool:
    return not frame.get("parentRunId")


def model_calls(frames: list[tuple[float, dict]]) -> list[dict]:
    """The top-level run's model calls, from their text: per call its index `k`, the steers its
    request held, when the model read the request and when it wrote its last token."""
    calls: list[dict] = []
    for _, frame in frames:
        if frame.get("type") != "text" or not top_level(frame):
            continue
        for word in frame["content"].split():
            head, _, stamp = word.partition("@")
            if head.startswith("c"):
                k, steers = head[1:].split("s")
                calls.append({"k": int(k), "steers": int(steers), "read": float(stamp), "last": float(stamp)})
            elif calls:
                calls[-1]["last"] = max(calls[-1]["last"], float(stamp))
    return calls


def gaps(calls: list[dict]) -> list[float]:
    """From each model call's last token to the next call's request read by the model."""
    return [b["read"] - a["last"] for a, b in zip(calls, calls[1:])]


def answer_start(frames: list[tuple[float, dict]]) -> tuple[float, float] | None:
    """(arrival, the model's stamp) of the text frame holding the answer's token 0, of any run."""
    for at, frame in frames:
        if frame.get("type") == "text":
            for word in frame["content"].split():
                index, _, stamp = word.partition("@")
                if index == "0":
                    return at, float(stamp)
    return None


async def read_until(ws, frames: list, *, completes: int = 1, on_frame=None) -> str:
    """Frames into `frames` until `completes` top-level `complete`s; `on_frame(frame)` may send.
    '' or the problem."""
    seen = 0
    try:
        async with asyncio.timeout(TIMEOUT):
            while seen < completes:
                frame = json.loads(await ws.recv())
                frames.append((time.time(), frame))
                if frame.get("type") == "error" and "seq" not in frame:
                    return f"error frame {frame.get('code')}"
                if on_frame is not None:
                    await on_frame(frame)
                if frame.get("type") == "complete" and top_level(frame):
                    seen += 1
                    if frame.get("status") != "succeeded":
                        return f"run {frame.get('status')}"
    except TimeoutError:
        return f"no complete within {TIMEOUT:g} s"
    return ""


async def _send(ws, content: str, **fields) -> float:
    sent = time.time()
    await ws.send(json.dumps({"type": "message", "content": content, **fields}))
    return sent


async def direct(base: str, session: str, conversation: str, *, tokens: int = 5) -> dict:
    """A message on an idle conversation: from its send to the `user_message`, the model's request
    (its token 0's stamp, written at once) and the first text."""
    ws, _, _ = await clients.connect(base, conversation, session, timeout=TIMEOUT)
    frames: list = []
    try:
        sent = await _send(ws, clients.order(tokens, 0))
        problem = await read_until(ws, frames)
    finally:
        await ws.close()
    echo = next((at for at, f in frames if f.get("type") == "user_message"), None)
    start = answer_start(frames)
    if not problem and (echo is None or start is None):
        problem = "no user_message or no text"
    if problem:
        return {"problem": problem}
    return {"user_message": echo - sent, "model": start[1] - sent, "first_text": start[0] - sent, "problem": ""}


async def queued(base: str, session: str, conversation: str, *, tokens: int = 5) -> dict:
    """A message queued behind a run of 0.2 s (sent once that run's `user_message` is in), timed
    from the running run's `complete` (its `ts`) as `direct` is from the send; and when that
    `complete` reached the client."""
    ws, _, _ = await clients.connect(base, conversation, session, timeout=TIMEOUT)
    frames: list = []
    sent: list[float] = []

    async def queue_behind(frame: dict) -> None:
        if frame.get("type") == "user_message" and not sent:
            sent.append(await _send(ws, clients.order(tokens, 0), whileRunning="queue"))

    try:
        await _send(ws, clients.order(20, 100))
        problem = await read_until(ws, frames, completes=2, on_frame=queue_behind)
    finally:
        await ws.close()
    if problem:
        return {"problem": problem}
    kinds = [f.get("type") for _, f in frames]
    if "queued" not in kinds:
        return {"problem": "the second message was not queued"}
    seen, complete = next((at, f) for at, f in frames if f.get("type") == "complete")
    done = ts_of(complete)
    after = frames[kinds.index("complete") + 1 :]
    echo = next(((at, f) for at, f in after if f.get("type") == "user_message"), None)
    start = answer_start(after)
    if echo is None or start is None or not echo[1].get("queueId"):
        return {"problem": "the queued message's run did not start with its queueId"}
    out = {"user_message": echo[0] - done, "model": start[1] - done, "first_text": start[0] - done}
    return out | {"complete_seen": seen - done, "problem": ""}


async def steered(base: str, session: str, conversation: str, *, steer: bool, tokens: int = 50) -> dict:
    """A run of two model calls, the first streaming `tokens` at 100 a second then calling a tool;
    with `steer`, a steer sent at the first call's first text. The gap from the first call's last
    token to the second call's request, and (steer) from the steer's send to that request."""
    ws, _, _ = await clients.connect(base, conversation, session, timeout=TIMEOUT)
    frames: list = []
    steer_sent: list[float] = []

    async def steer_once(frame: dict) -> None:
        if steer and not steer_sent and frame.get("type") == "text":
            steer_sent.append(await _send(ws, "bench steer", whileRunning="steer"))

    try:
        await _send(ws, f"bench calls=2 tokens={tokens} rate=100")
        problem = await read_until(ws, frames, on_frame=steer_once)
    finally:
        await ws.close()
    calls = model_calls(frames)
    if not problem and [c["k"] for c in calls] != [0, 1]:
        problem = f"model calls {[c['k'] for c in calls]}, not [0, 1]"
    if not problem and [c["steers"] for c in calls] != [0, 1 if steer else 0]:
        problem = "the second model call's request did not hold the steer" if steer else "a steer came from nowhere"
    if not problem and steer and not any(f.get("type") == "steer_applied" for _, f in frames):
        problem = "no steer_applied"
    if problem:
        return {"problem": problem}
    out = {"gap": gaps(calls)[0], "problem": ""}
    if steer:
        out["steer_to_model"] = calls[1]["read"] - steer_sent[0]
    return out


async def answered(base: str, session: str, conversation: str, *, delegate: str | None, tokens: int = 20) -> dict:
    """An answer of `tokens` at 100 a second, by the conversation's agent itself or (`delegate`) by
    a sub-agent its agent hands the task to: from the send to the answer's first text and to the
    top-level `complete`."""
    ws, _, _ = await clients.connect(base, conversation, session, timeout=TIMEOUT)
    frames: list = []
    content = f"bench delegate={delegate} tokens={tokens} rate=100" if delegate else clients.order(tokens, 100)
    try:
        sent = await _send(ws, content)
        problem = await read_until(ws, frames)
    finally:
        await ws.close()
    start = answer_start(frames)
    words = "".join(f["content"] for _, f in frames if f.get("type") == "text" and (not delegate or not top_level(f)))
    indices = [int(w.split("@", 1)[0]) for w in words.split() if not w.startswith("c")]
    if not problem and indices != list(range(tokens)):
        problem = f"answer incomplete: {len(indices)} of {tokens} tokens"
    if not problem and delegate and not any(f.get("parentRunId") and f.get("type") == "complete" for _, f in frames):
        problem = "no child run"
    if problem:
        return {"problem": problem}
    done = next(at for at, f in reversed(frames) if f.get("type") == "complete")
    return {"first_text": start[0] - sent, "total": done - sent, "problem": ""}


async def many_calls(base: str, session: str, conversation: str, *, calls: int) -> dict:
    """A run of `calls` model calls (a tool call in each but the last, two tokens at once each):
    the gaps between its model calls."""
    ws, _, _ = await clients.connect(base, conversation, session, timeout=TIMEOUT)
    frames: list = []
    try:
        await _send(ws, f"bench calls={calls} tokens=2 rate=0")
        problem = await read_until(ws, frames)
    finally:
        await ws.close()
    found = model_calls(frames)
    if not problem and [c["k"] for c in found] != list(range(calls)):
        problem = f"model calls {[c['k'] for c in found]}"
    return {"problem": problem} if problem else {"gaps": gaps(found), "problem": ""}
