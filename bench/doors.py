"""Doors: first text of the same run through the ways a client can start and follow it, side by
side at each concurrency level (docs/protocol.md, "Runs over HTTP", "Server-sent events",
"OpenAI-compatible endpoint", "Responses API", "AG-UI"):

- `websocket`: the chat page's socket, open and synced, then the `message` frame;
- `v1`: `POST /v1/chat/completions` with `stream: true` (a bearer token), read chunk by chunk;
- `sse`: `GET .../stream/?until=complete` open and synced, then `POST .../messages/`;
- `responses`: `POST /v1/responses` with `stream: true` (a bearer token), read event by event;
- `agui`: `POST /api/agui/default/` with a RunAgentInput on the conversation as its thread (a
  bearer token), read event by event;
- `mcp`: the MCP server's `tools/call` of `ask_default` (`POST /mcp`, the `2026-07-28` era the
  official client takes by default: one self-contained request, no session) with a progress
  token, its answer read as the event stream it is (docs/protocol.md, "MCP server");
- `a2a`: A2A's `SendStreamingMessage` (`POST /a2a/default/`, JSON-RPC, a bearer token), read
  event by event.

What first text is at the MCP door: the tool call's result comes only at the run's end, but a call
with a progress token gets a `notifications/progress` per stored event of its run, as the events
are stored, a `text` event's carrying the delta as its `message`: the first of those is the
first text a client can show (the docs' progress callback), and the one compared here. The
result, which needs the whole run, would measure the run's length, not the door. At the A2A
door it is the first `artifactUpdate` (a `text` event's delta); the Task and `statusUpdate`s
before it carry no answer text.

First text is from sending the message (the frame, the completion request, the POST) to the
first piece of answer text arriving (a `text` frame, a chunk with `delta.content`, a `text`
event, a `response.output_text.delta`, a TEXT_MESSAGE_CONTENT, MCP's first progress notification
carrying text, A2A's first `artifactUpdate`); for the HTTP doors also when the request was answered (the
completion's or the AG-UI run's response headers, the POST's 202), which tells the HTTP request's own cost from the run's. Per level, as
the concurrency bench measures the WebSocket: the stretch (from the first message sent to the
last run's end, over the run's nominal length, tokens / rate: `stretch_nominal` there) and the
servers' CPU per 1,000 tokens streamed, from the moment every client is ready to the last end.
Each client is a program of its own with its connection already open (the socket synced, the
HTTP client warmed by a first request), so only the run's own path is timed. The doors take
turns, C clients of one door at a time, on fresh conversations.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from typing import NamedTuple

import httpx2

from . import clients
from .clients import percentile
from .procs import CpuMeter, server_cpu_per_1k

# A second of streaming per run: long enough for the stretch to show the stream, not only its
# first text.
TOKENS = 100
RATE = 100
DOORS = ("websocket", "v1", "responses", "sse", "agui", "mcp", "a2a")
# The MCP door: the era of the official client's default (docs/mcp-server.md).
MCP_ERA = "2026-07-28"


class DoorRun(NamedTuple):
    first: float | None  # seconds from the send to the first text
    problem: str  # "" when the run arrived whole
    answered: float | None  # the HTTP doors: seconds to the request's answer
    sent: float  # wall clock of the send
    done: float | None  # wall clock of the run's end (its last text, `complete`)


class Tokens:
    """A personal API token per seeded user, made once through POST /api/tokens/ with the user's
    session (and a CSRF token of our own choosing: Django checks the cookie and the header agree)."""

    def __init__(self, base: str):
        self.base, self.by_session = base, {}

    async def of(self, http: httpx2.AsyncClient, session: str) -> str:
        if session not in self.by_session:
            csrf = secrets.token_hex(16)
            r = await http.post(
                f"{self.base}/api/tokens/",
                json={"name": "bench"},
                headers={"Cookie": f"sessionid={session}; csrftoken={csrf}", "X-CSRFToken": csrf, "Referer": self.base},
            )
            r.raise_for_status()
            self.by_session[session] = r.json()["token"]
        return self.by_session[session]


def words_of(text: str) -> list[int]:
    return [int(w.split("@", 1)[0]) for w in text.split()]


async def websocket_run(base: str, session: str, conversation: str, ready, go) -> DoorRun:
    ws, sync, _ = await clients.connect(base, conversation, session, timeout=120)
    try:
        ready()
        await go.wait()
        stream = await clients.run(ws, clients.Stream(TOKENS), rate=RATE, timeout=120)
    finally:
        await ws.close()
    first = None if stream.first_text_at is None else stream.first_text_at - stream.sent_at
    return DoorRun(first, clients.check(stream, after_seq=sync["lastSeq"]), None, stream.sent_at, stream.done_at)


async def v1_run(base: str, token: str, conversation: str, ready, go) -> DoorRun:
    headers = {"Authorization": f"Bearer {token}"}
    body = {"model": "default", "stream": True, "messages": [{"role": "user", "content": clients.order(TOKENS, RATE)}]}
    async with httpx2.AsyncClient(base_url=base, headers=headers, timeout=120) as http:
        (await http.get("/v1/models")).raise_for_status()  # the connection is open before the clock starts
        ready()
        await go.wait()
        sent, first, text = time.time(), None, ""
        async with http.stream("POST", "/v1/chat/completions", json=body) as response:
            answered = time.time() - sent
            if response.status_code != 200:
                return DoorRun(None, f"HTTP {response.status_code}", answered, sent, None)
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if "error" in chunk:
                    return DoorRun(None, f"error chunk {chunk['error'].get('code')}", answered, sent, None)
                piece = (chunk.get("choices") or [{}])[0].get("delta", {}).get("content") or ""
                if piece and first is None:
                    first = time.time() - sent
                text += piece
        done = time.time()
    problem = "" if words_of(text) == list(range(TOKENS)) else f"text incomplete: {len(words_of(text))} tokens"
    return DoorRun(first, problem, answered, sent, done)


async def typed_events_run(
    base: str, token: str, warm: str, path: str, body: dict, ready, go, *, delta: str, ends: dict
) -> DoorRun:
    """A door answering with `data: <json>` events typed by `type` (the Responses API's, AG-UI's):
    first text at the first `delta` event, whole when the end event `ends` names as a success
    (`ends`: end event type -> its outcome, "" for success; AG-UI's outcome read from the event)."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(base_url=base, headers=headers, timeout=120) as http:
        (await http.get(warm)).raise_for_status()  # the connection is open before the clock starts
        ready()
        await go.wait()
        sent, first, text, outcome = time.time(), None, "", "without an end event"
        async with http.stream("POST", path, json=body) as response:
            answered = time.time() - sent
            if response.status_code != 200:
                return DoorRun(None, f"HTTP {response.status_code}", answered, sent, None)
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                event = json.loads(line[6:])
                if event["type"] == delta:
                    if first is None:
                        first = time.time() - sent
                    text += event["delta"]
                elif event["type"] in ends:
                    outcome = ends[event["type"]](event)
        done = time.time()
    if outcome:
        return DoorRun(first, f"run ended {outcome}", answered, sent, done)
    problem = "" if words_of(text) == list(range(TOKENS)) else f"text incomplete: {len(words_of(text))} tokens"
    return DoorRun(first, problem, answered, sent, done)


async def responses_run(base: str, token: str, conversation: str, ready, go) -> DoorRun:
    """A response of its own (a conversation of its own, as /v1's): `conversation` is not used."""
    body = {"model": "default", "stream": True, "input": clients.order(TOKENS, RATE)}
    ends = {
        "response.completed": lambda event: "",
        "response.failed": lambda event: "failed",
        "response.incomplete": lambda event: "incomplete",
    }
    return await typed_events_run(
        base, token, "/v1/models", "/v1/responses", body, ready, go, delta="response.output_text.delta", ends=ends
    )


async def sse_run(base: str, token: str, conversation: str, ready, go) -> DoorRun:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(base_url=base, headers=headers, timeout=120) as poster:
        (await poster.get("/api/usage/")).raise_for_status()  # warm: the POST's connection is open
        async with httpx2.AsyncClient(base_url=base, headers=headers, timeout=120) as reader:
            path = f"/api/conversations/{conversation}/stream/?until=complete"
            async with reader.stream("GET", path) as response:
                lines = response.aiter_lines()
                event, sent, first, text, status, answered, done = "", 0.0, None, "", "", None, None
                async for line in lines:
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: ") and event == "sync":
                        break
                ready()
                await go.wait()
                sent = time.time()
                r = await poster.post(
                    f"/api/conversations/{conversation}/messages/", json={"content": clients.order(TOKENS, RATE)}
                )
                answered = time.time() - sent
                if r.status_code != 202:
                    return DoorRun(None, f"HTTP {r.status_code} on POST", answered, sent, None)
                async for line in lines:
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: ") and event == "text":
                        if first is None:
                            first = time.time() - sent
                        text += json.loads(line[6:])["content"]
                    elif line.startswith("data: ") and event == "complete":
                        done = time.time()
                        status = json.loads(line[6:]).get("status", "")
    if status != "succeeded":
        return DoorRun(first, f"run ended {status or 'without complete'}", answered, sent, done)
    problem = "" if words_of(text) == list(range(TOKENS)) else f"text incomplete: {len(words_of(text))} tokens"
    return DoorRun(first, problem, answered, sent, done)


async def agui_run(base: str, token: str, conversation: str, ready, go) -> DoorRun:
    message = {"id": secrets.token_hex(8), "role": "user", "content": clients.order(TOKENS, RATE)}
    body = {"threadId": conversation, "runId": secrets.token_hex(8), "messages": [message]}

    def finished(event: dict) -> str:
        outcome = (event.get("outcome") or {}).get("type")
        return "" if outcome == "success" else str(outcome)

    ends = {"RUN_FINISHED": finished, "RUN_ERROR": lambda event: str(event.get("code", "RUN_ERROR"))}
    path = "/api/agui/default/"
    return await typed_events_run(base, token, path, path, body, ready, go, delta="TEXT_MESSAGE_CONTENT", ends=ends)


def mcp_call(message: str) -> dict:
    """`tools/call` of ask_default with a progress token, its era's envelope in `_meta`."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MCP_ERA,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        "progressToken": "bench",
    }
    params = {"name": "ask_default", "arguments": {"message": message}, "_meta": meta}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


async def rpc_events_run(base: str, token: str, path: str, body: dict, headers: dict, ready, go, *, read) -> DoorRun:
    """A JSON-RPC door answering a `text/event-stream` of JSON-RPC messages (MCP's, A2A's):
    `read(message)` -> (the answer text it carries, the run's outcome if it ends the run:
    "" for success, else what went wrong; None while it goes on)."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream", **headers}
    async with httpx2.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
        (await http.get("/v1/models")).raise_for_status()  # the connection is open before the clock starts
        ready()
        await go.wait()
        sent, first, text, outcome = time.time(), None, "", "without an end"
        async with http.stream("POST", path, json=body, headers=headers) as response:
            answered = time.time() - sent
            if response.status_code != 200:
                return DoorRun(None, f"HTTP {response.status_code}", answered, sent, None)
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                piece, ended = read(json.loads(line[6:]))
                if piece and first is None:
                    first = time.time() - sent
                text += piece
                if ended is not None:
                    outcome = ended
                    break
        done = time.time()
    if outcome:
        return DoorRun(first, f"run ended {outcome}", answered, sent, done)
    problem = "" if words_of(text) == list(range(TOKENS)) else f"text incomplete: {len(words_of(text))} tokens"
    return DoorRun(first, problem, answered, sent, done)


