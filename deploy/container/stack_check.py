"""The compose stack used as a person would, through nginx over TLS (deploy/container/ci-check):

1. /healthz answers 200 over HTTPS, plain HTTP is redirected to HTTPS;
2. a user signs up and a message over wss:// gets the offline demo model's answer;
3. the data survives `down` and `up` (`--env` settings are added to the env file in between):
   the user signs in again and finds the conversation;
4. the app container serving a run is killed: the run finishes on the other replica (the
   durable runs' resume), and the killed one, started again, is reached by nginx again.

The certificate is the stack's own, read from its tls volume and trusted alone (no verify=False).
Run with the project's venv: python deploy/container/stack_check.py --https-port ... --cafile ...
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import ssl
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx2
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

HERE = Path(__file__).resolve().parent
PASSWORD = "stack-Check-pass-91"  # noqa: S105 - a throwaway account of the check's own stack


def step(message: str) -> None:
    print(f"stack-check [{time.strftime('%H:%M:%S')}] {message}", flush=True)


class Stack:
    def __init__(self, args: argparse.Namespace):
        self.host, self.project, self.engine = args.host, args.project, args.engine
        self.base = f"https://{args.host}:{args.https_port}"
        self.plain = f"http://{args.host}:{args.http_port}"
        self.tls = ssl.create_default_context(cafile=args.cafile)

    def container(self, service: str) -> str:
        return f"{self.project}_{service}_1"

    def engine_run(self, *args: str, check: bool = True) -> str:
        done = subprocess.run([self.engine, *args], capture_output=True, text=True, timeout=120)
        if check and done.returncode != 0:
            raise RuntimeError(f"{self.engine} {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout + done.stderr

    def compose(self, *args: str, **env: str) -> None:
        subprocess.run([str(HERE / "compose.sh"), *args], check=True, timeout=900, env={**os.environ, **env})


class Browser:
    """One user's session through nginx: cookies, CSRF, the JSON API and WebSockets."""

    def __init__(self, stack: Stack, username: str):
        self.stack, self.username = stack, username
        self.http = httpx2.AsyncClient(base_url=stack.base, verify=stack.tls, timeout=30)

    async def form(self, path: str, fields: dict[str, str]) -> httpx2.Response:
        page = await self.http.get(path)
        assert page.status_code == 200, (path, page.status_code)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        return await self.http.post(
            path, data={"csrfmiddlewaretoken": token, **fields}, headers={"Referer": self.stack.base + path}
        )

    async def signup(self) -> None:
        fields = {"username": self.username, "password1": PASSWORD, "password2": PASSWORD}
        response = await self.form("/accounts/signup/", fields)
        assert response.status_code == 302, (response.status_code, response.text[:500])

    async def login(self) -> None:
        response = await self.form("/accounts/login/", {"username": self.username, "password": PASSWORD})
        assert response.status_code == 302, (response.status_code, response.text[:500])

    async def api(self, method: str, path: str, body=None) -> httpx2.Response:
        headers = {"X-CSRFToken": self.http.cookies.get("csrftoken") or "", "Referer": self.stack.base}
        return await self.http.request(method, path, json=body, headers=headers)

    async def conversation(self) -> str:
        response = await self.api("POST", "/api/conversations/", {"title": "stack check"})
        assert response.status_code == 201, response.text
        return response.json()["id"]

    async def socket(self, conversation: str, after: int | None = None):
        query = f"?after={after}" if after is not None else ""
        cookies = "; ".join(f"{k}={v}" for k, v in self.http.cookies.items())
        return await connect(
            f"wss://{self.stack.base.removeprefix('https://')}/ws/chat/{conversation}/{query}",
            ssl=self.stack.tls,
            additional_headers={"Origin": self.stack.base, "Cookie": cookies},
            open_timeout=15,
        )


async def frames_until(ws, predicate, timeout: float) -> list[dict]:
    got: list[dict] = []
    deadline = time.monotonic() + timeout
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), max(0.1, deadline - time.monotonic())))
        got.append(frame)
        if predicate(frame):
            return got


def is_complete(frame: dict) -> bool:
    return frame.get("type") == "complete" and "seq" in frame


def text_of(frames: list[dict]) -> str:
    return "".join(f["content"] for f in frames if f.get("type") == "text")


async def check_health(stack: Stack) -> None:
    async with httpx2.AsyncClient(verify=stack.tls, timeout=15) as http:
        health = await http.get(f"{stack.base}/healthz")
        assert health.status_code == 200 and health.json()["status"] == "ok", health.text
        plain = await http.get(f"{stack.plain}/accounts/login/")
        assert plain.status_code == 301, plain.status_code
        assert plain.headers["location"] == f"{stack.base}/accounts/login/", plain.headers["location"]
    step("healthz 200 through nginx over TLS; plain HTTP 301 to HTTPS")


async def check_message(user: Browser) -> str:
    conversation = await user.conversation()
    async with await user.socket(conversation) as ws:
        await frames_until(ws, lambda f: f.get("type") == "sync", 15)
        await ws.send(json.dumps({"type": "message", "content": "what is 6 * 7?"}))
        frames = await frames_until(ws, is_complete, 90)
    assert frames[-1]["status"] == "succeeded", frames[-1]
    assert "42" in text_of(frames), text_of(frames)
    step(f"signed up as {user.username}; a message over wss:// got the demo model's answer: {text_of(frames)!r}")
    return conversation


