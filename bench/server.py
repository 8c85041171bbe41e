"""The system under test: a database, the fake model and one or more server processes.

A Stack is one configuration of the suite ("sqlite+memory / daphne",
"postgres+redis / 2x uvicorn", ...). It makes a fresh database (a temp SQLite
file, or a new PostgreSQL database dropped afterwards), migrates it, and starts
the servers as subprocesses with the environment the project documents.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx2

from .procs import stop_all
from .query_count import STATS_PATH

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
PG_ADMIN_URL = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float = 120.0, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{url}: the process exited with {process.returncode}")
        try:
            if httpx2.get(url, timeout=2).status_code < 500:
                return
        except Exception:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {timeout:g} s")


class FakeModel:
    """bench.fakemodel in its own process, so that the client's CPU does not slow it down; with
    `tls` (the PEM files of a certificate for 127.0.0.1 and its key) over HTTPS."""

    def __init__(self, tls: tuple[str, str] | None = None) -> None:
        self.port = free_port()
        self.scheme = "https" if tls else "http"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.fakemodel", str(self.port), *(tls or ())],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise RuntimeError("the fake model did not start")

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()


@dataclass
class Stack:
    name: str
    database: str = "sqlite"  # sqlite | postgres
    server: str = "daphne"  # daphne | uvicorn | daphne-traced | daphne-counted | daphne-stepped
    processes: int = 1
    flush_ms: int | None = None  # AGENT_STREAM_FLUSH_MS, None = the server's default
    max_flush_ms: int | None = None  # AGENT_STREAM_FLUSH_MAX_MS, likewise
    extra_env: dict[str, str] = field(default_factory=dict)  # settings of one measurement (bench/soak.py)
    # Settings of one process only, by its index: two processes under the same load, one changed
    # (the soak's `--process-env`, e.g. another allocator beside the default).
    process_env: dict[int, dict[str, str]] = field(default_factory=dict)
    # The services of a postgres stack: the machine's (BENCH_PG_URL, BENCH_REDIS_URL) unless given.
    pg_admin_url: str = PG_ADMIN_URL
    redis_url: str = REDIS_URL
    ports: list[int] = field(default_factory=list)
    servers: list[subprocess.Popen] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    _tmp: str = ""
    _pg_name: str = ""

    @property
    def redis(self) -> bool:
        return self.database == "postgres"

    @property
    def label(self) -> str:
        layer = "redis" if self.redis else "memory"
        return f"{self.database}+{layer}, {self.processes}x {self.server}"

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.servers]

    def base(self, index: int = 0) -> str:
        return f"http://127.0.0.1:{self.ports[index % len(self.ports)]}"

    # -- lifecycle -------------------------------------------------------------------
    def start(self, model: FakeModel) -> Stack:
        self._tmp = tempfile.mkdtemp(prefix="agentsite-bench-")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_", "DATABASE_", "REDIS_"))}
        env.update(
            DJANGO_SETTINGS_MODULE="agentsite.settings",
            AGENT_MODEL="fake-model",
            OPENAI_API_KEY="x",
            OPENAI_BASE_URL=model.base_url,
            ALLOWED_HOSTS="127.0.0.1,localhost",
            AGENT_MESSAGES_PER_MINUTE="0",
            AGENT_MAX_RETRIES="0",
            AGENT_RETRY_INTERVAL="1",
            AGENT_WORKSPACE_ROOT=os.path.join(self._tmp, "workspaces"),
            LOG_LEVEL="WARNING",
            PYTHONUNBUFFERED="1",
            SECRET_KEY="bench-" + uuid.uuid4().hex,
        )
        env.update(self.extra_env)
        if self.flush_ms is not None:
            env["AGENT_STREAM_FLUSH_MS"] = str(self.flush_ms)
        if self.max_flush_ms is not None:
            env["AGENT_STREAM_FLUSH_MAX_MS"] = str(self.max_flush_ms)
        if self.database == "postgres":
            self._pg_name = f"agentsite_bench_{uuid.uuid4().hex[:8]}"
            _pg_admin(f'CREATE DATABASE "{self._pg_name}"', url=self.pg_admin_url)
            env["DATABASE_URL"] = self.pg_admin_url.rsplit("/", 1)[0] + "/" + self._pg_name
            env["REDIS_URL"] = self.redis_url
        else:
            env["DATABASE_URL"] = f"sqlite:///{os.path.join(self._tmp, 'db.sqlite3')}"
        self.env = env
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0", "--skip-checks"],
            cwd=ROOT,
            env=env,
            check=True,
        )
        for _ in range(self.processes):
            self._spawn(free_port())
        self._wait_up()
        return self

    def _command(self, port: int) -> list[str]:
        if self.server == "uvicorn":
            return [
                str(VENV_BIN / "uvicorn"),
                "agentsite.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--lifespan",
                "off",
                "--no-access-log",
                "--log-level",
                "warning",
            ]
        if self.server == "daphne-traced":  # under tracemalloc (bench/socket_memory.py)
            return [sys.executable, "-m", "bench.socket_memory", "--serve", str(port), self._tmp]
        # daphne-counted: with its database queries counted (bench/counted_asgi.py); daphne-stepped:
        # with each run start's steps timed (bench/stepped_asgi.py)
        app = {
            "daphne-counted": "bench.counted_asgi:application",
            "daphne-stepped": "bench.stepped_asgi:application",
        }.get(self.server, "agentsite.asgi:application")
        # The project's daphne (serving/serve.py), as `make run` and deploy/ start it.
        return [str(VENV_BIN / "python"), "-m", "serving.serve", "-b", "127.0.0.1", "-p", str(port), "-v", "0", app]

    def _spawn(self, port: int) -> None:
        env = {**self.env, **self.process_env.get(len(self.servers), {})}
        with open(os.path.join(self._tmp, f"server-{port}.log"), "a") as log:  # the child keeps its own descriptor
            self.servers.append(
                subprocess.Popen(self._command(port), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            )
        self.ports.append(port)

    def _wait_up(self) -> None:
        for index, process in enumerate(self.servers):
            # Generous: on a loaded shared machine a start-up has taken ~30 s, and over 90 s.
            wait_http(self.base(index) + "/healthz", timeout=240, process=process)

    def _stop_servers(self) -> None:
        stop_all(self.servers)

    def restart(self) -> None:
        """Every server stopped (SIGTERM, as systemd does) and started again on its port with the
        same database; returns once they answer again."""
        ports = list(self.ports)
        self._stop_servers()
        self.servers, self.ports = [], []
        for port in ports:
            self._spawn(port)
        self._wait_up()

    def query_counts(self, index: int = 0) -> dict:
        """A daphne-counted server's database queries so far (bench/query_count.py)."""
        return httpx2.get(self.base(index) + STATS_PATH, timeout=30).json()

    def stop(self) -> None:
        self._stop_servers()
        if self._pg_name:
            try:
                _pg_admin(f'DROP DATABASE IF EXISTS "{self._pg_name}" WITH (FORCE)', url=self.pg_admin_url)
            except Exception as exc:  # leave it rather than fail the report
                print(f"could not drop {self._pg_name}: {exc}", file=sys.stderr)
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def server_log_tail(self, lines: int = 20) -> str:
        out = []
        for path in sorted(Path(self._tmp).glob("server-*.log")):
            out += path.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(out)

    # -- data ------------------------------------------------------------------------
    def seed(self, **command) -> dict:
        done = subprocess.run(
            [sys.executable, "-m", "bench.seed"],
            cwd=ROOT,
            env=self.env,
            input=json.dumps(command),
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise RuntimeError(f"bench.seed {command.get('op')} failed:\n{done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])


def _pg_admin(sql: str, url: str = PG_ADMIN_URL) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql)
