"""`python -m bench.soak` (`make bench-soak`): mixed load on two daphnes for an hour, sampled.

Not a test: a long run that shows whether anything grows. Two daphnes (on jemalloc, as
deployed) on a PostgreSQL cluster and a redis-server of the soak's own (tests/e2e/owned.py, on
free ports, thrown away after), so that its hundred database connections never starve the
machine's shared server, take at once:

- sign-ins: a new account through the sign-up form, then a sign-in with it, every 5 s;
- runs: RUNNERS users each running one conversation in turn, text answers, runs with a tool
  call, and runs with a tool call that waits for an approval (approved over the socket), each
  started over a socket of either process and checked whole (contiguous seqs, one `complete`);
- reconnect storms: every 30 s, STORM sockets open on one conversation on both processes at
  once, read the history to `sync`, and close;
- uploads (a file up, listed, deleted again), exports and searches, a few a second together;
- SSE streams: runs started over HTTP and read over the stream, every other one cut and read on
  with `Last-Event-ID` (bench/soak_streams.py).

Every 10 s, per process: RSS (and its part in malloc's main heap, in other anonymous mappings
and in files' mappings, from /proc/PID/smaps), open file descriptors, the database's connections (all processes'
together, from pg_stat_activity), Redis's channels with a subscriber (PUBSUB CHANNELS) and the
event-loop lag, measured as the round trip of a `ping`
on an idle socket of that process (the pong waits for the loop like everything else). At the
end: the figures, their slopes per hour (least squares over the run's second half, after the
warm-up), and the errors. Exit status 1 when any operation failed, never because of a timing.

python -m bench.soak                      # an hour
python -m bench.soak --duration 180       # three minutes (CI)
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes.util
import json
import os
import random
import re
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import httpx2
import psycopg
import redis.asyncio as aioredis
import websockets

from .procs import raise_fd_limit, rss_by_kind, rss_bytes
from .runinfo import RunInfo
from .server import Stack
from .soak_streams import streamed_run

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.e2e.owned import OwnedPostgres, OwnedRedis  # noqa: E402
from tests.fakellm import FakeLLM, text_reply, tool_call_reply  # noqa: E402

SAMPLE_SECONDS = 10
RUNNERS = 6
STORM = 40
STORM_EVERY = 30
SIGNIN_EVERY = 5
PASSWORD = "soak-Pass-w0rd-long"  # noqa: S105 - a bench account
RESULTS = Path(__file__).parent / "results"
# The daphnes' allocator, as deployed (docs/deployment.md, "Memory"; `make install-test` installs
# it): with glibc's malloc their heap grew for hours by fragmentation. None: glibc's.
JEMALLOC = ctypes.util.find_library("jemalloc")
# Sign-ups and sign-ins at most two at a time: each hashes a password (PBKDF2, on purpose slow).
_hashing = asyncio.Semaphore(2)


def respond(body: dict[str, Any]) -> dict[str, Any]:
    """The model of the soak: a tool call when the message asks for one, an answer otherwise
    (and after the tool's result)."""
    messages = body.get("messages", [])
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return text_reply("The tool answered; " + "word " * 40, piece=8, delay=0.005)
    content = str(last.get("content") or "")
    if content.startswith("soak tool"):
        return tool_call_reply(("current_time", {}))
    if content.startswith("soak approve"):
        return tool_call_reply(("calculator", {"expression": "6*7"}))
    return text_reply("An answer of the soak: " + "token " * 150, piece=6, delay=0.005)


class User:
    """One browser: an httpx2 session signed up through the form, and its sockets."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.name = f"soak{uuid.uuid4().hex[:10]}"
        # Password hashing is slow on purpose, and slower on a loaded machine.
        self.http = httpx2.AsyncClient(timeout=120)

    async def _token(self, path: str) -> str:
        r = await self.http.get(self.base + path)
        r.raise_for_status()
        return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', r.text).group(1)

    async def _form(self, path: str, fields: dict[str, str]) -> None:
        token = await self._token(path)
        r = await self.http.post(
            self.base + path, data={"csrfmiddlewaretoken": token, **fields}, headers={"Referer": self.base}
        )
        if r.status_code != 302:
            raise RuntimeError(f"{path}: {r.status_code}")

    async def signup(self) -> User:
        async with _hashing:
            await self._form("/accounts/signup/", {"username": self.name, "password1": PASSWORD, "password2": PASSWORD})
        return self

    async def signin(self) -> None:
        self.http.cookies.clear()
        async with _hashing:
            await self._form("/accounts/login/", {"username": self.name, "password": PASSWORD})

    def headers(self, base: str) -> dict[str, str]:
        return {"X-CSRFToken": self.http.cookies.get("csrftoken") or "", "Referer": base}

    async def conversation(self) -> str:
        r = await self.http.post(
            self.base + "/api/conversations/", json={"title": "soak"}, headers=self.headers(self.base)
        )
        r.raise_for_status()
        return r.json()["id"]

    async def socket(self, base: str, conversation: str, after: int = 0):
        return await websockets.connect(
            base.replace("http://", "ws://") + f"/ws/chat/{conversation}/?after={after}",
            additional_headers={"Cookie": f"sessionid={self.http.cookies.get('sessionid')}", "Origin": base},
            ping_interval=None,
            max_size=None,
            open_timeout=30,
        )

    async def aclose(self) -> None:
        await self.http.aclose()


async def until_sync(ws) -> list[dict]:
    replay = []
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
        if frame.get("type") == "sync":
            return replay
        replay.append(frame)


class Soak:
    def __init__(self, stack: Stack, duration: float) -> None:
        self.stack = stack
        self.deadline = time.monotonic() + duration
        self.started = time.monotonic()
        self.done: Counter = Counter()
        self.errors: Counter = Counter()
        self.first_errors: list[str] = []
        self.samples: list[dict[str, Any]] = []

    @property
    def going(self) -> bool:
        return time.monotonic() < self.deadline

    def failed(self, what: str, exc: BaseException | str) -> None:
        self.errors[what] += 1
        if len(self.first_errors) < 20:
            self.first_errors.append(f"{what}: {exc!r}"[:300])

    async def guarded(self, what: str, work) -> None:
        """One operation of the load: counted as done, or as an error."""
        try:
            await work
            self.done[what] += 1
        except Exception as exc:
            self.failed(what, exc)

    async def kept(self, what: str, loop) -> None:
        """One of the load's loops: its end is no operation; only a loop that fails is counted (an error)."""
        try:
            await loop
        except Exception as exc:
            self.failed(what, exc)

    # -- the load ----------------------------------------------------------------------
    async def signins(self) -> None:
        while self.going:
            user = User(self.stack.base(random.randrange(2)))

            async def sign_in(user=user) -> None:
                await user.signup()
                await user.signin()

            await self.guarded("sign-in", sign_in())
            await user.aclose()
            await asyncio.sleep(SIGNIN_EVERY)

    async def runner(self, index: int) -> None:
        user = await User(self.stack.base(index)).signup()
        conversation = await user.conversation()
        turn = 0
        try:
            while self.going:
                kind = ("text", "tool", "approve")[turn % 3]
                base = self.stack.base(turn + index)
                await self.guarded(f"run ({kind})", self.one_run(user, base, conversation, kind))
                turn += 1
                if turn % 30 == 0:  # a fresh conversation now and then: histories stay short
                    conversation = await user.conversation()
        finally:
            await user.aclose()

    async def one_run(self, user: User, base: str, conversation: str, kind: str) -> None:
        ws = await user.socket(base, conversation)
        try:
            replay = await until_sync(ws)
            last = replay[-1]["seq"] if replay else 0
            content = {"text": "soak text", "tool": "soak tool", "approve": "soak approve"}[kind]
            await ws.send(json.dumps({"type": "message", "content": f"{content} {uuid.uuid4().hex[:6]}"}))
            seqs = []
            async with asyncio.timeout(60):
                while True:
                    frame = json.loads(await ws.recv())
                    if "seq" not in frame:
                        if frame.get("type") == "error":
                            raise RuntimeError(f"error frame {frame.get('code')}")
                        continue
                    seqs.append(frame["seq"])
                    if frame["type"] == "approval_request":
                        await ws.send(
                            json.dumps({"type": "approve", "toolCallId": frame["toolCallId"], "decision": "approve"})
                        )
                    if frame["type"] == "complete":
                        if frame.get("status") != "succeeded":
                            raise RuntimeError(f"run {frame.get('status')}")
                        break
            if seqs != list(range(last + 1, last + 1 + len(seqs))):
                raise RuntimeError(f"seqs not contiguous from {last + 1}: {seqs[:8]}")
        finally:
            await ws.close()

    async def storms(self) -> None:
        user = await User(self.stack.base(0)).signup()
        conversation = await user.conversation()
        await self.one_run(user, self.stack.base(0), conversation, "text")
        try:
            while self.going:
                await asyncio.sleep(STORM_EVERY)

                async def reconnect(i: int) -> None:
                    ws = await user.socket(self.stack.base(i), conversation, after=random.randrange(3))
                    try:
                        await until_sync(ws)
                    finally:
                        await ws.close()

                await asyncio.gather(*(self.guarded("storm reconnect", reconnect(i)) for i in range(STORM)))
        finally:
            await user.aclose()

    async def requests(self) -> None:
        user = await User(self.stack.base(1)).signup()
        conversation = await user.conversation()
        await self.one_run(user, self.stack.base(1), conversation, "text")
        turn = 0
        try:
            while self.going:
                base = self.stack.base(turn)
                await self.guarded("upload", self.upload(user, base, conversation, turn))
                await self.guarded("export", self.get(user, f"{base}/api/conversations/{conversation}/export/"))
                await self.guarded("search", self.get(user, f"{base}/api/conversations/?q=answer"))
                turn += 1
                await asyncio.sleep(0.5)
        finally:
            await user.aclose()

    async def streams(self) -> None:
        user = await User(self.stack.base(0)).signup()
        conversation = await user.conversation()
        cookies = {name: user.http.cookies.get(name) or "" for name in ("sessionid", "csrftoken")}
        turn = 0
        try:
            async with httpx.AsyncClient(timeout=60, cookies=cookies) as http:
                while self.going:
                    base = self.stack.base(turn)
                    cut = turn % 2 == 1
                    kind = "sse run (reconnected)" if cut else "sse run"
                    await self.guarded(kind, streamed_run(http, base, conversation, user.headers(base), cut=cut))
                    turn += 1
                    if turn % 30 == 0:
                        conversation = await user.conversation()
        finally:
            await user.aclose()

    async def upload(self, user: User, base: str, conversation: str, turn: int) -> None:
        url = f"{base}/api/conversations/{conversation}/files/"
        name = f"soak-{turn}.txt"
        r = await user.http.post(url, files={"file": (name, b"soak " * 2000, "text/plain")}, headers=user.headers(base))
        if r.status_code != 201:
            raise RuntimeError(f"upload {r.status_code}: {r.text[:200]}")
        await self.get(user, url)
        r = await user.http.delete(url + name, headers=user.headers(base))
        if r.status_code != 204:
            raise RuntimeError(f"delete {r.status_code}")

    async def get(self, user: User, url: str) -> None:
        r = await user.http.get(url)
        if r.status_code != 200:
            raise RuntimeError(f"GET {url.split('/api/')[-1]}: {r.status_code}")

    # -- the figures ---------------------------------------------------------------------
    async def sampler(self) -> None:
        user = await User(self.stack.base(0)).signup()
        conversation = await user.conversation()
        idle = [await user.socket(self.stack.base(i), conversation) for i in range(2)]
        for ws in idle:
            await until_sync(ws)
        database = self.stack.env["DATABASE_URL"].rsplit("/", 1)[1]
        redis = aioredis.Redis.from_url(self.stack.redis_url)
        try:
            while self.going:
                sample: dict[str, Any] = {"t": round(time.monotonic() - self.started, 1)}
                for i, (pid, ws) in enumerate(zip(self.stack.pids, idle)):
                    sample[f"rss_mb_{i}"] = round(rss_bytes(pid) / 2**20, 1)
                    for kind, size in rss_by_kind(pid).items():
                        sample[f"{kind}_mb_{i}"] = round(size / 2**20, 1)
                    sample[f"fds_{i}"] = len(os.listdir(f"/proc/{pid}/fd"))
                    sent = time.perf_counter()
                    await ws.send(json.dumps({"type": "ping"}))
                    while json.loads(await asyncio.wait_for(ws.recv(), 30)).get("type") != "pong":
                        pass
                    sample[f"lag_ms_{i}"] = round((time.perf_counter() - sent) * 1000, 1)
                with psycopg.connect(self.stack.pg_admin_url) as conn:
                    row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [database])
                    sample["db_connections"] = row.fetchone()[0]
                # Every socket, stream and probe subscribes to a channel of its own: these go with
                # them (a channel left behind was the soak's RSS growth, 7f55ec7).
                sample["redis_channels"] = len(await redis.pubsub_channels())
                self.samples.append(sample)
                print(f"[soak] {json.dumps(sample)} ok={sum(self.done.values())} errors={sum(self.errors.values())}")
                await asyncio.sleep(SAMPLE_SECONDS)
        finally:
            for ws in idle:
                await ws.close()
            await user.aclose()
            await redis.aclose()

    async def run(self) -> None:
        await asyncio.gather(
            *(
                self.kept(f"load loop {i}", part)
                for i, part in enumerate(
                    [self.sampler(), self.signins(), self.storms(), self.requests(), self.streams()]
                    + [self.runner(i) for i in range(RUNNERS)]
                )
            )
        )


