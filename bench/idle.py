"""3. Idle sockets: N authenticated WebSockets that only sit there: memory each, CPU while idle."""

from __future__ import annotations

import asyncio

from . import clients
from .procs import CpuMeter, rss_bytes

SOCKETS = 1000
IDLE_SECONDS = 10
CONNECT_AT_ONCE = 50


async def _open(stack, pairs, connect=clients.connect):
    gate = asyncio.Semaphore(CONNECT_AT_ONCE)

    async def one(index, session, conversation):
        async with gate:
            ws, _, _ = await connect(stack.base(index), conversation, session)
            return ws

    results = await asyncio.gather(*(one(i, s, c) for i, (s, c) in enumerate(pairs)), return_exceptions=True)
    return [r for r in results if not isinstance(r, BaseException)], [
        r for r in results if isinstance(r, BaseException)
    ]


async def measure(
    stack, model, pool, *, sockets: int = SOCKETS, idle_seconds: float = IDLE_SECONDS, connect=clients.connect
) -> dict:
    """`connect`: bench/clients.py's, or a peer's (bench/peers/)."""
    warm, _ = await _open(stack, pool.take(50), connect)  # imports, caches, the run registry
    await clients.close_all(warm)
    await asyncio.sleep(1)
    before = sum(rss_bytes(pid) for pid in stack.pids)
    held, failed = await _open(stack, pool.take(sockets), connect)
    try:
        await asyncio.sleep(2)
        after = sum(rss_bytes(pid) for pid in stack.pids)
        meter = CpuMeter({f"server{i}": pid for i, pid in enumerate(stack.pids)}).start()
        await asyncio.sleep(idle_seconds)
        cpu = meter.stop()
    finally:
        await clients.close_all(held)
    server_cpu = sum(v for k, v in cpu.items() if k.startswith("server"))
    return {
        "sockets": len(held),
        "failed": len(failed),
        "rss_before_mib": round(before / 2**20, 1),
        "rss_after_mib": round(after / 2**20, 1),
        "kib_per_socket": round((after - before) / max(1, len(held)) / 1024, 1),
        "idle_cpu_pct": round(100 * server_cpu / idle_seconds, 2),
    }
