"""MCP servers for the tests: the SDK's own server (server.py) over stdio and streamable HTTP, and
a hand-written one of the older protocol (raw_server.py)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chat import mcp

HERE = Path(__file__).resolve().parent
SERVER = HERE / "server.py"
RAW_SERVER = HERE / "raw_server.py"
START_SECONDS = 60  # the machine is shared and slow: a Python server with the SDK takes a while


def stdio_server(*args: str, env: dict[str, str] | None = None) -> dict:
    return {"command": sys.executable, "args": [str(SERVER), "stdio", *args], "env": env or {}}


def raw_server() -> dict:
    return {"command": sys.executable, "args": [str(RAW_SERVER)]}


@pytest.fixture
def mcp_config(tmp_path, settings):
    """Write an `mcpServers` file and point AGENT_MCP_CONFIG at it."""

    def write(servers: dict, *, timeout: float = START_SECONDS) -> Path:
        path = tmp_path / "mcp.json"
        path.write_text(json.dumps({"mcpServers": servers}))
        settings.AGENT_MCP_CONFIG = str(path)
        settings.AGENT_MCP_TIMEOUT = timeout
        return path

    return write


@pytest.fixture
async def mcp_sessions():
    """This test's event loop's MCP sessions, closed (and their processes stopped) at its end."""
    yield mcp.get_servers()
    await mcp.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class HttpServer:
    """server.py serving streamable HTTP in its own process; `start()` again after it died."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen([sys.executable, str(SERVER), "http", str(self.port)])
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the test MCP server exited with {self.process.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("the test MCP server did not listen in time")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def http_server():
    server = HttpServer()
    server.start()
    yield server
    server.stop()
