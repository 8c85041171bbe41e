"""1. Relay cost: one long stream as fast as the fake model can send it, read straight from the
model with the openai SDK, and end to end through the server over a WebSocket."""

from __future__ import annotations

import statistics
import time

import openai

from . import clients
from .procs import CpuMeter

TOKENS = 4000
REPEATS = 3


async def direct_read(base_url: str, tokens: int) -> float:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    try:
        started = time.time()
        stream = await client.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": clients.order(tokens, 0)}],
            stream=True,
            stream_options={"include_usage": True},
        )
        text = []
        async for chunk in stream:
            for choice in chunk.choices:
                if choice.delta.content:
                    text.append(choice.delta.content)
        elapsed = time.time() - started
    finally:
        await client.close()
    if len("".join(text).split()) != tokens:
        raise RuntimeError("the direct read lost tokens")
    return elapsed


async def direct_read_raw(base_url: str, tokens: int) -> float:
    """The same read through the SDK's raw-response path, parsing each SSE line as JSON:
    the floor, since the server's model client reads this way."""
    import json

    import httpx2

    client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    try:
        started = time.time()
        body = {
            "model": "fake-model",
            "messages": [{"role": "user", "content": clients.order(tokens, 0)}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        response = await client.post("/chat/completions", cast_to=httpx2.Response, body=body, stream=True)
        text = []
        async for line in response.aiter_lines():
            if line.startswith("data: {"):
                for choice in json.loads(line[6:]).get("choices") or ():
                    if choice["delta"].get("content"):
                        text.append(choice["delta"]["content"])
        await response.aclose()
        elapsed = time.time() - started
    finally:
        await client.close()
    if len("".join(text).split()) != tokens:
        raise RuntimeError("the raw direct read lost tokens")
    return elapsed


async def measure(stack, model, pool, *, tokens: int = TOKENS, repeats: int = REPEATS) -> dict:
    direct = [await direct_read(model.base_url, tokens) for _ in range(repeats + 1)][1:]  # first one warms up
    direct_raw = [await direct_read_raw(model.base_url, tokens) for _ in range(repeats + 1)][1:]
    relayed, problems, conversations = [], [], []
    meter = CpuMeter({"server": stack.pids[0], "model": model.pid}).start()
    for index, (session, conversation) in enumerate(pool.take(repeats + 1)):
        ws, sync, _ = await clients.connect(stack.base(0), conversation, session)
        try:
            stream = await clients.run(ws, clients.Stream(tokens), rate=0, timeout=120)
        finally:
            await ws.close()
        problem = clients.check(stream, after_seq=sync["lastSeq"])
        if problem:
            problems.append(problem)
        if index:  # the first one warms up the server's model client
            relayed.append(stream.done_at - stream.sent_at)
            conversations.append(conversation)
    cpu = meter.stop()
    d, r, raw = statistics.median(direct), statistics.median(relayed), statistics.median(direct_raw)
    return {
        "tokens": tokens,
        "direct_s": round(d, 3),
        "direct_raw_s": round(raw, 3),
        "ratio_raw": round(r / raw, 2),
        "relayed_s": round(r, 3),
        "ratio": round(r / d, 2),
        "problems": problems,
        "cpu_s": cpu,
        "conversations": conversations,
    }
