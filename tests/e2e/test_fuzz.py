"""Fuzz: 10,000 random client frames against a real daphne, over real WebSockets.

Frames of every kind a hostile or broken client can send: invalid JSON, binary frames, text
frames that are not UTF-8, JSON that is no object, missing and wrong fields, unknown types and
fields, lone surrogates and NUL (as JSON escapes and raw), deep nesting, empty and oversized
content, frames up to 1 MiB (daphne's default message limit), mixed with valid pings, cancels
and messages that start real runs. Each frame gets exactly the answer docs/protocol.md, "The WebSocket"
promises, on its own socket; afterwards every conversation opens with a contiguous, clean log
holding exactly the messages that were accepted, and /healthz is green.

Seeded: FUZZ_SEED=<n> replays a run; the seed is in every failure message.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import string
from collections import Counter
from dataclasses import dataclass, field

import pytest
from websockets.exceptions import ConnectionClosed

from chat.agent.text import clean_value

from .harness import Client, Socket, assert_contiguous

pytestmark = pytest.mark.services

SEED = int(os.environ.get("FUZZ_SEED", "20261201"))
FRAMES = 10_000
CONVERSATIONS = 6
SOCKETS = 8  # two conversations get a second socket: replies stay on their own socket
BATCH = 25  # frames sent before a ping whose pong closes the batch's replies
MAX_FRAME = 1024 * 1024  # daphne's default websocket_max_message_size
MAX_CHARS = 32_000  # AGENT_MAX_MESSAGE_CHARS
RUN = "run"  # a message that starts a run, or is answered RUN_IN_PROGRESS
PONG = "pong"
CLOSE_INVALID_UTF8 = 1007


@dataclass
class Case:
    kind: str
    data: str | bytes
    expect: str | None  # an error code, PONG, RUN, or None: no answer at all
    binary: bool = False
    content: str | None = None  # a valid message's content


# -- frame generators: each returns a Case ------------------------------------------------

_WORDS = ["hello", "world", "ça va", "中文", "日本語", "Привет", "😀", "e\u0301", "\u200b", "tab\tx", "line\nbreak",
          "\"quoted\"", "back\\slash", "<b>html</b>", "{json}", "\U0001f9ea"]  # fmt: skip


def _text(rng: random.Random, words: int = 8) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, words)))


def _dumps(rng: random.Random, value) -> str:
    """JSON with non-ASCII characters as they are or escaped; a lone surrogate only escaped
    (a text frame must be UTF-8: the escape is how one reaches the server)."""
    text = json.dumps(value, ensure_ascii=rng.random() < 0.5)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value)
    return text


def _extra_fields(rng: random.Random) -> dict:
    names = ["x", "fuzz", "\ud800key", "nul\x00key", "id", "content2", "😀"]  # none the protocol knows
    return {
        rng.choice(names): rng.choice([1, None, [1, {"a": "\udfff"}], "\x00", {"deep": [[[]]]}, "v"])
        for _ in range(rng.randint(0, 3))
    }


def valid_message(rng):
    content = _text(rng) + f" #{rng.randrange(10**9)}"  # unique: each accepted one is found in the log
    frame = {**_extra_fields(rng), "type": "message", "content": content}
    return Case("valid_message", _dumps(rng, frame), RUN, content=content)


def ping(rng):
    return Case("ping", _dumps(rng, {**_extra_fields(rng), "type": "ping"}), PONG)


def cancel(rng):
    return Case("cancel", _dumps(rng, {**_extra_fields(rng), "type": "cancel"}), None)


def surrogate_content(rng):
    text = _text(rng)
    at = rng.randint(0, len(text))
    bad = chr(rng.randint(0xD800, 0xDFFF))
    return Case(
        "surrogate_content", json.dumps({"type": "message", "content": text[:at] + bad + text[at:]}), "BAD_REQUEST"
    )


def nul_content(rng):
    text = _text(rng)
    at = rng.randint(0, len(text))
    return Case(
        "nul_content", _dumps(rng, {"type": "message", "content": text[:at] + "\x00" + text[at:]}), "BAD_REQUEST"
    )


def raw_control(rng):
    # A raw control character inside a JSON string is not JSON.
    char = rng.choice(["\x00", "\x01", "\x1f", "\n"])
    return Case("raw_control", '{"type": "message", "content": "a' + char + 'b"}', "BAD_REQUEST")


def invalid_json(rng):
    alphabet = string.printable + '{}[]":,\\ü中😀\ufffd\x00'
    junk = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200)))
    if rng.random() < 0.3:
        junk = '{"type": "message", "content": ' + junk  # a truncated frame
    return Case("invalid_json", junk, "BAD_REQUEST")


def not_object(rng):
    value = rng.choice([[], [{"type": "ping"}], 1, -2.5, "ping", None, True, "\ud800", ["\x00"]])
    return Case("not_object", json.dumps(value), "BAD_REQUEST")


def bad_type(rng):
    choice = rng.randrange(3)
    if choice == 0:
        frame = {"content": _text(rng)}  # no type
    elif choice == 1:
        frame = {"type": rng.choice([1, None, [], {}, ["message"], True])}
    else:
        frame = {"type": rng.choice(["Message", "PING", "", "message ", "\ud800", "\x00", "x" * 1000, "approve?"])}
    return Case("bad_type", json.dumps({**_extra_fields(rng), **frame}), "BAD_REQUEST")


def bad_content(rng):
    frame = {"type": "message"}
    choice = rng.randrange(3)
    if choice == 1:
        frame["content"] = rng.choice([1, None, [], {}, ["text"], True, {"text": "hi"}])
    elif choice == 2:
        frame["content"] = rng.choice(["", " ", "\n\t ", "\u3000"])
    return Case("bad_content", json.dumps(frame), "BAD_REQUEST")


def too_large(rng):
    size = rng.randint(MAX_CHARS + 1, MAX_FRAME - 100)
    return Case("too_large", json.dumps({"type": "message", "content": "y" * size}), "TOO_LARGE")


def big_junk(rng):
    size = rng.randint(64 * 1024, MAX_FRAME)
    return Case("big_junk", "{" + "z" * (size - 1), "BAD_REQUEST")


def big_unknown_field(rng):
    size = rng.randint(64 * 1024, MAX_FRAME - 100)
    return Case("big_unknown_field", json.dumps({"type": "ping", "padding": "p" * size}), PONG)


def deep_nesting(rng):
    opener, closer = rng.choice([("[", "]"), ('{"a":', "}")])
    deepest = (MAX_FRAME - 100) // len(opener + closer)
    depth = rng.choice([rng.randint(2, 200), rng.randint(1_000, 5_000), rng.randint(deepest // 2, deepest)])
    nested = opener * depth + closer * depth
    if rng.random() < 0.5:
        return Case("deep_nesting", '{"type": "message", "content": ' + nested + "}", "BAD_REQUEST")
    return Case("deep_nesting", nested, "BAD_REQUEST")


def binary(rng):
    data = rng.randbytes(rng.randint(0, 300))
    if rng.random() < 0.3:
        data = b'{"type": "ping"}'  # even valid JSON: frames must be text
    return Case("binary", data, "BAD_REQUEST", binary=True)


def invalid_utf8_text(rng):
    data = b'{"type": "message", "content": "' + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80abc"]) + b'"}'
    return Case("invalid_utf8_text", data, None)  # the server fails the connection (Driver.broken)


GENERATORS = [
    (valid_message, 3), (ping, 5), (cancel, 3), (surrogate_content, 10), (nul_content, 8), (raw_control, 5),
    (invalid_json, 14), (not_object, 6), (bad_type, 10), (bad_content, 9), (too_large, 0.3), (big_junk, 0.2),
    (big_unknown_field, 0.2), (deep_nesting, 6), (binary, 10), (invalid_utf8_text, 0.3),
]  # fmt: skip


def generate(rng: random.Random, count: int) -> list[Case]:
    functions, weights = zip(*GENERATORS)
    return [fn(rng) for fn in rng.choices(functions, weights, k=count)]


# -- driving one socket ----------------------------------------------------------------------


@dataclass
class Driver:
    client: Client
    conversation: str
    cases: list[Case]
    first: int  # the index of cases[0] among all frames, for failure messages
    accepted: list[str] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)  # every event frame this driver's sockets received
    answered: Counter = field(default_factory=Counter)

    def where(self, case: Case, index: int) -> str:
        return (
            f"seed {SEED}, conversation {self.conversation}, frame {self.first + index} ({case.kind}): "
            f"{case.data[:200]!r}"
        )

    async def run(self) -> None:
        sock = await self.open()
        batch: list[tuple[int, Case]] = []
        for index, case in enumerate(self.cases):
            if case.kind == "invalid_utf8_text":
                await self.finish(sock, batch)
                batch = []
                sock = await self.broken(sock, case, index)
                continue
            await sock.ws.send(case.data, text=not case.binary)
            batch.append((index, case))
            # An error frame names no frame: a message's possible RUN_IN_PROGRESS is placed by
            # closing the batch right after it.
            if len(batch) == BATCH or case.expect == RUN:
                await self.finish(sock, batch)
                batch = []
        await self.finish(sock, batch)
        await sock.close()

    async def open(self) -> Socket:
        sock = await self.client.socket(self.conversation, after=self.seqs[-1] if self.seqs else 0)
        replay, sync = await sock.sync()
        self.record(replay)
        assert sync["lastSeq"] >= (self.seqs[-1] if self.seqs else 0), f"seed {SEED}: sync went back"
        return sock

    def record(self, frames: list[dict]) -> None:
        for frame in frames:
            assert frame["seq"] > (self.seqs[-1] if self.seqs else 0), f"seed {SEED}: seq sent twice: {frame}"
            self.seqs.append(frame["seq"])

    async def finish(self, sock: Socket, batch: list[tuple[int, Case]]) -> None:
        """Ping, read to the pong, and match the answers (frames without seq) to the batch in order."""
        if not batch:
            return
        await sock.send({"type": "ping"})
        # Frames are handled in order, so the answers come in order and this ping's pong last.
        pongs = sum(1 for _, case in batch if case.expect == PONG) + 1
        answers: list[dict] = []
        while pongs:
            frame = await sock.recv(timeout=60)
            if "seq" in frame:
                self.record([frame])
                continue
            pongs -= frame == {"type": "pong"}
            answers.append(frame)
        answers.pop()  # this ping's own pong
        pending = list(answers)
        for index, case in batch:
            if case.expect is None:
                continue
            if case.expect == RUN:
                if pending and pending[0].get("code") == "RUN_IN_PROGRESS":
                    pending.pop(0)
                    self.answered["RUN_IN_PROGRESS"] += 1
                else:
                    self.accepted.append(case.content)
                    self.answered["accepted"] += 1
                continue
            assert pending, f"no answer to {self.where(case, index)}; answers: {answers}"
            got = pending.pop(0)
            if case.expect == PONG:
                assert got == {"type": "pong"}, f"{self.where(case, index)} got {got}"
            else:
                assert got.get("type") == "error" and got.get("code") == case.expect, (
                    f"{self.where(case, index)} expected {case.expect}, got {got}"
                )
                assert isinstance(got.get("message"), str) and got["message"], got
            self.answered[case.expect] += 1
        assert not pending, f"seed {SEED}: answers nobody asked for: {pending}"

    async def broken(self, sock: Socket, case: Case, index: int) -> Socket:
        """A text frame that is not UTF-8: the server fails the connection (RFC 6455 section 8.1),
        by a 1007 close or, autobahn's default under daphne, by dropping it; then we reconnect."""
        await sock.ws.send(case.data, text=True)
        try:
            while True:
                frame = await sock.recv(timeout=30)
                assert "seq" in frame, f"{self.where(case, index)}: answered {frame} instead of closing"
                self.record([frame])
        except ConnectionClosed as exc:
            assert exc.rcvd is None or exc.rcvd.code == CLOSE_INVALID_UTF8, f"{self.where(case, index)}: {exc}"
        self.answered["connection failed"] += 1
        return await self.open()


