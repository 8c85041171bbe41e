"""A Chainlit server (bench/peers/chainlit_app.py) under `chainlit run` in its own venv, with the
Stack interface the measurements use (label, base, pids, start, stop) as bench/reference.py's
RelayStack has it.

With `data=True`, Chainlit's SQLAlchemy data layer on a fresh SQLite file (through aiosqlite), the
schema Chainlit documents for it (docs.chainlit.io, "SQLAlchemy Data Layer") in SQLite's words,
and a password sign-in, as Chainlit keeps a history only for a signed-in user.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx2

from ..procs import stop_all
from ..server import ROOT, FakeModel, free_port, wait_http

VENV = ROOT / os.environ.get("BENCH_CHAINLIT_VENV", ".venv-chainlit")
APP = ROOT / "bench" / "peers" / "chainlit_app.py"
PASSWORD = "bench"  # bench/peers/chainlit_app.py's
AUTH_COOKIE = "access_token"  # Chainlit's default CHAINLIT_AUTH_COOKIE_NAME

SCHEMA = """
CREATE TABLE users ("id" TEXT PRIMARY KEY, "identifier" TEXT NOT NULL UNIQUE, "metadata" TEXT NOT NULL,
    "createdAt" TEXT);
CREATE TABLE threads ("id" TEXT PRIMARY KEY, "createdAt" TEXT, "name" TEXT, "userId" TEXT, "userIdentifier" TEXT,
    "tags" TEXT, "metadata" TEXT, FOREIGN KEY ("userId") REFERENCES users("id") ON DELETE CASCADE);
CREATE TABLE steps ("id" TEXT PRIMARY KEY, "name" TEXT NOT NULL, "type" TEXT NOT NULL, "threadId" TEXT NOT NULL,
    "parentId" TEXT, "streaming" BOOLEAN NOT NULL, "waitForAnswer" BOOLEAN, "isError" BOOLEAN, "metadata" TEXT,
    "tags" TEXT, "input" TEXT, "output" TEXT, "createdAt" TEXT, "command" TEXT, "modes" TEXT, "start" TEXT,
    "end" TEXT, "generation" TEXT, "showInput" TEXT, "language" TEXT, "indent" INT, "defaultOpen" BOOLEAN,
    "autoCollapse" BOOLEAN, FOREIGN KEY ("threadId") REFERENCES threads("id") ON DELETE CASCADE);
CREATE TABLE elements ("id" TEXT PRIMARY KEY, "threadId" TEXT, "type" TEXT, "url" TEXT, "chainlitKey" TEXT,
    "name" TEXT NOT NULL, "display" TEXT, "objectKey" TEXT, "size" TEXT, "page" INT, "language" TEXT,
    "forId" TEXT, "mime" TEXT, "props" TEXT, "autoPlay" BOOLEAN, "playerConfig" TEXT,
    FOREIGN KEY ("threadId") REFERENCES threads("id") ON DELETE CASCADE);
CREATE TABLE feedbacks ("id" TEXT PRIMARY KEY, "forId" TEXT NOT NULL, "threadId" TEXT NOT NULL, "value" INT NOT NULL,
    "comment" TEXT, FOREIGN KEY ("threadId") REFERENCES threads("id") ON DELETE CASCADE);
"""


def installed() -> bool:
    return (VENV / "bin" / "chainlit").exists()


def version() -> str:
    """The installed Chainlit's version (the Makefile's pin), from its dist-info's name."""
    found = sorted(VENV.glob("lib/python*/site-packages/chainlit-*.dist-info"))
    return found[-1].name.removeprefix("chainlit-").removesuffix(".dist-info") if found else "?"


@dataclass
class ChainlitStack:
    data: bool = False
    ports: list[int] = field(default_factory=list)
    servers: list[subprocess.Popen] = field(default_factory=list)
    cookie: str = ""  # a signed-in user's, with the data layer
    _tmp: str = ""

    @property
    def label(self) -> str:
        layer = "its SQLAlchemy data layer on SQLite, signed in" if self.data else "no data layer"
        return f"Chainlit {version()}, {layer}, 1 uvicorn"

    @property
    def database(self) -> Path:
        return Path(self._tmp) / "chainlit.sqlite3"

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.servers]

    def base(self, index: int = 0) -> str:
        return f"http://127.0.0.1:{self.ports[index % len(self.ports)]}"

    def start(self, model: FakeModel) -> ChainlitStack:
        if not installed():
            raise RuntimeError(f"no Chainlit in {VENV}: run `make peers`")
        # Chainlit writes its .chainlit/ config and chainlit.md into its app root: a folder of its own.
        self._tmp = tempfile.mkdtemp(prefix="agentsite-bench-chainlit-")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DJANGO_", "CHAINLIT_"))}
        env.update(
            OPENAI_BASE_URL=model.base_url,
            OPENAI_API_KEY="x",
            CHAINLIT_APP_ROOT=self._tmp,
            PYTHONUNBUFFERED="1",
            VIRTUAL_ENV=str(VENV),
        )
        if self.data:
            with sqlite3.connect(self.database) as db:
                db.executescript(SCHEMA)
            env.update(BENCH_CHAINLIT_DATABASE=str(self.database), CHAINLIT_AUTH_SECRET=uuid.uuid4().hex * 2)
        port = free_port()
        command = [str(VENV / "bin" / "chainlit"), "run", str(APP), "--headless", "--host", "127.0.0.1"]
        with open(os.path.join(self._tmp, "chainlit.log"), "w") as log:  # the child keeps its own descriptor
            self.servers.append(
                subprocess.Popen(
                    [*command, "--port", str(port)], cwd=self._tmp, env=env, stdout=log, stderr=subprocess.STDOUT
                )
            )
        self.ports.append(port)
        wait_http(self.base(0) + "/project/settings", process=self.servers[0])
        if self.data:
            self.cookie = self.sign_in("bench-user")
        return self

    def sign_in(self, username: str) -> str:
        """The auth cookie of Chainlit's /login (its password form) for `username`."""
        response = httpx2.post(self.base(0) + "/login", data={"username": username, "password": PASSWORD}, timeout=30)
        response.raise_for_status()
        token = response.cookies.get(AUTH_COOKIE)
        if not token:
            raise RuntimeError(f"Chainlit's /login set no {AUTH_COOKIE} cookie: {response.headers}")
        return f"{AUTH_COOKIE}={token}"

    def rows(self, table: str) -> int:
        """How many rows the data layer wrote to a table (steps, threads): that it persisted at all."""
        with sqlite3.connect(self.database) as db:
            return db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # noqa: S608 (the bench's own names)

    def stop(self) -> None:
        stop_all(self.servers)
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def server_log_tail(self, lines: int = 20) -> str:
        path = Path(self._tmp) / "chainlit.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""
