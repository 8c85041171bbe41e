"""2. Concurrency: C conversations each streaming TOKENS tokens at RATE tokens/s, all at once."""

from __future__ import annotations

import asyncio
import time

import httpx2
import openai

from . import clients
from .clients import percentile
from .procs import CpuMeter, self_cpu_seconds

TOKENS = 300
RATE = 100
CONNECT_AT_ONCE = 50


async def level(stack, model, pool, count: int, *, tokens: int, rate: float, connect=clients.connect) -> dict:
    """`connect`: bench/clients.py's, or a peer's that speaks its own protocol (bench/peers/)."""
    pairs = pool.take(count)
    gate = asyncio.Semaphore(CONNECT_AT_ONCE)

    async def open_one(index, session, conversation):
        async with gate:
            return await connect(stack.base(index), conversation, session)

    connected = await asyncio.gather(*(open_one(i, s, c) for i, (s, c) in enumerate(pairs)), return_exceptions=True)
    sockets = [c[0] for c in connected if not isinstance(c, BaseException)]
    failed_connects = [repr(c) for c in connected if isinstance(c, BaseException)]
    streams = [clients.Stream(tokens) for _ in sockets]
    timeout = 30 + 4 * tokens / rate
    meter = CpuMeter({f"server{i}": pid for i, pid in enumerate(stack.pids)} | {"model": model.pid}).start()
    try:
        await asyncio.gather(*(clients.run(ws, st, rate=rate, timeout=timeout) for ws, st in zip(sockets, streams)))
    finally:
        cpu = meter.stop()
        await clients.close_all(sockets)
    syncs = [c[1] for c in connected if not isinstance(c, BaseException)]
    problems = failed_connects + [
        p for p in (clients.check(st, after_seq=s["lastSeq"]) for st, s in zip(streams, syncs)) if p
    ]
    done = [st for st in streams if st.done_at]
    wall = (max(st.done_at for st in done) - min(st.sent_at for st in streams)) if done else float("nan")
    first = [st.first_text_at - st.sent_at for st in streams if st.first_text_at]
    # What the server adds before the first text: its arrival after the model wrote token 0.
    lead = [at - clients.first_token_stamp(st) for st in streams if (at := st.first_text_at)]
    echo = [st.frames[0][0] - st.sent_at for st in streams if st.frames]
    added, oldest, gaps = [], [], []
    for st in streams:
        a, o = clients.token_delays(st)
        added += a
        oldest += o
        arrivals = [t for t, _ in st.text_frames]
        gaps += [b - a for a, b in zip(arrivals, arrivals[1:])]
    ms = lambda v: round(v * 1000, 1)  # noqa: E731
    return {
        "C": count,
        "wall_s": round(wall, 3),
        "first_text_ms": {
            "p50": ms(percentile(first, 50)),
            "p95": ms(percentile(first, 95)),
            "p99": ms(percentile(first, 99)),
        },
        "first_text_after_model_ms": {"p50": ms(percentile(lead, 50)), "p95": ms(percentile(lead, 95))},
        "user_message_ms": {"p50": ms(percentile(echo, 50)), "p95": ms(percentile(echo, 95))},
        "added_ms_p99": ms(percentile(added, 99)),
        "added_ms_p50": ms(percentile(added, 50)),
        "token_lag_ms_p99": ms(percentile(oldest, 99)),
        "frame_gap_ms_p99": ms(percentile(gaps, 99)),
        "text_frames": sum(len(st.text_frames) for st in streams),
        "ok": len(streams) - len([p for p in problems]),
        "problems": problems[:5],
        "cpu_s": cpu,
        "conversations": [c for _, c in pairs],
    }


async def sdk_floor(base_url: str, count: int) -> dict:
    """A floor for first text at C=count: this process does nothing but open `count` streams at
    once through the openai SDK, configured as the server's model client is (aiohttp transport,
    raw response, orjson body), and wait for each one's first chunk. A warm round (pooled
    connections, as a server that has streamed before) and its client CPU."""
    import orjson

    client = openai.AsyncOpenAI(
        base_url=base_url, api_key="x", max_retries=0, http_client=openai.DefaultAioHttpClient()
    )
    body = orjson.dumps(
        {
            "model": "fake-model",
            "messages": [{"role": "user", "content": clients.order(1, 0)}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )

    async def first_chunk(started: float) -> float:
        response = await client.post("/chat/completions", cast_to=httpx2.Response, content=body, stream=True)
        try:
            async for _ in response.aiter_bytes():
                return time.time() - started
            return float("nan")
        finally:
            await response.aclose()

    try:
        rounds = []
        for _ in range(2):
            cpu, started = self_cpu_seconds(), time.time()
            times = await asyncio.gather(*(first_chunk(started) for _ in range(count)))
            rounds.append((times, self_cpu_seconds() - cpu))
            await asyncio.sleep(0.5)
    finally:
        await client.close()
    times, cpu = rounds[-1]
    return {
        "C": count,
        "first_chunk_ms": {
            "p50": round(percentile(times, 50) * 1000, 1),
            "p95": round(percentile(times, 95) * 1000, 1),
        },
        "client_cpu_ms_per_request": round(cpu / count * 1000, 2),
    }


async def measure(stack, model, pool, *, levels=(50, 100, 200, 400), tokens: int = TOKENS, rate: float = RATE) -> dict:
    solo = await level(stack, model, pool, 1, tokens=tokens, rate=rate)
    print(
        f"    C=1: first text {solo['first_text_ms']['p50']} ms, "
        f"{solo['first_text_after_model_ms']['p50']} ms after the model's first token",
        flush=True,
    )
    nominal = tokens / rate
    results = []
    for count in levels:
        await asyncio.sleep(1)
        result = await level(stack, model, pool, count, tokens=tokens, rate=rate)
        result["stretch"] = round(result["wall_s"] / solo["wall_s"], 2)
        result["stretch_nominal"] = round(result["wall_s"] / nominal, 2)
        results.append(result)
        print(
            f"    C={count}: wall {result['wall_s']} s, stretch {result['stretch']}, first text p95 "
            f"{result['first_text_ms']['p95']} ms (after the model's first token p50/p95 "
            f"{result['first_text_after_model_ms']['p50']}/{result['first_text_after_model_ms']['p95']} ms), "
            f"ok {result['ok']}/{count}",
            flush=True,
        )
    floor = await sdk_floor(model.base_url, 200)
    print(
        f"    SDK alone, 200 streams opened at once: first chunk p95 {floor['first_chunk_ms']['p95']} ms, "
        f"{floor['client_cpu_ms_per_request']} ms CPU each",
        flush=True,
    )
    return {"tokens": tokens, "rate": rate, "solo": solo, "levels": results, "sdk_floor": floor}