async def serving_replica(stack: Stack, conversation: str) -> str:
    """The app container whose daphne accepted the conversation's socket (its access log)."""
    for _ in range(50):
        for service in ("app1", "app2"):
            if f"/ws/chat/{conversation}/" in stack.engine_run("logs", stack.container(service)):
                return service
        await asyncio.sleep(0.2)
    raise AssertionError("no replica logged the socket")


async def check_run_survives_its_replica(stack: Stack, user: Browser) -> str:
    conversation = await user.conversation()
    ws = await user.socket(conversation)
    await frames_until(ws, lambda f: f.get("type") == "sync", 15)
    # Not arithmetic nor the time: the demo model's long answer, slowed by AGENT_DEMO_CHUNK_DELAY.
    await ws.send(json.dumps({"type": "message", "content": "Hello! Who are you?"}))
    seen = await frames_until(ws, lambda f: f.get("type") == "text", 60)
    run_id = next(f["runId"] for f in seen if f.get("runId"))
    victim = await serving_replica(stack, conversation)
    other = "app2" if victim == "app1" else "app1"
    # SIGKILL: no hand-over, the process is simply gone; the other replica's reaper sees the
    # run's heartbeat stop and continues it. Stopped too, so that it cannot come back and resume
    # the run itself (restart: unless-stopped).
    stack.engine_run("kill", stack.container(victim))
    stack.engine_run("stop", "-t", "0", stack.container(victim), check=False)
    step(f"run {run_id} was streaming from {victim}: killed it")
    try:
        while True:
            seen.append(json.loads(await asyncio.wait_for(ws.recv(), 30)))
    except (ConnectionClosed, TimeoutError):
        pass
    last = max(f["seq"] for f in seen if "seq" in f)
    frames: list[dict] = []
    deadline = time.monotonic() + 120
    while not frames or not is_complete(frames[-1]):
        assert time.monotonic() < deadline, "the run did not finish on the other replica"
        try:
            async with await user.socket(conversation, after=last) as again:
                frames += await frames_until(again, is_complete, 90)
        except (OSError, InvalidStatus, ConnectionClosed, TimeoutError) as exc:
            step(f"reconnecting ({type(exc).__name__})")
            frames = [f for f in frames if "seq" in f]
            last = max([last, *(f["seq"] for f in frames)])
            await asyncio.sleep(1)
    events = [f for f in seen + frames if "seq" in f]
    assert frames[-1]["status"] == "succeeded", frames[-1]
    assert [f["seq"] for f in events] == list(range(1, len(events) + 1)), "a gap or a repeat in the event log"
    assert f"resuming run {run_id}" in stack.engine_run("logs", stack.container(other)), "not resumed by the other"
    step(f"the run finished on {other} (its log: resuming run {run_id}); {len(events)} events, in order")

    stack.engine_run("start", stack.container(victim))
    await wait_for_health(stack, victim)
    await check_both_replicas_serve(stack)
    return conversation


async def wait_for_health(stack: Stack, service: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    check = [stack.engine, "healthcheck", "run", stack.container(service)]
    while subprocess.run(check, capture_output=True, timeout=60).returncode != 0:
        assert time.monotonic() < deadline, f"{service} is not healthy again"
        await asyncio.sleep(2)


async def check_both_replicas_serve(stack: Stack) -> None:
    """Requests through nginx reach both replicas, the restarted one at its new address."""
    marker = f"/healthz?replicas={uuid.uuid4().hex[:8]}"
    async with httpx2.AsyncClient(verify=stack.tls, timeout=15) as http:
        for _ in range(20):
            assert (await http.get(stack.base + marker)).status_code == 200
    served = {s: stack.engine_run("logs", stack.container(s)).count(marker) for s in ("app1", "app2")}
    assert all(served.values()), f"nginx did not reach both replicas: {served}"
    step(f"nginx reaches both replicas again: {served}")


async def check_data_survives(stack: Stack, user: Browser, conversations: list[str], settings: list[str]) -> None:
    stack.compose("down")
    step("compose down (volumes kept)")
    if settings:
        env_file = Path(os.environ.get("AGENTSITE_ENV_FILE", ".env"))
        with env_file.open("a") as env:
            env.write("".join(f"{setting}\n" for setting in settings))
        step(f"added to {env_file}: {', '.join(settings)}")
    stack.compose("up")
    again = Browser(stack, user.username)
    await again.login()
    for conversation in conversations:
        response = await again.api("GET", f"/api/conversations/{conversation}/events/")
        assert response.status_code == 200, response.text
        assert any(e["type"] == "complete" for e in response.json()["events"])
    await again.http.aclose()
    step(f"after down and up: {user.username} signed in again and found {len(conversations)} conversations")


async def main(args: argparse.Namespace) -> None:
    stack = Stack(args)
    await check_health(stack)
    user = Browser(stack, f"ci{uuid.uuid4().hex[:10]}")
    await user.signup()
    first = await check_message(user)
    await check_data_survives(stack, user, [first], args.env)
    # The same session goes on: it lives in the database, signed by the same key.
    await check_run_survives_its_replica(stack, user)
    await user.http.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="localhost")
    parser.add_argument("--https-port", type=int, default=8443)
    parser.add_argument("--http-port", type=int, default=8080)
    parser.add_argument("--cafile", required=True, help="the stack's certificate (its tls volume's tls.crt)")
    parser.add_argument("--project", default="agentsite")
    parser.add_argument("--engine", default="podman")
    parser.add_argument(
        "--env", action="append", default=[], help="KEY=VALUE added to the env file before the second up"
    )
    asyncio.run(main(parser.parse_args()))
    sys.exit(0)