def mcp_read(message: dict) -> tuple[str, str | None]:
    """A progress notification's text when its event is a `text` one (the others' messages name
    the event: `complete: succeeded`, `calling <tool>`); the result ends the call."""
    if message.get("method") == "notifications/progress":
        text = message["params"].get("message") or ""
        return (text, None) if text[:1].isdigit() else ("", None)
    if "error" in message:
        return "", f"error {message['error'].get('code')}"
    if "result" in message:
        status = (message["result"].get("structuredContent") or {}).get("status")
        return "", "" if status == "succeeded" else str(status)
    return "", None


async def mcp_run(base: str, token: str, conversation: str, ready, go) -> DoorRun:
    """A call on a conversation of its own (no conversationId): `conversation` is not used."""
    headers = {"MCP-Protocol-Version": MCP_ERA, "Mcp-Method": "tools/call", "Mcp-Name": "ask_default"}
    body = mcp_call(clients.order(TOKENS, RATE))
    return await rpc_events_run(base, token, "/mcp", body, headers, ready, go, read=mcp_read)


def a2a_read(message: dict) -> tuple[str, str | None]:
    """An `artifactUpdate`'s text; a final `statusUpdate` ends the stream."""
    if "error" in message:
        return "", f"error {message['error'].get('code')}"
    result = message.get("result") or {}
    if "artifactUpdate" in result:
        return "".join(part.get("text", "") for part in result["artifactUpdate"]["artifact"]["parts"]), None
    state = ((result.get("statusUpdate") or {}).get("status") or {}).get("state", "")
    if state in ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_INPUT_REQUIRED"):
        return "", "" if state == "TASK_STATE_COMPLETED" else state
    return "", None


