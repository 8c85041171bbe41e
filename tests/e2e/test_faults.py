"""Faults of the services underneath, on two daphnes sharing a PostgreSQL cluster and a Redis
server that this module starts on free ports and owns (tests/e2e/owned.py): Redis restarted
mid-run and down for a whole run, PostgreSQL restarted mid-run (each process keeping a
connection from an earlier run) and down for 10 s, the model endpoint going away mid-stream.

Each run is watched by three sockets that behave like the page's own (reconnect with `after`
when closed, ping): whatever a socket received is stored, no socket saw a gap or a duplicate,
the run has one `complete`, both processes are still up and healthy without a manual step, and
the time until the service was back is printed.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import httpx2
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.fakellm import FakeLLM

from .harness import Client, Replies, Server, answer_text, migrate, server_env, slow_text_reply
from .owned import OwnedPostgres, OwnedRedis

# Two daphnes to start per test, on a machine the CI shares: more than the suite's 120 s.
pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def postgres():
    cluster = OwnedPostgres()
    cluster.start()
    yield cluster
    cluster.destroy()


@pytest.fixture(scope="module")
def redis_server():
    server = OwnedRedis()
    server.start()
    yield server
    server.destroy()


@pytest.fixture(scope="module")
def template(postgres, e2e_llm):
    url = postgres.create_database("tpl")
    migrate(server_env(database_url=url, llm_base_url=e2e_llm.base_url))
    return "tpl"


@pytest.fixture
def database(postgres, template):
    name = f"faults_{uuid.uuid4().hex[:8]}"
    with __import__("psycopg").connect(postgres.url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return postgres.url(name)


class Pair:
    """Two daphnes on the owned services; `llm_base_url` may be a fake model of the test's own."""

    def __init__(self, database: str, redis_url: str, llm_base_url: str, log_dir) -> None:
        self.servers = [
            Server(
                server_env(database_url=database, llm_base_url=llm_base_url, redis_url=redis_url),
                log_dir=log_dir,
                name=name,
            )
            for name in ("A-faults", "B-faults")
        ]

    def start(self) -> Pair:
        for server in self.servers:
            server.start(timeout=240)  # a loaded shared machine has taken over 90 s to import everything
        return self

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

    async def healthy_after(self, since: float, timeout: float = 60.0) -> float:
        """Seconds from `since` until /healthz answers 200 on both processes (still the same
        processes: none exited)."""
        deadline = time.monotonic() + timeout
        async with httpx2.AsyncClient(timeout=5) as http:
            for server in self.servers:
                while True:
                    assert server.running, f"{server.name} exited:\n{server.log()}"
                    try:
                        if (await http.get(f"{server.base}/healthz")).status_code == 200:
                            break
                    except httpx2.HTTPError:
                        pass
                    assert time.monotonic() < deadline, f"{server.name} not healthy:\n{server.log()}"
                    await asyncio.sleep(0.1)
        return time.monotonic() - since

    def story(self, lines: int = 25) -> str:
        """The servers' own account of a run (their timestamped log lines, without the outage's
        repeated failures), for an assertion's message: a failure in CI tells what happened."""
        noise = ("ping frame failed", "could not publish", "reaper pass failed", "heartbeat failed", "HTTP GET")
        out = []
        for server in self.servers:
            told = [
                line[:200]
                for line in server.log(tail=None).splitlines()
                if line[:4].isdigit() and not any(n in line for n in noise)
            ]
            out += [f"--- {server.name}", *told[-lines:]]
        return "\n".join(out)


@pytest.fixture
async def pair(database, redis_server, e2e_llm, log_dir):
    pair = Pair(database, redis_server.url, e2e_llm.base_url, log_dir).start()
    yield pair
    pair.stop()


