"""Slow and silent readers against a real daphne (docs/protocol.md, "Slow clients"): clients that
open SSE streams, `/events/` pages and WebSockets and do not read hold a bounded part of the
server while a run streams megabytes; past their backlog they are told (SLOW_CONSUMER, 4008) and
resume from the log without loss; once they are gone the server's memory comes back near its
start. The figures (the daphne's RSS from /proc) are printed for the report and the docs."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from .harness import Client, Replies, Socket, assert_contiguous, slow_text_reply

pytestmark = pytest.mark.services

SILENT_STREAMS = 20
SILENT_PAGES = 20
# The run: about 6 MB of text (past what the kernel buffers for a connection, 4 MB here) in 1 KB pieces; each piece its own event and doorbell (1 ms windows).
PIECES, PIECE = 6000, 1000
SETTINGS = {
    "AGENT_MAX_SOCKETS_PER_USER": "0",  # the memory test's streams are one user's
    "AGENT_SEND_BACKLOG": "20",
    "AGENT_STREAM_FLUSH_MS": "1",
    "AGENT_STREAM_FLUSH_MAX_MS": "1",
    "GC_FULL_COLLECTION_SECONDS": "1",
    # The slow consumers are read once the run is over, however long a loaded machine makes it.
    "AGENT_SLOW_CONSUMER_GRACE_SECONDS": "600",
}


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def settled_rss(pid: int) -> float:
    """The RSS once it has stopped moving (the server done with what it was handed)."""
    last, still = rss_mib(pid), 0
    for _ in range(120):
        await asyncio.sleep(0.5)
        now = rss_mib(pid)
        still = still + 1 if abs(now - last) < 1 else 0
        last = now
        if still >= 4:
            break
    return last


class RssPeak:
    """The highest RSS of the process until stopped, sampled every 0.1 s."""

    def __init__(self, pid: int):
        self.pid, self.peak = pid, rss_mib(pid)
        self.task = asyncio.ensure_future(self._sample())

    async def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, rss_mib(self.pid))
            await asyncio.sleep(0.1)

    async def stop(self) -> float:
        self.task.cancel()
        return max(self.peak, rss_mib(self.pid))


class Silent:
    """An HTTP GET on a raw socket that reads nothing until asked, with a small receive buffer,
    so that the kernel takes little of what the server sends it."""

    def __init__(self, server, path: str, headers: dict[str, str], body: bytes | None = None):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.connect(("127.0.0.1", server.port))
        method = "GET" if body is None else "POST"
        lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{server.port}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b""))
        self.raw = b""

    def read_until(self, marker: bytes, timeout: float = 30) -> None:
        self.sock.settimeout(timeout)
        while marker not in self.raw:
            data = self.sock.recv(65536)
            assert data, f"closed before {marker!r}: {self.raw[-300:]!r}"
            self.raw += data

    def read_to_end(self, timeout: float = 60) -> bytes:
        """Everything to the server's close: the response, decoded from its chunks."""
        self.sock.settimeout(timeout)
        while data := self.sock.recv(65536):
            self.raw += data
        return body_of(self.raw)

    def close(self) -> None:
        self.sock.close()


def body_of(raw: bytes) -> bytes:
    head, _, rest = raw.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" not in head.lower():  # a body built whole, with its length
        return rest
    body = b""
    while rest:
        size, _, rest = rest.partition(b"\r\n")
        if not size or int(size, 16) == 0:
            break
        body, rest = body + rest[: int(size, 16)], rest[int(size, 16) + 2 :]
    return body


def sse_events(body: bytes) -> list[tuple[str | None, str, dict]]:
    """(id, event, data) of each event of an SSE body; comments skipped."""
    out = []
    for block in body.decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.split("\n") if line and not line.startswith(":"))
        if "event" in fields:
            out.append((fields.get("id"), fields["event"], json.loads(fields["data"])))
    return out


async def read_stream(user: Client, conversation: str, headers: dict[str, str], query: str) -> list[dict]:
    """A client that reads: the frames of `/stream/` to its end (`until=complete`)."""
    body = b""
    url = user.url(f"/api/conversations/{conversation}/stream/?{query}")
    async with user.http.stream("GET", url, headers=headers, timeout=120) as response:
        assert response.status_code == 200
        async for data in response.aiter_bytes():
            body += data
    return [data for _, kind, data in sse_events(body) if kind != "sync"]