async def a2a_run(base: str, token: str, conversation: str, ready, go) -> DoorRun:
    """A task on a conversation of its own (no contextId): `conversation` is not used."""
    message = {"messageId": secrets.token_hex(8), "role": "ROLE_USER", "parts": [{"text": clients.order(TOKENS, RATE)}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": message}}
    return await rpc_events_run(base, token, "/a2a/default/", body, {"A2A-Version": "1.0"}, ready, go, read=a2a_read)


async def door_level(stack, pool, tokens: Tokens, door: str, count: int) -> dict:
    """`count` clients of one door, all ready first, then all sent at once."""
    pairs = pool.take(count)
    async with httpx2.AsyncClient(timeout=60) as http:
        credentials = [session if door == "websocket" else await tokens.of(http, session) for session, _ in pairs]
    go, ready_count = asyncio.Event(), [0]
    meter = CpuMeter({f"server{i}": pid for i, pid in enumerate(stack.pids)})

    def ready():
        ready_count[0] += 1
        if ready_count[0] == count:
            meter.start()
            go.set()

    run = {
        "websocket": websocket_run,
        "v1": v1_run,
        "responses": responses_run,
        "sse": sse_run,
        "agui": agui_run,
        "mcp": mcp_run,
        "a2a": a2a_run,
    }[door]

    async def client(i: int, cred: str, conv: str):
        """A client that fails before it is ready counts as ready, so that the others still go
        (it comes back as its exception, one of the level's problems) rather than wait forever."""
        counted = [False]

        def own_ready():
            counted[0] = True
            ready()

        try:
            return await run(stack.base(i), cred, conv, own_ready, go)
        finally:
            if not counted[0]:
                ready()

    results = await asyncio.gather(
        *(client(i, cred, conv) for i, (cred, (_, conv)) in enumerate(zip(credentials, pairs))),
        return_exceptions=True,
    )
    cpu = meter.stop() if go.is_set() else {}
    runs = [r for r in results if isinstance(r, DoorRun)]
    whole = [r for r in runs if not r.problem and r.done is not None]
    firsts = [r.first * 1000 for r in whole if r.first is not None]
    problems = [repr(r) if isinstance(r, BaseException) else r.problem for r in results]
    problems = [p for p in problems if p]
    answers = [r.answered * 1000 for r in runs if r.answered is not None]
    wall = max(r.done for r in whole) - min(r.sent for r in whole) if whole else None
    return {
        "door": door,
        "C": count,
        "first_text_ms": {
            "p50": round(percentile(firsts, 50), 1),
            "p95": round(percentile(firsts, 95), 1),
            "n": len(firsts),
        },
        # The HTTP doors: the request's answer (its headers; sse: the POST's 202), p50.
        "answered_ms": round(percentile(answers, 50), 1) if answers else None,
        # From the first send to the last end, over one run's nominal length (tokens / rate).
        "stretch": round(wall / (TOKENS / RATE), 2) if wall is not None else None,
        "cpu_s": cpu,  # the servers' CPU per 1,000 tokens: procs.server_cpu_per_1k
        "ok": count - len(problems),
        "problems": problems[:5],
    }


async def measure(stack, pool, *, levels: list[int], doors: list[str] = DOORS, rounds: int = 1) -> dict:
    """Every door (of `doors`) at every level, taking turns, `rounds` times, each round in another
    order (on a shared machine a burst that meets another program's load is one round of one
    door, not the door's figure); a first single run of each door warms the server up."""
    tokens = Tokens(stack.base(0))
    for door in doors:
        await door_level(stack, pool, tokens, door, 1)
    rows = []
    for count in levels:
        taken: dict[str, list[dict]] = {door: [] for door in doors}
        for turn in range(rounds):
            for door in doors[turn % len(doors) :] + doors[: turn % len(doors)]:
                taken[door].append(await door_level(stack, pool, tokens, door, count))
        rows += [merged(taken[door]) for door in doors]
    return {"tokens": TOKENS, "rate": RATE, "rounds": rounds, "levels": rows}


def merged(rounds: list[dict]) -> dict:
    """A door's rounds at one level as one row: the round of the median first text p50, with the
    medians of the rounds' p50s and p95s (every round's own in `rounds_p50`)."""
    if len(rounds) == 1:
        return rounds[0]
    p50s = [r["first_text_ms"]["p50"] for r in rounds]
    middle = sorted(rounds, key=lambda r: r["first_text_ms"]["p50"])[len(rounds) // 2]
    return {
        **middle,
        "first_text_ms": {
            "p50": middle["first_text_ms"]["p50"],
            "p95": sorted(r["first_text_ms"]["p95"] for r in rounds)[len(rounds) // 2],
            "n": sum(r["first_text_ms"]["n"] for r in rounds),
        },
        "rounds_p50": p50s,
        "ok": min(r["ok"] for r in rounds),
        "problems": [p for r in rounds for p in r["problems"]][:5],
    }


def lines(doors: dict | None) -> list[str]:
    """The table's rows: per level, each door's first text beside the WebSocket's."""
    if not doors:
        return []
    out = [
        f"  doors: first text of a {doors['tokens']}-token run, C clients of one door at once "
        "(ratio: p50 against the WebSocket's at the same C)",
        "     C  door        first text p50 / p95 ms   ratio   ok        answered p50 ms  stretch  server CPU s/1k tokens",
    ]
    socket = {row["C"]: row["first_text_ms"]["p50"] for row in doors["levels"] if row["door"] == "websocket"}
    for row in doors["levels"]:
        ft, base = row["first_text_ms"], socket.get(row["C"])
        ratio = round(ft["p50"] / base, 2) if base else "-"
        answered, stretch = row.get("answered_ms"), row.get("stretch")
        cpu = server_cpu_per_1k(row, doors["tokens"]) if row.get("cpu_s") else None
        out.append(
            f"  {row['C']:4d}  {row['door']:<10}  {ft['p50']:>9} / {ft['p95']:>9}   {ratio:>5}   "
            f"{row['ok']}/{row['C']:<7}  {'-' if answered is None else answered:<15}  "
            f"{'-' if stretch is None else stretch:<7}  {'-' if cpu is None else cpu}"
        )
        out += [f"        problem: {p}" for p in row["problems"]]
    return out