class PageSocket:
    """A socket that behaves like static/chat/socket.js: it reconnects with ?after=<last seq>
    when closed (any code but 4401/4404), and pings every `ping_every` seconds. It keeps every
    event frame it received, in order, and when each came."""

    def __init__(self, client: Client, conversation: str, server: Server, *, ping_every: float = 20.0) -> None:
        self.client, self.conversation, self.server = client, conversation, server
        self.ping_every = ping_every
        self.events: list[dict] = []
        self.received_at: list[float] = []
        self.reconnects = 0
        self.pings = 0
        self.close_codes: list[int | None] = []
        self._task: asyncio.Task | None = None
        self._synced = asyncio.Event()
        self.ws = None

    async def start(self) -> PageSocket:
        self._task = asyncio.create_task(self._run())
        await asyncio.wait_for(self._synced.wait(), 30)
        return self

    async def _run(self) -> None:
        first = True
        while True:
            after = self.events[-1]["seq"] if self.events else 0
            try:
                async with connect(
                    f"{self.server.ws_base}/ws/chat/{self.conversation}/?after={after}",
                    additional_headers={"Origin": self.server.base, "Cookie": self.client.cookie_header},
                    open_timeout=10,
                    max_size=None,
                ) as ws:
                    if not first:
                        self.reconnects += 1
                    first = False
                    self.ws = ws
                    pinger = asyncio.create_task(self._ping(ws))
                    try:
                        async for raw in ws:
                            frame = json.loads(raw)
                            if frame.get("type") == "sync":
                                self._synced.set()
                            elif "seq" in frame:
                                self.events.append(frame)
                                self.received_at.append(time.monotonic())
                    finally:
                        pinger.cancel()
                    self.close_codes.append(ws.close_code)
            except (OSError, ConnectionClosed, InvalidStatus, TimeoutError) as exc:
                self.close_codes.append(getattr(getattr(exc, "rcvd", None), "code", None))
            await asyncio.sleep(0.5)

    async def _ping(self, ws) -> None:
        while True:
            await asyncio.sleep(self.ping_every)
            self.pings += 1
            await ws.send(json.dumps({"type": "ping"}))

    async def message(self, content: str) -> None:
        """A message typed into the page: sent on this open socket."""
        await self.ws.send(json.dumps({"type": "message", "content": content}))

    def completes(self, run_id: str) -> int:
        return sum(1 for f in self.events if f["type"] == "complete" and f["runId"] == run_id)

    async def until_complete(self, run_id: str, timeout: float = 60.0) -> float:
        """Waits for the run's `complete`; returns when it arrived (monotonic)."""
        deadline = time.monotonic() + timeout
        while not self.completes(run_id):
            assert time.monotonic() < deadline, f"no complete in {timeout}s; last frames {self.events[-3:]}"
            await asyncio.sleep(0.05)
        index = next(i for i, f in enumerate(self.events) if f["type"] == "complete" and f["runId"] == run_id)
        return self.received_at[index]

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


async def watchers(client: Client, conversation: str, pair: Pair, *, ping_every: float = 20.0) -> list[PageSocket]:
    a, b = pair.servers
    return [await PageSocket(client, conversation, server, ping_every=ping_every).start() for server in (a, b, a)]


async def send_message(client: Client, conversation: str, server: Server, content: str) -> str:
    """Starts a run over a socket of its own; returns its runId."""
    sock = await client.socket(conversation, server=server)
    await sock.sync()
    await sock.message(content)
    frame = await sock.until(lambda f: f.get("type") == "user_message")
    await sock.close()
    return frame[-1]["runId"]


async def check_delivery(client: Client, conversation: str, sockets: list[PageSocket], run_id: str) -> list[dict]:
    """What each socket received is in the database, in order, without a gap or a duplicate,
    and the run has exactly one `complete`."""
    stored = await client.events(conversation, server=sockets[0].server)
    by_seq = {f["seq"]: f for f in stored}
    assert [f["seq"] for f in stored] == list(range(1, len(stored) + 1))
    assert [f["type"] for f in stored if f["runId"] == run_id].count("complete") == 1
    for sock in sockets:
        seqs = [f["seq"] for f in sock.events]
        assert seqs == list(range(1, len(seqs) + 1)), f"gap or duplicate: {seqs}"
        assert all(by_seq.get(f["seq"]) == f for f in sock.events), "a frame received is not what is stored"
        assert sock.completes(run_id) == 1
    return stored


def run_status(stored: list[dict], run_id: str) -> str:
    return next(f["status"] for f in stored if f["type"] == "complete" and f["runId"] == run_id)