# -- the test ------------------------------------------------------------------------------


async def test_fuzzed_frames_leave_every_conversation_openable(databases, make_server):
    server = make_server(databases.new(), name="fuzz", AGENT_MESSAGES_PER_MINUTE="0")
    client = await Client(server).signup()
    try:
        rng = random.Random(SEED)
        conversations = [await client.create_conversation(title=f"fuzz {i}") for i in range(CONVERSATIONS)]
        cases = generate(rng, FRAMES)
        share = -(-FRAMES // SOCKETS)
        drivers = [
            Driver(client, conversations[i % CONVERSATIONS], cases[i * share : (i + 1) * share], i * share)
            for i in range(SOCKETS)
        ]
        await asyncio.gather(*(driver.run() for driver in drivers))
        answered = sum((d.answered for d in drivers), Counter())
        kinds = Counter(case.kind for case in cases)
        assert sum(answered.values()) == sum(1 for c in cases if c.expect is not None or c.kind == "invalid_utf8_text")
        assert answered["accepted"] > 0 and kinds["deep_nesting"] and kinds["big_junk"], (answered, kinds)

        await _until_idle(client)
        for conversation in conversations:
            accepted = sorted(c for d in drivers if d.conversation == conversation for c in d.accepted)
            await _check_conversation(client, conversation, accepted)
        health = await client.http.get(f"{server.base}/healthz")
        assert health.status_code == 200 and health.json()["status"] == "ok", health.text
        assert "Exception inside application" not in server.log(tail=None), server.log()
    finally:
        await client.aclose()


async def _until_idle(client: Client, timeout: float = 90.0) -> None:
    """Wait for the runs the accepted messages started (the fake model answers at once)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        listing = (await client.api("GET", "/api/conversations/")).json()["conversations"]
        if not any(c["running"] for c in listing):
            return
        assert asyncio.get_running_loop().time() < deadline, f"seed {SEED}: runs still going: {listing}"
        await asyncio.sleep(0.5)


async def _check_conversation(client: Client, conversation: str, accepted: list[str]) -> None:
    sock = await client.socket(conversation)
    replay, sync = await sock.sync(timeout=60)
    await sock.close()
    assert_contiguous(replay)
    assert sync["lastSeq"] == len(replay) and sync["running"] is False, (SEED, sync)
    assert replay == await client.events(conversation)  # the API reads the same log
    assert all(clean_value(frame) == frame for frame in replay), f"seed {SEED}: unstorable text was stored"
    # Nothing junk stored: the user messages are exactly the accepted ones.
    stored = sorted(f["content"] for f in replay if f["type"] == "user_message")
    assert stored == accepted, (SEED, Counter(stored) - Counter(accepted), Counter(accepted) - Counter(stored))
    by_run: dict[str, list[dict]] = {}
    for frame in replay:
        by_run.setdefault(frame["runId"], []).append(frame)
    for frames in by_run.values():
        kinds = [f["type"] for f in frames]
        assert kinds[0] == "user_message" and kinds[-1] == "complete" and kinds.count("complete") == 1, (SEED, kinds)
