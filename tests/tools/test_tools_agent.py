"""Each tool's happy path (and a refusal) through the real agent loop, with the fake model calling it."""

from __future__ import annotations

import importlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx2
import openai
import pytest

from chat.agent import Agent, ChatModel
from chat.agent.events import ReferenceEvent, ToolEndEvent
from chat.tools import build_registry
from tests.fakellm import text_reply, tool_call_reply

from .helpers import configure
from .test_bash import _sandbox_problem

search = importlib.import_module("chat.tools.web_search")  # the module: chat.tools.web_search names the tool

REPO_SKILLS = Path(__file__).resolve().parent.parent.parent / "skills"


class _Page(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        body = b"<html><title>Local</title><body><p>Served locally.</p><script>x()</script></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def page_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/page"
    server.shutdown()


@pytest.fixture
def tavily(monkeypatch):
    monkeypatch.setattr(
        search,
        "TRANSPORT",
        httpx2.MockTransport(
            lambda request: httpx2.Response(
                200, json={"results": [{"title": "Hit", "url": "https://example.org/", "content": "snippet"}]}
            )
        ),
    )


async def run_tool(fake_llm, context, name, arguments):
    fake_llm.script(tool_call_reply((name, arguments)), text_reply("done"))
    model = ChatModel(client=openai.AsyncOpenAI(base_url=fake_llm.base_url, api_key="x", max_retries=0), model="fake")
    agent = Agent(model, tools=build_registry([name]), retry_interval=0)
    events = [event async for event in agent.stream("go", context=context)]
    (end,) = [e for e in events if isinstance(e, ToolEndEvent)]
    assert agent is not None and events[-1].status == "succeeded"
    # The tool's result went back to the model in the next request.
    tool_message = fake_llm.requests[-1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["content"] == end.result
    return end, events


CASES = [
    ("write_file", {"path": "out/a.txt", "content": "hello"}, "wrote 5 bytes to out/a.txt"),
    ("read_file", {"path": "data.txt"}, "line one"),
    ("list_files", {}, "data.txt  (9 bytes)"),
    ("load_skill", {"name": "csv-data-summary"}, "# Skill: csv-data-summary"),
    ("read_skill_file", {"name": "code-review-checklist", "path": "references/checklist.md"}, "# Review checklist"),
    ("calculator", {"expression": "2**10"}, "1024"),
]


@pytest.mark.parametrize("name, arguments, expected", CASES, ids=[c[0] for c in CASES])
async def test_tool_through_the_loop(fake_llm, context, workspace, name, arguments, expected):
    (workspace / "data.txt").write_text("line one\n")
    configure(context, skills={"skills_dir": REPO_SKILLS})
    end, _ = await run_tool(fake_llm, context, name, arguments)
    assert end.is_error is False and expected in end.result


async def test_fetch_url_through_the_loop(fake_llm, context, page_url):
    configure(context, fetch={"allowed_hosts": ("127.0.0.1",)})
    end, _ = await run_tool(fake_llm, context, "fetch_url", {"url": page_url})
    assert end.is_error is False and "Served locally." in end.result and "x()" not in end.result


async def test_web_search_through_the_loop(fake_llm, context, tavily):
    configure(context, search={"api_key": "tvly-test"})
    end, events = await run_tool(fake_llm, context, "web_search", {"query": "anything"})
    assert end.is_error is False and "[1] Hit" in end.result
    (reference,) = [e for e in events if isinstance(e, ReferenceEvent)]
    assert reference.to_dict()["references"] == [{"title": "Hit", "url": "https://example.org/", "snippet": "snippet"}]


@pytest.mark.skipif(_sandbox_problem() is not None, reason="no sandbox here")
async def test_bash_through_the_loop(fake_llm, context, tmp_path):
    import shutil
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="agentsite-bash-"))
    top.chmod(0o711)
    context.workspace = top / "ws"
    try:
        end, _ = await run_tool(fake_llm, context, "bash", {"command": "echo hi > f.txt; cat f.txt"})
        assert end.is_error is False and end.result == "hi\n[exit code 0]"
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.parametrize(
    "name, arguments, message",
    [
        ("read_file", {"path": "../../etc/passwd"}, "'..' is not allowed"),
        ("fetch_url", {"url": "http://169.254.169.254/latest/meta-data/"}, "link-local"),
        ("load_skill", {"name": "../etc"}, "no skill named"),
    ],
)
async def test_refusals_are_tool_errors_the_model_reads(fake_llm, context, name, arguments, message):
    end, _ = await run_tool(fake_llm, context, name, arguments)
    assert end.is_error is True and message in json.loads(end.result)["error"]
