"""The reference row (`--only reference`, in the default run): bench/reference_relay.py, a
minimal Channels relay with no persistence, served by one daphne like the project's
sqlite-daphne stack, measured in the same run with the same fake model and the same
clients: single-stream first text and the concurrency levels. The report divides the
project's figures by these (bench/report.py reference_summary). With `--only idle`, the relay's
idle sockets are measured after the project's, in the same run (measure_idle)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from . import concurrency, firsttext, idle
from .pool import Pool
from .procs import stop_all
from .server import ROOT, VENV_BIN, FakeModel, free_port, wait_http

RELAY_APP = "bench.reference_relay:application"


@dataclass
class RelayStack:
    """The Stack interface the measurements use (base, pids, start, stop) for the relay."""

    label: str = "reference: Channels relay, no persistence, 1x daphne"
    ports: list[int] = field(default_factory=list)
    servers: list[subprocess.Popen] = field(default_factory=list)
    _tmp: str = ""

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.servers]

    def base(self, index: int = 0) -> str:
        return f"http://127.0.0.1:{self.ports[index % len(self.ports)]}"

    def start(self, model: FakeModel) -> RelayStack:
        self._tmp = tempfile.mkdtemp(prefix="agentsite-bench-relay-")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DJANGO_"))}
        env.update(OPENAI_BASE_URL=model.base_url, OPENAI_API_KEY="x", PYTHONUNBUFFERED="1")
        port = free_port()
        with open(os.path.join(self._tmp, "relay.log"), "w") as log:  # the child keeps its own descriptor
            self.servers.append(
                subprocess.Popen(self._command(port), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            )
        self.ports.append(port)
        wait_http(self.base(0) + "/", process=self.servers[0])
        return self

    def _command(self, port: int) -> list[str]:
        return [str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "-v", "0", RELAY_APP]

    def stop(self) -> None:
        stop_all(self.servers)
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def server_log_tail(self, lines: int = 20) -> str:
        path = Path(self._tmp) / "relay.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


def pool(size: int) -> Pool:
    """The relay has no users nor conversations: any session and id will do."""
    return Pool({"users": [{"session": "-", "conversations": [str(uuid.uuid4()) for _ in range(size)]}]})


async def measure(model: FakeModel, *, levels: list[int]) -> dict:
    stack = RelayStack()
    out: dict = {"label": stack.label}
    try:
        stack.start(model)
        conversations = pool(firsttext.RUNS + 1 + 1 + sum(levels))
        print(f"\n[reference] {stack.label}: first text", flush=True)
        out["first_text"] = await firsttext.measure(stack, conversations)
        print(f"[reference] concurrency {levels}", flush=True)
        out["concurrency"] = await concurrency.measure(stack, model, conversations, levels=levels)
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
        print(stack.server_log_tail(), flush=True)
    finally:
        stack.stop()
    for lv in out.get("concurrency", {}).get("levels", []):
        lv.pop("conversations", None)
    out.get("concurrency", {}).get("solo", {}).pop("conversations", None)
    return out


async def measure_idle(model: FakeModel, *, sockets: int) -> dict:
    """bench/idle.py on the relay: what a bare Channels socket costs on the same daphne."""
    stack = RelayStack()
    out: dict = {"label": stack.label}
    try:
        stack.start(model)
        print(f"\n[reference] {stack.label}: idle {sockets}", flush=True)
        out["idle"] = await asyncio.wait_for(idle.measure(stack, model, pool(sockets + 50), sockets=sockets), 300)
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
        print(stack.server_log_tail(), flush=True)
    finally:
        stack.stop()
    return out