async def _slow_server(make_server, databases, e2e_llm):
    server = make_server(databases.new(), name="slow", **SETTINGS)
    replies = Replies(e2e_llm)
    user = await Client(server).signup()
    return server, replies, user


def _long_answer(replies: Replies, message: str) -> str:
    text = "".join(f"{i:05d}" + "x" * (PIECE - 6) + " " for i in range(PIECES))
    return replies.set(message, slow_text_reply(text, chunks=PIECES, delay=0.001))


@pytest.mark.timeout(600)
async def test_silent_streams_and_pages_hold_bounded_memory_and_resume_without_loss(make_server, databases, e2e_llm):
    server, replies, user = await _slow_server(make_server, databases, e2e_llm)
    pid = server.proc.pid
    conversation = await user.create_conversation()
    cookie = {"Cookie": user.cookie_header}
    # Warm-up: the same long run read by a client that keeps up, and its pages read whole: what
    # the run itself costs the server (its answer, the model's stream, the writer) is in `before`.
    warm = _long_answer(replies, "a long answer to warm up")
    assert (
        await user.api("POST", f"/api/conversations/{conversation}/messages/", json_body={"content": warm})
    ).status_code == 202
    warmed = await read_stream(user, conversation, {}, "after=0&until=complete")
    last = warmed[-1]["seq"]
    await user.events(conversation)
    before = await settled_rss(pid)

    # Streams that read nothing past their `sync` while a run streams ~3 MB to each.
    silent = [
        Silent(server, f"/api/conversations/{conversation}/stream/?after={last}", cookie) for _ in range(SILENT_STREAMS)
    ]
    for stream in silent:
        await asyncio.to_thread(stream.read_until, b"event: sync")
    message = _long_answer(replies, "a long answer for silent readers")
    started = await user.api("POST", f"/api/conversations/{conversation}/messages/", json_body={"content": message})
    assert started.status_code == 202
    clock = time.monotonic()
    sampler = RssPeak(pid)
    run = await read_stream(user, conversation, {}, f"after={last}&until=complete")
    during = await sampler.stop()
    print(f"\nthe run: {time.monotonic() - clock:.1f} s")
    assert run[-1]["type"] == "complete" and len(run) > 100

    # Each silent stream was told, after the events it was sent, and ends there.
    bodies = await asyncio.gather(*(asyncio.to_thread(stream.read_to_end) for stream in silent))
    for stream in silent:
        stream.close()
    told = [sse_events(body) for body in bodies]
    assert all(events[-1][1] == "error" and events[-1][2]["code"] == "SLOW_CONSUMER" for events in told), [
        events[-1][:2] for events in told
    ]
    events = told[0]
    sent = [data for _, kind, data in events if kind not in ("sync", "error")]
    assert_contiguous(sent, first=last + 1)
    assert events[-1][2]["lastSeq"] == sent[-1]["seq"] and events[-1][0] is None
    assert sent[-1]["seq"] < run[-1]["seq"]  # it fell behind before the end
    # Resumed with Last-Event-ID: every event after it, no gap, no duplicate.
    rest = await read_stream(user, conversation, {"Last-Event-ID": events[-2][0]}, "until=complete")
    assert sent + rest == run
    after_streams = await settled_rss(pid)

    # Pages of the whole history asked for and not read: each held a page at most.
    history = await user.events(conversation)
    sampler = RssPeak(pid)
    pages = [Silent(server, f"/api/conversations/{conversation}/events/", cookie) for _ in range(SILENT_PAGES)]
    await settled_rss(pid)
    pages_during = await sampler.stop()
    assert json.loads(await asyncio.to_thread(pages[0].read_to_end)) == {"events": history}
    for page in pages:
        page.close()
    after = await settled_rss(pid)

    # Exports of the conversation and of the whole account asked for and not read: streamed alike.
    sampler = RssPeak(pid)
    exports = [
        Silent(server, path, cookie)
        for path in [f"/api/conversations/{conversation}/export/", "/api/conversations/export/"] * (SILENT_PAGES // 2)
    ]
    await settled_rss(pid)
    exports_during = await sampler.stop()
    assert json.loads(await asyncio.to_thread(exports[0].read_to_end))["events"] == history
    account = json.loads(await asyncio.to_thread(exports[1].read_to_end))
    assert [document["events"] for document in account["conversations"]] == [history]
    for export in exports:
        export.close()
    after_exports = await settled_rss(pid)

    size = len(json.dumps({"events": history})) / 2**20
    print(
        f"\nslow clients: daphne RSS {before:.0f} MiB at the start; {SILENT_STREAMS} silent streams over a "
        f"{len(run)}-event run: {during:.0f} MiB, {after_streams:.0f} MiB once closed; {SILENT_PAGES} unread "
        f"/events/ pages of {size:.1f} MiB: {pages_during:.0f} MiB, {after:.0f} MiB once closed; {len(exports)} "
        f"unread exports: {exports_during:.0f} MiB, {after_exports:.0f} MiB once closed"
    )
    # Main before the send buffer on this test (docs/performance.md, "Slow clients"): 209 MiB at
    # the start, 364 with the silent streams, 259 once closed; 1060 with the pages, 426 closed.
    assert during - before < 80, (before, during)
    assert after_streams - before < 30, (before, after_streams)
    assert pages_during - before < 150, (before, pages_during)
    assert after - before < 120, (before, after)
    assert exports_during - before < 150, (before, exports_during)
    assert after_exports - before < 120, (before, after_exports)
    await user.aclose()


async def test_a_socket_that_stops_reading_is_closed_4008_and_resumes_without_loss(make_server, databases, e2e_llm):
    server, replies, user = await _slow_server(make_server, databases, e2e_llm)
    conversation = await user.create_conversation()
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.connect(("127.0.0.1", server.port))
    raw.setblocking(False)
    ws = await connect(
        f"{server.ws_base}/ws/chat/{conversation}/",
        sock=raw,
        additional_headers={"Origin": server.base, "Cookie": user.cookie_header},
        max_size=None,
        max_queue=1,  # the library reads no further ahead than a frame
    )
    slow = Socket(ws)
    await slow.sync()
    message = _long_answer(replies, "a long answer for a socket that stops reading")
    await slow.message(message)
    # It reads nothing while the whole run goes by (a reading stream follows it to its end).
    run = await read_stream(user, conversation, {}, "after=0&until=complete")
    got = []
    with pytest.raises(ConnectionClosed):
        while True:
            got.append(await slow.recv(timeout=30))
    assert ws.close_code == 4008, ws.close_code
    assert_contiguous(got)
    assert got[-1]["seq"] < run[-1]["seq"]
    again = await user.socket(conversation, after=got[-1]["seq"])
    replay, _ = await again.sync()
    assert got + replay == run
    await again.close()
    await user.aclose()


async def test_a_streamed_completion_that_stops_reading_ends_slow_consumer_and_its_run_goes_on(
    make_server, databases, e2e_llm
):
    """/v1's streamed answer follows the run like an SSE stream: a client that stops reading is
    given up on with an error chunk `slow_consumer` and [DONE]; the run ends as it would have."""
    server, replies, user = await _slow_server(make_server, databases, e2e_llm)
    token = (await user.api("POST", "/api/tokens/", json_body={"name": "slow"})).json()["token"]
    message = _long_answer(replies, "a long answer for a completion that stops reading")
    body = json.dumps({"model": "default", "stream": True, "messages": [{"role": "user", "content": message}]})
    call = Silent(
        server,
        "/v1/chat/completions",
        {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        body.encode(),
    )
    await asyncio.to_thread(call.read_until, b"data: ")
    conversation = re.search(rb"x-agentsite-conversation: ([0-9a-f-]+)", call.raw.lower()).group(1).decode()
    run = await read_stream(user, conversation, {}, "after=0&until=complete")
    assert run[-1]["type"] == "complete" and run[-1]["status"] == "succeeded"
    lines = [line for line in (await asyncio.to_thread(call.read_to_end)).decode().split("\n") if line]
    call.close()
    assert lines[-1] == "data: [DONE]"
    error = json.loads(lines[-2].removeprefix("data: "))["error"]
    assert error["code"] == "slow_consumer" and f"/api/conversations/{conversation}/events/" in error["message"]
    answer = "".join(
        chunk["choices"][0]["delta"].get("content", "")
        for chunk in (json.loads(line.removeprefix("data: ")) for line in lines[:-2] if line.startswith("data: "))
    )
    whole = "".join(frame["content"] for frame in run if frame["type"] == "text")
    assert 0 < len(answer) < len(whole) and whole.startswith(answer)  # what it was sent, in order, then the end
    await user.aclose()
