"""Which channels-redis layer to use: group_send latency and cost, measured.

    python -m bench.layer_choice [--redis redis://127.0.0.1:6379/0]

Our traffic is one group per conversation with a few members (the tabs of its
viewers), one sender (the run), ~20 batches a second per streaming run. The
two layers differ in how group_send works: RedisChannelLayer (core) runs a Lua
script that pushes a copy into every member's list with capacity checks;
RedisPubSubChannelLayer does one PUBLISH that Redis fans out to subscribers.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from channels_redis.core import RedisChannelLayer
from channels_redis.pubsub import RedisPubSubChannelLayer


async def measure(layer_factory, *, groups: int, members: int, messages: int) -> dict:
    senders = [layer_factory() for _ in range(1)]
    receivers = [layer_factory() for _ in range(1)]
    sender, receiver = senders[0], receivers[0]
    channels = []
    for g in range(groups):
        for _ in range(members):
            channel = await receiver.new_channel()
            await receiver.group_add(f"bench.g{g}", channel)
            channels.append((g, channel))
    await asyncio.sleep(0.2)
    latencies: list[float] = []
    expected = groups * members * messages

    async def consume(channel):
        for _ in range(messages):
            message = await receiver.receive(channel)
            latencies.append(time.perf_counter() - message["t"])

    consumers = [asyncio.create_task(consume(c)) for _, c in channels]
    cpu0, wall0 = time.process_time(), time.perf_counter()

    async def produce(g):
        for i in range(messages):
            await sender.group_send(
                f"bench.g{g}",
                {
                    "type": "chat.events",
                    "t": time.perf_counter(),
                    "i": i,
                    "events": [{"type": "text", "content": "x" * 80}],
                },
            )
            await asyncio.sleep(0.05)  # a run's flush window

    await asyncio.gather(*(produce(g) for g in range(groups)))
    await asyncio.wait_for(asyncio.gather(*consumers), 60)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    for layer in {id(x): x for x in senders + receivers}.values():
        await layer.flush()
    latencies.sort()
    return {
        "delivered": f"{len(latencies)}/{expected}",
        "p50_ms": round(statistics.median(latencies) * 1000, 2),
        "p99_ms": round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 2),
        "cpu_s": round(cpu, 2),
        "wall_s": round(wall, 2),
    }


async def main(url: str) -> None:
    layers = {
        "RedisChannelLayer": lambda: RedisChannelLayer(hosts=[url], capacity=1000),
        "RedisPubSubChannelLayer": lambda: RedisPubSubChannelLayer(hosts=[url]),
    }
    print(f"{'layer':26} {'groups x members':>17} {'delivered':>12} {'p50 ms':>8} {'p99 ms':>8} {'cpu s':>6}")
    for groups, members in ((1, 2), (50, 2), (200, 2), (20, 10)):
        for name, factory in layers.items():
            try:
                row = await measure(factory, groups=groups, members=members, messages=40)
            except Exception as exc:  # a failure is a finding: print it in the table
                print(f"{name:26} {f'{groups} x {members}':>17} failed: {type(exc).__name__}: {exc}"[:120])
                continue
            print(
                f"{name:26} {f'{groups} x {members}':>17} {row['delivered']:>12} {row['p50_ms']:>8} "
                f"{row['p99_ms']:>8} {row['cpu_s']:>6}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    asyncio.run(main(parser.parse_args().redis))