async def until_text(sockets: list[PageSocket], count: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while sum(1 for f in sockets[1].events if f["type"] == "text") < count:
        assert time.monotonic() < deadline, "the run did not stream"
        await asyncio.sleep(0.02)


def report(name: str, **figures: float | int | str) -> None:
    shown = ", ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in figures.items())
    print(f"\n[fault] {name}: {shown}")


async def test_redis_restarted_mid_run(pair, redis_server, replies):
    a, b = pair.servers
    client = await Client(a).signup()
    conversation = await client.create_conversation()
    sockets = await watchers(client, conversation, pair)
    answer = answer_text(150)
    content = replies.set(f"redis restart {uuid.uuid4().hex}", slow_text_reply(answer, chunks=150, delay=0.04))
    run_id = await send_message(client, conversation, a, content)
    await until_text(sockets, 3)
    redis_server.stop()
    await asyncio.sleep(3)
    redis_server.start()
    back = time.monotonic()
    healthy = await pair.healthy_after(back)
    done = [await sock.until_complete(run_id) for sock in sockets]
    stored = await check_delivery(client, conversation, sockets, run_id)
    assert run_status(stored, run_id) == "succeeded"
    assert "".join(f["content"] for f in stored if f["type"] == "text") == answer
    # Nothing dropped a socket (the layer is not on a socket's read path), and none needed a ping.
    assert [s.reconnects for s in sockets] == [0, 0, 0]
    report(
        "Redis restarted (3 s down) mid-run",
        complete_after_back_s=max(done) - back,
        healthz_both_after_back_s=healthy,
        pings=sum(s.pings for s in sockets),
    )
    for sock in sockets:
        await sock.stop()
    await client.aclose()


async def test_redis_down_for_a_whole_run(pair, redis_server, replies):
    a, b = pair.servers
    client = await Client(a).signup()
    conversation = await client.create_conversation()
    # The page pings every 20 s: a watcher that waited for its ping would be up to 20 s late.
    sockets = await watchers(client, conversation, pair, ping_every=60.0)
    content = replies.set(f"redis down {uuid.uuid4().hex}", slow_text_reply(answer_text(20), chunks=20, delay=0.02))
    token = (await client.api("POST", "/api/tokens/", json_body={"name": "while redis is away"})).json()["token"]
    redis_server.stop()
    try:
        # A page opened now connects at once (its subscriptions are owed until Redis answers),
        # and a program's token still works (its failed-attempt count lives in Redis).
        late = await PageSocket(client, conversation, b, ping_every=60.0).start()
        assert late.close_codes == []
        sockets.append(late)
        async with httpx2.AsyncClient(timeout=10) as http:
            listed = await http.get(f"{b.base}/api/conversations/", headers={"Authorization": f"Bearer {token}"})
        assert listed.status_code == 200, listed.text
        await sockets[0].message(content)
        while not any(f["type"] == "complete" for f in await client.events(conversation)):
            await asyncio.sleep(0.1)
        run_id = (await client.events(conversation))[-1]["runId"]
    finally:
        redis_server.start()
    back = time.monotonic()
    done = [await sock.until_complete(run_id, timeout=45) for sock in sockets]
    healthy = await pair.healthy_after(back)
    await check_delivery(client, conversation, sockets, run_id)
    assert sum(s.pings for s in sockets) == 0, "caught up through a ping, not when the layer came back"
    assert [s.reconnects for s in sockets] == [0, 0, 0, 0]
    report(
        "Redis down for a whole run",
        every_socket_complete_after_back_s=max(done) - back,
        other_process_complete_after_back_s=done[1] - back,
        healthz_both_after_back_s=healthy,
    )
    for sock in sockets:
        await sock.stop()
    await client.aclose()


async def test_postgres_restarted_mid_run_with_connections_left_by_earlier_runs(pair, postgres, replies):
    a, b = pair.servers
    client = await Client(a).signup()
    # An earlier run on each process: each writer thread keeps the connection it stored with.
    for server in (a, b):
        earlier = await client.create_conversation()
        warm = replies.set(f"warm {uuid.uuid4().hex}", slow_text_reply("warm up", chunks=2, delay=0))
        sock = await client.socket(earlier, server=server)
        await sock.sync()
        await sock.message(warm)
        await sock.until_complete()
        await sock.close()
        # A blocking view: the request thread it ran on is kept, with the connection it used.
        assert (await client.api("GET", "/api/conversations/", server=server)).status_code == 200
    conversation = await client.create_conversation()
    # One watcher pings often, so that pings land on connections the restart broke.
    sockets = await watchers(client, conversation, pair, ping_every=0.5)
    answer = answer_text(120)
    content = replies.set(f"pg restart {uuid.uuid4().hex}", slow_text_reply(answer, chunks=120, delay=0.04))
    run_id = await send_message(client, conversation, a, content)
    await until_text(sockets, 3)
    restart_started = time.monotonic()
    postgres.restart()
    back = time.monotonic()
    healthy = await pair.healthy_after(back)
    # The kept request threads' connections are broken: the first blocking view checks its
    # thread's connection and opens a new one, not a 500.
    for server in pair.servers:
        listed = await client.api("GET", "/api/conversations/", server=server)
        assert listed.status_code == 200, (listed.status_code, pair.story())
    done = [await sock.until_complete(run_id) for sock in sockets]
    stored = await check_delivery(client, conversation, sockets, run_id)
    # The writer's retry on a new connection: the run went on, nothing lost.
    assert run_status(stored, run_id) == "succeeded", pair.story()
    # The writer's retry rides the restart out most times; sometimes (seen once in a whole CI
    # pass) the run is handed over and resumed instead (issue 24 stays open on it). Either way
    # nothing is lost: the only error allowed is that resume's INTERRUPTED.
    errors = [f for f in stored if f["type"] == "error"]
    assert all(f["code"] == "INTERRUPTED" and f.get("resumed") is True for f in errors), errors
    if not errors:
        assert "".join(f["content"] for f in stored if f["type"] == "text") == answer
    # The next run on the other process, whose writer's connection the restart broke too.
    second = replies.set(f"after restart {uuid.uuid4().hex}", slow_text_reply("second answer", chunks=3, delay=0))
    next_run = await send_message(client, conversation, b, second)
    await asyncio.gather(*(sock.until_complete(next_run) for sock in sockets))
    stored = await check_delivery(client, conversation, sockets, next_run)
    assert run_status(stored, next_run) == "succeeded"
    assert [s.reconnects for s in sockets] == [0, 0, 0]
    for server in pair.servers:
        assert "Exception inside application" not in server.log(tail=None)
    report(
        "PostgreSQL restarted (pg_ctl restart -m fast) mid-run",
        restart_s=back - restart_started,
        complete_after_back_s=max(done) - back,
        healthz_both_after_back_s=healthy,
    )
    for sock in sockets:
        await sock.stop()
    await client.aclose()


async def test_postgres_down_for_10_seconds(pair, postgres, replies):
    a, b = pair.servers
    client = await Client(a).signup()
    conversation = await client.create_conversation()
    sockets = await watchers(client, conversation, pair, ping_every=2.0)
    answer = answer_text(200)
    content = replies.set(f"pg down {uuid.uuid4().hex}", slow_text_reply(answer, chunks=200, delay=0.05))
    run_id = await send_message(client, conversation, a, content)
    await until_text(sockets, 3)
    postgres.stop()
    down_at = time.monotonic()
    async with httpx2.AsyncClient(timeout=5) as http:
        for server in pair.servers:
            assert (await http.get(f"{server.base}/healthz")).status_code == 503
    await asyncio.sleep(max(0.0, 10 - (time.monotonic() - down_at)))
    postgres.start()
    back = time.monotonic()
    healthy = await pair.healthy_after(back)
    done = [await sock.until_complete(run_id, timeout=90) for sock in sockets]
    stored = await check_delivery(client, conversation, sockets, run_id)
    # Handed over (resumed from its event log) rather than left for a heartbeat timeout.
    assert run_status(stored, run_id) == "succeeded", pair.story()
    assert [f for f in stored if f["type"] == "error" and f.get("resumed")]
    assert [s.reconnects for s in sockets] == [0, 0, 0]
    report(
        "PostgreSQL down for 10 s mid-run",
        complete_after_back_s=max(done) - back,
        healthz_both_after_back_s=healthy,
    )
    for sock in sockets:
        await sock.stop()
    await client.aclose()


async def test_the_model_endpoint_going_away_mid_stream(database, redis_server, log_dir):
    model = FakeLLM().start()
    port = model.port
    replies = Replies(model)
    pair = Pair(database, redis_server.url, model.base_url, log_dir).start()
    try:
        a, b = pair.servers
        client = await Client(a).signup()
        conversation = await client.create_conversation()
        sockets = await watchers(client, conversation, pair)
        content = replies.set(f"model gone {uuid.uuid4().hex}", slow_text_reply(answer_text(200), delay=0.05))
        run_id = await send_message(client, conversation, a, content)
        await until_text(sockets, 3)
        model.stop()  # its connections cut, and nothing listens on its port any more
        await asyncio.gather(*(sock.until_complete(run_id) for sock in sockets))
        stored = await check_delivery(client, conversation, sockets, run_id)
        assert run_status(stored, run_id) == "failed"
        assert [f for f in stored if f["type"] == "error" and f["code"] == "LLM_CALL_FAILED"]
        model = FakeLLM(port=port).start()
        back = time.monotonic()
        replies = Replies(model)
        after = replies.set(f"model back {uuid.uuid4().hex}", slow_text_reply("back again", chunks=3, delay=0))
        next_run = await send_message(client, conversation, b, after)
        done = max([await sock.until_complete(next_run) for sock in sockets])
        stored = await check_delivery(client, conversation, sockets, next_run)
        assert run_status(stored, next_run) == "succeeded"
        assert [s.reconnects for s in sockets] == [0, 0, 0]
        report("the model endpoint gone mid-stream", next_run_complete_after_back_s=done - back)
        for sock in sockets:
            await sock.stop()
        await client.aclose()
    finally:
        pair.stop()
        model.stop()
