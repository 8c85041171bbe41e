"""A single stream at a time, as on a quiet server: message -> the model's first token and
message -> first text frame, over several runs one after the other.

The fake model stamps each token with the time it wrote it (bench/fakemodel.py), on the
clock the client shares: token 0 of a `rate=0` order is written as soon as the request has
been read, so its stamp minus the message's send time is "message -> model request".
"""

from __future__ import annotations

import statistics

from . import clients
from .clients import percentile

RUNS = 10
TOKENS = 20
RATE = 100


def model_first_token_at(stream: clients.Stream) -> float | None:
    for _, frame in stream.text_frames:
        for word in frame["content"].split():
            index, stamp = word.split("@", 1)
            if index == "0":
                return float(stamp)
    return None


async def one(base: str, session: str, conversation: str, *, tokens: int, rate: float, after: int = 0) -> dict:
    """One run on a fresh socket: seconds from the message to the model's first token and to the
    first text frame, and the run's problem ('' when it arrived whole)."""
    ws, sync, _ = await clients.connect(base, conversation, session, after=after, timeout=120)
    try:
        stream = await clients.run(ws, clients.Stream(tokens), rate=rate, timeout=120)
    finally:
        await ws.close()
    token = model_first_token_at(stream)
    return {
        "model_s": None if token is None else token - stream.sent_at,
        "first_text_s": None if stream.first_text_at is None else stream.first_text_at - stream.sent_at,
        "problem": clients.check(stream, after_seq=sync["lastSeq"]),
    }


def summary(samples: list[float]) -> dict:
    ms = [s * 1000 for s in samples]
    return {"p50": round(statistics.median(ms), 1), "p95": round(percentile(ms, 95), 1), "n": len(ms)}


async def measure(stack, pool, *, runs: int = RUNS, tokens: int = TOKENS, rate: float = RATE) -> dict:
    """`runs` single streams one after the other (the first one warms the server up and is
    left out): first text and the model's first token, p50/p95 in ms."""
    results = [
        await one(stack.base(0), session, conversation, tokens=tokens, rate=rate)
        for session, conversation in pool.take(runs + 1)
    ][1:]
    ok = [r for r in results if not r["problem"]]
    return {
        "runs": runs,
        "first_text_ms": summary([r["first_text_s"] for r in ok]) if ok else None,
        "model_first_token_ms": summary([r["model_s"] for r in ok]) if ok else None,
        "problems": [r["problem"] for r in results if r["problem"]][:5],
    }
