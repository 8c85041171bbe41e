"""The client process of bench/model_tls.py: `python -m bench.model_tls_client` reads
{"endpoints": {"tls": URL, "plain": URL}, "calls": N} on stdin and prints the figures as JSON.

The model client is the server's own, built by chat.runtime.build in this Django process from the
environment the bench gives it (SSL_CERT_FILE names the throwaway CA).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from dataclasses import replace

import django
import httpx2

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
django.setup()

from chat.agent.events import TextEvent  # noqa: E402 - needs the app registry loaded
from chat.agent.turns import ModelRequest  # noqa: E402
from chat.agents import profiles  # noqa: E402
from chat.runtime.build import build_chat_model, close_client  # noqa: E402

from .clients import order, percentile  # noqa: E402
from .model_tls import ROUNDS, TOKENS, VARIANTS  # noqa: E402

REQUEST = ModelRequest(messages=[{"role": "user", "content": order(TOKENS, 0)}])
EXPECTED = [str(i) for i in range(TOKENS)]


# Kept open: the readings' own connection is opened once, at the first, before any counted call.
# httpx2 trusts SSL_CERT_FILE as the model client does.
STATS = httpx2.Client(timeout=30)


def connections(base_url: str) -> int:
    """The fake model's accepted connections so far (tests/fakellm.py `GET /stats`)."""
    return STATS.get(base_url.removesuffix("/v1") + "/stats").json()["connections"]


async def first_text(chat_model) -> float:
    """Seconds from the call to its first text; the stream is read to its end, so that the
    connection goes back to the pool, and checked whole."""
    started, first, text = time.perf_counter(), None, ""
    async for item in chat_model.stream(REQUEST):
        if isinstance(item, TextEvent):
            first = time.perf_counter() - started if first is None else first
            text += item.content
    if first is None or [w.split("@", 1)[0] for w in text.split()] != EXPECTED:
        raise RuntimeError(f"the answer came incomplete: {text!r}")
    return first


async def measure(endpoints: dict[str, str], calls: int) -> dict:
    times: dict[tuple[str, str], list[float]] = {(e, v): [] for e in endpoints for v in VARIANTS}
    opened = dict.fromkeys(times, 0)
    per_round = max(1, calls // ROUNDS)
    rounds = -(-calls // per_round)
    for _ in range(rounds):
        for endpoint, url in endpoints.items():
            config = replace(profiles.default_config(), base_url=url)
            warm = build_chat_model(config)
            await first_text(warm)  # opens the connection the round's calls reuse
            before = connections(url)
            for _ in range(per_round):
                times[endpoint, "warm"].append(await first_text(warm))
            opened[endpoint, "warm"] += connections(url) - before
            await close_client()
            before = connections(url)
            for _ in range(per_round):
                times[endpoint, "new"].append(await first_text(build_chat_model(config)))
                await close_client()
            opened[endpoint, "new"] += connections(url) - before
    out: dict = {"calls": per_round * rounds, "rounds": rounds, "tokens": TOKENS}
    for endpoint in endpoints:
        out[endpoint] = {}
        for variant in VARIANTS:
            ms = [t * 1000 for t in times[endpoint, variant]]
            out[endpoint][variant] = {
                "first_text_ms": {
                    "p50": round(statistics.median(ms), 2),
                    "p95": round(percentile(ms, 95), 2),
                    "n": len(ms),
                },
                "connections_opened": opened[endpoint, variant],
            }
    return out


def main() -> None:
    command = json.loads(sys.stdin.read())
    print(json.dumps(asyncio.run(measure(command["endpoints"], command["calls"]))))


if __name__ == "__main__":
    main()
