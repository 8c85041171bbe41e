"""The soak's server-sent-events part: runs started over HTTP (`POST .../messages/`) and read
over `GET .../stream/?until=complete` by a real SSE parser (httpx-sse), every other one cut after
its first text and read on by a reconnect with `Last-Event-ID`, as a client whose network
dropped would. Checked whole like the socket's runs: contiguous seqs, one `complete`."""

from __future__ import annotations

import json
import uuid

import httpx
from httpx_sse import aconnect_sse


async def streamed_run(http: httpx.AsyncClient, base: str, conversation: str, headers: dict, *, cut: bool) -> None:
    r = await http.post(
        f"{base}/api/conversations/{conversation}/messages/",
        json={"content": f"soak text {uuid.uuid4().hex[:6]}"},
        headers=headers,
    )
    if r.status_code != 202:
        raise RuntimeError(f"messages {r.status_code}: {r.text[:200]}")
    first = r.json()["seq"]
    url = f"{base}/api/conversations/{conversation}/stream/?until=complete"
    seqs: list[int] = []
    status = None
    for attempt in range(2 if cut else 1):
        last = seqs[-1] if seqs else first - 1
        async with aconnect_sse(http, "GET", url, headers={"Last-Event-ID": str(last)}) as source:
            if source.response.status_code != 200:
                raise RuntimeError(f"stream {source.response.status_code}")
            async for event in source.aiter_sse():
                if event.event == "sync" or not event.id:
                    continue
                seqs.append(int(event.id))
                if event.event == "complete":
                    status = json.loads(event.data).get("status")
                    break
                if cut and attempt == 0 and event.event == "text":
                    break  # the connection dropped: read on from the last id
        if status is not None:
            break
    if status is None:
        raise RuntimeError("the stream ended before its run's complete")
    if status != "succeeded":
        raise RuntimeError(f"run {status}")
    if seqs != list(range(first, first + len(seqs))):
        raise RuntimeError(f"stream seqs not contiguous from {first}: {seqs[:8]}")
