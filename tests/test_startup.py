"""Operator errors at start-up: `manage.py` and a daphne started directly end with one clear line, not a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DAPHNE = Path(sys.executable).parent / "daphne"


def environment(tmp_path: Path, **variables: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "AGENT_", "OPENAI_")) and k not in ("DATABASE_URL", "REDIS_URL")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="agentsite.settings",
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        SECRET_KEY="startup-test-key",
        PYTHONUNBUFFERED="1",
    )
    env.update(variables)
    return env


def manage(tmp_path: Path, *args: str, **variables: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=environment(tmp_path, **variables),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def daphne(tmp_path: Path, **variables: str) -> subprocess.CompletedProcess:
    # A server that starts despite the error would serve until the timeout: the test fails on it.
    return subprocess.run(
        [str(DAPHNE), "-b", "127.0.0.1", "-p", "0", "agentsite.asgi:application"],
        cwd=ROOT,
        env=environment(tmp_path, **variables),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def one_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr, result.stderr
    assert "Listening on" not in result.stderr + result.stdout, "the server started serving"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("run", [manage, daphne], ids=["manage", "daphne"])
@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        (
            {"AGENT_MAX_RETRIES": "three"},
            "agentsite: configuration error: AGENT_MAX_RETRIES must be an integer, not 'three'",
        ),
        (
            {"AGENT_RETRY_INTERVAL": "10s"},
            "agentsite: configuration error: AGENT_RETRY_INTERVAL must be a number, not '10s'",
        ),
        (
            {"AGENT_TOOL_TIMEOUTS": "bash=slow"},
            "agentsite: configuration error: AGENT_TOOL_TIMEOUTS must be name=number pairs, not 'bash=slow'",
        ),
        (
            {"DATABASE_URL": "mysqlx://admin:hunter2@db.example/agentsite"},
            (
                "agentsite: configuration error: DATABASE_URL has scheme 'mysqlx'; "
                "use sqlite:///path/to/db.sqlite3 or postgres://user:pass@host:5432/name"
            ),
        ),
        (
            {"DATABASE_URL": "db.sqlite3"},
            (
                "agentsite: configuration error: DATABASE_URL has no scheme; "
                "use sqlite:///path/to/db.sqlite3 or postgres://user:pass@host:5432/name"
            ),
        ),
    ],
)
def test_a_bad_setting_is_one_line_naming_the_variable(tmp_path, run, variables, expected):
    args = ("migrate", "--noinput") if run is manage else ()
    assert one_line(run(tmp_path, *args, **variables)) == expected


@pytest.mark.parametrize("run", [manage, daphne], ids=["manage", "daphne"])
def test_an_unreachable_database_is_one_line_without_the_password(tmp_path, run):
    port = closed_port()
    args = ("migrate", "--noinput") if run is manage else ()
    line = one_line(run(tmp_path, *args, DATABASE_URL=f"postgres://agent:hunter2@127.0.0.1:{port}/agentsite"))
    assert line.startswith(
        f"agentsite: DATABASE_URL: cannot connect to the postgresql database 'agentsite' at 127.0.0.1:{port}: "
    ), line
    assert "refused" in line.lower()
    assert "hunter2" not in line


def test_an_sqlite_file_that_cannot_be_opened_is_one_line(tmp_path):
    path = tmp_path / "missing-folder" / "db.sqlite3"
    line = one_line(manage(tmp_path, "migrate", "--noinput", DATABASE_URL=f"sqlite:///{path}"))
    assert (
        line == f"agentsite: DATABASE_URL: cannot connect to the SQLite database {path}: unable to open database file"
    )


def test_daphne_runs_the_system_checks_and_refuses_to_serve_on_errors(tmp_path):
    assert manage(tmp_path, "migrate", "--noinput", "-v", "0").returncode == 0
    result = daphne(tmp_path, AGENT_TOOLS="calculator,nope")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "Listening on" not in result.stderr + result.stdout
    assert "agentsite: the server will not start." in result.stderr
    assert "(agentsite.E002) AGENT_TOOLS names unknown tools: nope." in result.stderr


def test_a_database_error_on_a_reachable_database_keeps_its_traceback(tmp_path):
    # Only an unreachable database is summed up in one line; other database errors stay whole.
    query = "from django.db import connection; connection.cursor().execute('SELECT * FROM no_such_table')"
    result = manage(tmp_path, "shell", "-c", query)
    assert result.returncode != 0
    assert "Traceback" in result.stderr and "no such table: no_such_table" in result.stderr
    assert "DATABASE_URL" not in result.stderr