WINDOW_SECONDS = 600


def slope_per_hour(samples: list[dict], key: str) -> float:
    """Least-squares slope of `key` over the second half of the run (the first is warm-up)."""
    return least_squares_per_hour(samples[len(samples) // 2 :], key)


def window_slopes(samples: list[dict], key: str) -> list[float]:
    """The slope of `key` in each whole 10-minute window: whether a growth slows, keeps on or
    stops shows only window by window."""
    windows: dict[int, list[dict]] = {}
    for sample in samples:
        windows.setdefault(int(sample["t"] // WINDOW_SECONDS), []).append(sample)
    whole = 0.9 * WINDOW_SECONDS / SAMPLE_SECONDS  # samples of a window not cut by the end
    return [round(least_squares_per_hour(part, key), 1) for _, part in sorted(windows.items()) if len(part) >= whole]


def least_squares_per_hour(samples: list[dict], key: str) -> float:
    if len(samples) < 2:
        return 0.0
    ts = [s["t"] / 3600 for s in samples]
    ys = [s[key] for s in samples]
    mt, my = sum(ts) / len(ts), sum(ys) / len(ys)
    var = sum((t - mt) ** 2 for t in ts)
    return sum((t - mt) * (y - my) for t, y in zip(ts, ys)) / var if var else 0.0


def summary(soak: Soak, duration: float, settings: list[str]) -> dict[str, Any]:
    samples = soak.samples
    keys = [k for k in samples[0] if k != "t"] if samples else []
    figures = {
        key: {
            "first": samples[0][key],
            "last": samples[-1][key],
            "max": max(s[key] for s in samples),
            "slope_per_hour": round(slope_per_hour(samples, key), 2),
            "window_slopes_per_hour": window_slopes(samples, key),
        }
        for key in keys
    }
    return {
        "duration_s": duration,
        "allocator": JEMALLOC or "glibc",
        "process_env": settings,
        "operations": dict(soak.done),
        "errors": dict(soak.errors),
        "first_errors": soak.first_errors,
        "figures": figures,
        "samples": samples,
    }


def process_env(settings: list[str]) -> dict[int, dict[str, str]]:
    """`--process-env 1:NAME=VALUE` options, by process index."""
    by_index: dict[int, dict[str, str]] = {}
    for setting in settings:
        index, _, pair = setting.partition(":")
        name, _, value = pair.partition("=")
        if index not in ("0", "1") or not name:
            raise SystemExit(f"--process-env {setting!r}: expected INDEX:NAME=VALUE with INDEX 0 or 1")
        by_index.setdefault(int(index), {})[name] = value
    return by_index


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=3600, help="seconds of load (default an hour)")
    parser.add_argument("--out", default=str(RESULTS / "soak.json"), help="JSON of the samples and figures")
    parser.add_argument(
        "--process-env",
        action="append",
        default=[],
        metavar="INDEX:NAME=VALUE",
        help="a setting of one daphne only (0 or 1), to compare two under the same load, e.g. "
        "1:LD_PRELOAD= (glibc's malloc for the second)",
    )
    args = parser.parse_args()
    raise_fd_limit()
    print(f"[soak] allocator: {JEMALLOC or 'glibc malloc (no libjemalloc2 found)'}, as deployed")
    info = RunInfo().start()
    model = FakeLLM().start()
    model.responder = respond
    postgres, redis = OwnedPostgres(), OwnedRedis()
    postgres.start()
    redis.start()
    stack = Stack(
        name="soak",
        database="postgres",
        processes=2,
        pg_admin_url=postgres.url(),
        redis_url=redis.url,
        extra_env={
            "AGENT_TOOLS": "calculator,current_time",
            "AGENT_APPROVAL_TOOLS": "calculator",
            "SIGNUP_RATE_LIMIT": "0",
            "AGENT_MAX_SOCKETS_PER_USER": "0",
            "LD_PRELOAD": JEMALLOC or "",
        },
        process_env=process_env(args.process_env),
    )
    try:
        stack.start(model)
        soak = Soak(stack, args.duration)
        asyncio.run(soak.run())
        result = summary(soak, args.duration, args.process_env)
        for index, process in enumerate(stack.servers):
            if process.poll() is not None:
                result["errors"][f"daphne {index} exited"] = 1
    finally:
        stack.stop()
        model.stop()
        postgres.destroy()
        redis.destroy()
    result["run"] = info.finish()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"\n[soak] {args.duration:g} s: operations {result['operations']}")
    print("[soak] figure: first / last / max, slope per hour (second half)")
    for key, fig in result["figures"].items():
        print(f"[soak]   {key}: {fig['first']} / {fig['last']} / {fig['max']}, {fig['slope_per_hour']:+}/h")
    print(f"[soak] memory's slope per hour in each {WINDOW_SECONDS // 60}-minute window")
    for key, fig in result["figures"].items():
        if key.endswith(("_mb_0", "_mb_1")):
            slopes = fig["window_slopes_per_hour"]
            print(f"[soak]   {key}: {' '.join(f'{v:+}' for v in slopes) or 'none (no whole window)'}")
    if result["errors"]:
        print(f"[soak] ERRORS {result['errors']}")
        for line in result["first_errors"]:
            print(f"[soak]   {line}")
        return 1
    print("[soak] no errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
