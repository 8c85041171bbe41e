"""End-to-end harness: real daphne processes, real HTTP and real WebSockets.

`Server` runs `daphne agentsite.asgi:application` in a subprocess on a free port,
pointed at a database (a temp SQLite file, or a dedicated PostgreSQL database),
optionally Redis, and the fake OpenAI-compatible server. `Client` is one user's
browser: signs up through the real form (CSRF included), calls the JSON API and
opens WebSockets with the session cookie and an allowed Origin.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx2
from websockets.asyncio.client import ClientConnection, connect

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# The server as `make run` and deploy/ start it: daphne with the project's connection queue.
SERVE = [str(BIN / "python"), "-m", "serving.serve"]
PASSWORD = "e2e-Pass-w0rd-long"  # noqa: S105 - a test account


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(*, database_url: str, llm_base_url: str, redis_url: str | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "AGENT_", "OPENAI_"))}
    env.pop("REDIS_URL", None)
    env.update(
        DJANGO_SETTINGS_MODULE="agentsite.settings",
        DATABASE_URL=database_url,
        AGENT_MODEL="fake-model",
        OPENAI_API_KEY="x",
        OPENAI_BASE_URL=llm_base_url,
        AGENT_RETRY_INTERVAL="0",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        AGENT_TOOLS="calculator,current_time",
        AGENT_HEARTBEAT_SECONDS="1",
        AGENT_HEARTBEAT_TIMEOUT="4",
        # Off as in tests/settings.py: a title call would take a reply scripted for a run.
        AGENT_TITLES="false",
        PYTHONUNBUFFERED="1",
    )
    if redis_url:
        env["REDIS_URL"] = redis_url
    env.update(extra)
    return env


def migrate(env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=120,
    )


def shell(server: Server, code: str) -> str:
    """Run Python in `manage.py shell` on the server's settings and database; the last word it
    printed (start-up may log before it), "" when it printed none."""
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=server.env,
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    )
    words = result.stdout.split()
    return words[-1] if words else ""


class Server:
    """One daphne process. `start()` waits for /healthz; `stop()` ends it gently (SIGTERM)."""

    def __init__(self, env: dict[str, str], *, log_dir: Path, name: str = "daphne"):
        self.env = env
        self.name = name
        self.log_path = log_dir / f"{name}-{uuid.uuid4().hex[:6]}.log"
        self.port = 0
        self.proc: subprocess.Popen | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_base(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> Server:
        self.port = free_port()
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            [*SERVE, "-b", "127.0.0.1", "-p", str(self.port), "agentsite.asgi:application"],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx2.get(f"{self.base}/healthz", timeout=2).status_code == 200:
                    return self
            except httpx2.HTTPError:
                pass
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"{self.name} did not answer /healthz in {timeout}s:\n{self.log()}")

    def log(self, tail: int | None = 5000) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
            return text[-tail:] if tail else text
        except OSError:
            return ""

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def terminate(self, timeout: float = 15.0) -> int:
        """SIGTERM and wait for the exit; returns the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise

    def kill(self) -> None:
        """SIGKILL: the process dies on the spot, nothing of it runs any more."""
        if self.running:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait(10)

    def stop(self) -> None:
        if self.running:
            try:
                self.terminate(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.kill()


# -- the fake model's replies -----------------------------------------------------------


def slow_text_reply(text: str, *, chunks: int = 100, delay: float = 0.02) -> dict[str, Any]:
    """`text` streamed as `chunks` SSE chunks, `delay` seconds apart."""
    size = max(1, -(-len(text) // chunks))
    pieces = [{"delta": {"content": text[i : i + size]}} for i in range(0, len(text), size)]
    return {"chunks": pieces + [{"delta": {}, "finish_reason": "stop"}], "delay": delay}


def answer_text(n: int, tag: str = "") -> str:
    """A recognisable answer: numbered words, so a lost or doubled piece changes it."""
    return "".join(f"{tag}w{i:03d} " for i in range(n))


class Replies:
    """Fake-model replies keyed by the user message that starts the run, so runs of
    several tests (and of several servers) never take each other's replies."""

    def __init__(self, fake) -> None:
        self.fake = fake
        self.by_message: dict[str, list[dict[str, Any]]] = {}
        fake.responder = self.respond

    def set(self, message: str, *replies: dict[str, Any]) -> str:
        self.by_message[message] = list(replies)
        return message

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        content = users[-1].get("content") if users else ""
        if isinstance(content, list):  # content parts
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        queue = self.by_message.get(content)
        if queue:
            return queue.pop(0) if len(queue) > 1 else queue[0]
        return {
            "chunks": [{"delta": {"content": "Hello from the fake model."}}, {"delta": {}, "finish_reason": "stop"}]
        }


# -- a user's browser ----------------------------------------------------------------


class Client:
    """One user: an httpx2 session (cookies, CSRF) and WebSockets carrying its cookie."""

    def __init__(self, server: Server, username: str | None = None):
        self.server = server
        self.username = username or f"u{uuid.uuid4().hex[:10]}"
        self.http = httpx2.AsyncClient(timeout=20)

    async def aclose(self) -> None:
        await self.http.aclose()

    def url(self, path: str, server: Server | None = None) -> str:
        return f"{(server or self.server).base}{path}"

    async def _form_token(self, path: str) -> str:
        r = await self.http.get(self.url(path))
        assert r.status_code == 200, (path, r.status_code)
        return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', r.text).group(1)

    async def signup(self) -> Client:
        token = await self._form_token("/accounts/signup/")
        r = await self.http.post(
            self.url("/accounts/signup/"),
            data={
                "csrfmiddlewaretoken": token,
                "username": self.username,
                "password1": PASSWORD,
                "password2": PASSWORD,
            },
            headers={"Referer": self.server.base},
        )
        assert r.status_code == 302, (r.status_code, r.text[:2000])
        assert self.http.cookies.get("sessionid"), "signup did not log in"
        return self

    async def login(self) -> Client:
        token = await self._form_token("/accounts/login/")
        r = await self.http.post(
            self.url("/accounts/login/"),
            data={"csrfmiddlewaretoken": token, "username": self.username, "password": PASSWORD},
            headers={"Referer": self.server.base},
        )
        assert r.status_code == 302, (r.status_code, r.text[:2000])
        return self

    def _unsafe_headers(self, server: Server | None = None) -> dict[str, str]:
        return {"X-CSRFToken": self.http.cookies.get("csrftoken") or "", "Referer": (server or self.server).base}

    async def api(self, method: str, path: str, *, json_body: Any = None, server: Server | None = None):
        headers = self._unsafe_headers(server) if method not in ("GET", "HEAD") else {}
        return await self.http.request(method, self.url(path, server), json=json_body, headers=headers)

    async def create_conversation(self, title: str = "e2e") -> str:
        r = await self.api("POST", "/api/conversations/", json_body={"title": title})
        assert r.status_code == 201, (r.status_code, r.text)
        return r.json()["id"]

    async def events(self, conversation_id: str, after: int = 0, server: Server | None = None) -> list[dict]:
        r = await self.api("GET", f"/api/conversations/{conversation_id}/events/?after={after}", server=server)
        assert r.status_code == 200, (r.status_code, r.text)
        return r.json()["events"]

    @property
    def cookie_header(self) -> str:
        return "; ".join(f"{k}={v}" for k, v in self.http.cookies.items())

    async def socket(
        self,
        conversation_id: str,
        *,
        after: int | None = None,
        server: Server | None = None,
        origin: str | None = None,
        cookies: bool = True,
    ) -> Socket:
        server = server or self.server
        query = f"?after={after}" if after is not None else ""
        headers = {"Origin": origin or server.base}
        if cookies:
            headers["Cookie"] = self.cookie_header
        ws = await connect(
            f"{server.ws_base}/ws/chat/{conversation_id}/{query}",
            additional_headers=headers,
            open_timeout=10,
            max_size=None,
        )
        return Socket(ws)

    async def bell(self, *, server: Server | None = None) -> Socket:
        """The user's `/ws/notifications/` socket (docs/protocol.md, "Notifications")."""
        server = server or self.server
        ws = await connect(
            f"{server.ws_base}/ws/notifications/",
            additional_headers={"Origin": server.base, "Cookie": self.cookie_header},
            open_timeout=10,
        )
        return Socket(ws)


class SyncUser:
    """One user for a plain sync test (a sync SDK, schemathesis): signed up through the real form
    by a sync httpx2 session, which then calls the API with its cookie and CSRF token."""

    def __init__(self, server: Server):
        self.server = server
        self.username = f"u{uuid.uuid4().hex[:10]}"
        self.http = httpx2.Client(base_url=server.base, timeout=60)
        page = self.http.get("/accounts/signup/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        form = {"csrfmiddlewaretoken": csrf, "username": self.username, "password1": PASSWORD, "password2": PASSWORD}
        r = self.http.post("/accounts/signup/", data=form, headers={"Referer": server.base})
        assert r.status_code == 302, r.text[:500]

    @property
    def unsafe_headers(self) -> dict[str, str]:
        return {"X-CSRFToken": self.http.cookies.get("csrftoken") or "", "Referer": self.server.base}

    def token(self, name: str = "sync") -> str:
        r = self.http.post("/api/tokens/", json={"name": name}, headers=self.unsafe_headers)
        assert r.status_code == 201, r.text
        return r.json()["token"]

    def conversation(self, title: str = "owned") -> str:
        r = self.http.post("/api/conversations/", json={"title": title}, headers=self.unsafe_headers)
        assert r.status_code == 201, r.text
        return r.json()["id"]

    def events(self, conversation_id: str) -> list[dict]:
        r = self.http.get(f"/api/conversations/{conversation_id}/events/")
        assert r.status_code == 200, r.text
        return r.json()["events"]

    def close(self) -> None:
        self.http.close()


async def anonymous_socket(server: Server, path: str, *, origin: str | None = None) -> Socket:
    ws = await connect(f"{server.ws_base}{path}", additional_headers={"Origin": origin or server.base}, open_timeout=10)
    return Socket(ws)


class Socket:
    """A WebSocket that decodes frames and keeps every one it received, in order."""

    def __init__(self, ws: ClientConnection):
        self.ws = ws
        self.frames: list[dict[str, Any]] = []

    async def recv(self, timeout: float = 15.0) -> dict[str, Any]:
        frame = json.loads(await asyncio.wait_for(self.ws.recv(), timeout))
        self.frames.append(frame)
        return frame

    async def send(self, frame: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(frame))

    async def message(self, content: str) -> None:
        await self.send({"type": "message", "content": content})

    async def sync(self, timeout: float = 15.0) -> tuple[list[dict], dict]:
        """Read the replay up to `sync`: (replayed events, the sync frame)."""
        replay = []
        while True:
            frame = await self.recv(timeout)
            if frame["type"] == "sync":
                return replay, frame
            replay.append(frame)

    async def until(self, predicate, timeout: float = 30.0) -> list[dict]:
        """Frames up to and including the first that satisfies `predicate`."""
        got = []
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise TimeoutError(f"no matching frame in {timeout}s; last frames: {got[-5:]}")
            frame = await self.recv(remaining)
            got.append(frame)
            if predicate(frame):
                return got

    async def until_complete(self, timeout: float = 30.0) -> list[dict]:
        return await self.until(lambda f: f.get("type") == "complete" and "seq" in f, timeout)

    async def close(self) -> None:
        await self.ws.close()

    @property
    def close_code(self) -> int | None:
        return self.ws.close_code


def events_only(frames: list[dict]) -> list[dict]:
    """The persisted event frames (those with a seq), dropping sync, pong and error replies."""
    return [f for f in frames if "seq" in f]


def run_text(frames: list[dict]) -> str:
    return "".join(f["content"] for f in frames if f.get("type") == "text")


def assert_contiguous(frames: list[dict], first: int = 1) -> None:
    seqs = [f["seq"] for f in frames]
    assert seqs == list(range(first, first + len(seqs))), f"seqs not contiguous from {first}: {seqs}"
