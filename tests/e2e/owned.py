"""A PostgreSQL cluster and a Redis server that a test starts on free ports, owns, and may stop,
restart or take down: never the machine's shared ones (other test runs use those).

PostgreSQL's server refuses to run as root: initdb and pg_ctl run as the `postgres` OS user
(runuser when the tests run as root, as in CI; as themselves otherwise). The cluster lives in a
temp directory that user can write, and listens on 127.0.0.1 with trust authentication.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from .harness import free_port


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise RuntimeError(f"no {name} under /usr/lib/postgresql/*/bin")
    return found[-1]


def _as_postgres(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


class OwnedPostgres:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="agentsite-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self._run([_pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync"])

    def url(self, name: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def _run(self, args: list[str]) -> None:
        subprocess.run(_as_postgres(args), check=True, capture_output=True, timeout=120, cwd=self.root)

    def _ctl(self, *args: str) -> None:
        self._run([_pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", *args])

    def start(self) -> None:
        # Enough connections for two daphnes and the test; fsync off: a test cluster, thrown away.
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off"
        self._ctl("-o", options, "start")
        self.wait_ready()

    def stop(self) -> None:
        self._ctl("-m", "fast", "stop")

    def restart(self) -> None:
        """`pg_ctl restart -m fast`: every open connection is cut (AdminShutdown)."""
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off"
        self._ctl("-m", "fast", "-o", options, "restart")
        self.wait_ready()

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.url(), connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def destroy(self) -> None:
        try:
            self._ctl("-m", "immediate", "stop")
        except subprocess.CalledProcessError:
            pass  # already stopped
        shutil.rmtree(self.root, ignore_errors=True)


class OwnedRedis:
    def __init__(self) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="agentsite-redis-"))
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
            + ["--dir", str(self.dir), "--logfile", str(self.dir / "redis.log")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            probe = subprocess.run(
                ["redis-cli", "-p", str(self.port), "ping"], capture_output=True, text=True, check=False
            )
            if probe.stdout.strip() == "PONG":
                return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not answer")

    def stop(self) -> None:
        """Gone at once, as a crashed or restarted Redis is: every connection to it is cut."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
