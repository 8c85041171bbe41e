"""Fixtures of the end-to-end tests: databases of their own, daphne processes, users.

Without DATABASE_URL the servers use temp SQLite files and the in-memory layer;
with a postgres DATABASE_URL (the `services` / `multiprocess` pass) each database
is a fresh `agentsite_e2e_<random>` created from a migrated template and dropped
at the end, so pytest-django's test database is never touched; REDIS_URL, when
set, is handed to every server.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.fakellm import FakeLLM

from .harness import Client, Replies, Server, migrate, server_env

DATABASE_URL = os.environ.get("DATABASE_URL", "")
REDIS_URL = os.environ.get("REDIS_URL") or None
ON_POSTGRES = DATABASE_URL.startswith(("postgres://", "postgresql://"))


def _with_db_name(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


class Databases:
    """Creates migrated databases on demand (copies of one migrated template) and drops them."""

    def __init__(self, tmp_dir, llm_base_url: str):
        self.tmp_dir = tmp_dir
        self.llm_base_url = llm_base_url
        self.prefix = f"agentsite_e2e_{uuid.uuid4().hex[:8]}"
        self.created: list[str] = []
        self.template: str | None = None

    def _admin(self):
        import psycopg

        return psycopg.connect(_with_db_name(DATABASE_URL, "postgres"), autocommit=True)

    def _migrated_template(self) -> str:
        if self.template is None:
            if ON_POSTGRES:
                name = f"{self.prefix}_tpl"
                with self._admin() as conn:
                    conn.execute(f'CREATE DATABASE "{name}"')
                self.created.append(name)
                url = _with_db_name(DATABASE_URL, name)
            else:
                url = f"sqlite:///{self.tmp_dir / 'template.sqlite3'}"
            migrate(server_env(database_url=url, llm_base_url=self.llm_base_url))
            self.template = url
        return self.template

    def new(self) -> str:
        template = self._migrated_template()
        n = len(self.created)
        if ON_POSTGRES:
            name = f"{self.prefix}_{n}"
            with self._admin() as conn:
                conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{urlsplit(template).path[1:]}"')
            self.created.append(name)
            return _with_db_name(DATABASE_URL, name)
        path = self.tmp_dir / f"db{n}.sqlite3"
        shutil.copy(template.removeprefix("sqlite:///"), path)
        self.created.append(str(path))
        return f"sqlite:///{path}"

    def drop_all(self) -> None:
        if not ON_POSTGRES:
            return
        with self._admin() as conn:
            for name in reversed(self.created):
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def e2e_llm():
    with FakeLLM() as fake:
        yield fake


@pytest.fixture
def replies(e2e_llm):
    return Replies(e2e_llm)


@pytest.fixture(scope="session")
def databases(tmp_path_factory, e2e_llm):
    dbs = Databases(tmp_path_factory.mktemp("e2e-db"), e2e_llm.base_url)
    yield dbs
    dbs.drop_all()


@pytest.fixture(scope="session")
def log_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("e2e-logs")


class Servers:
    """Starts daphnes on a database (with REDIS_URL when set). Each holds database connections
    and the suite starts about thirty: a module's own are stopped when the module ends (below),
    or PostgreSQL runs out of connections near the end; the shared one lives for the session."""

    def __init__(self, e2e_llm, log_dir: Path):
        self.e2e_llm, self.log_dir = e2e_llm, log_dir
        self.started: list[tuple[Server, bool]] = []  # (server, kept for the session)

    def __call__(self, database_url: str, name: str = "daphne", *, keep: bool = False, **env: str) -> Server:
        server = Server(
            server_env(database_url=database_url, llm_base_url=self.e2e_llm.base_url, redis_url=REDIS_URL, **env),
            log_dir=self.log_dir,
            name=name,
        )
        self.started.append((server, keep))
        return server.start()

    def stop(self, *, kept: bool) -> None:
        servers = [server for server, keep in self.started if kept or not keep]
        for server in servers:  # all at once: each takes a moment to shut down
            if server.running:
                server.proc.terminate()
        for server in servers:
            server.stop()
        self.started = [(server, keep) for server, keep in self.started if server not in servers]


@pytest.fixture(scope="session")
def make_server(e2e_llm, log_dir):
    servers = Servers(e2e_llm, log_dir)
    yield servers
    servers.stop(kept=True)


@pytest.fixture(scope="module", autouse=True)
def stop_the_modules_servers(make_server):
    yield
    make_server.stop(kept=False)


@pytest.fixture(scope="session")
def server(databases, make_server):
    """One daphne shared by the tests that do not stop their server."""
    return make_server(databases.new(), name="shared", keep=True)


@pytest.fixture
async def user(server):
    client = await Client(server).signup()
    yield client
    await client.aclose()


@pytest.fixture
async def other_user(server):
    client = await Client(server).signup()
    yield client
    await client.aclose()
