"""Every built-in tool end to end: a WebSocket message, the fake model calling the tool, the stored run."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async

from chat.models import ToolRecord
from tests.asgi_socket import Socket
from tests.fakellm import text_reply, tool_call_reply

from .test_bash import _sandbox_problem
from .test_tools_agent import REPO_SKILLS, page_url, tavily  # noqa: F401 - fixtures

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def tool_settings(settings, llm_settings, page_url):
    top = Path(tempfile.mkdtemp(prefix="agentsite-ws-"))
    top.chmod(0o711)  # the bash sandbox user must be able to walk down to the workspaces
    settings.AGENT_WORKSPACE_ROOT = top
    settings.AGENT_SKILLS_DIR = REPO_SKILLS
    settings.AGENT_TOOLS = [
        "calculator", "current_time", "read_file", "write_file", "list_files", "load_skill",
        "fetch_url", "web_search", "bash",
    ]  # fmt: skip
    settings.AGENT_FETCH_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.TAVILY_API_KEY = "tvly-test"
    settings.AGENT_TOOL_RATE_LIMIT = 100
    settings.AGENT_APPROVAL_TOOLS = []  # the tools themselves here; bash's approval: tests/e2e/test_approvals.py
    yield llm_settings
    shutil.rmtree(top, ignore_errors=True)


async def run_over_socket(conversation, fake_llm, *calls):
    fake_llm.script(tool_call_reply(*calls), text_reply("done"))
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "use the tools"})
    frames = await socket.run_to_end()
    await socket.close()
    assert frames[-1] == {**frames[-1], "type": "complete", "status": "succeeded"}
    return frames


CASES = [
    ("write_file", {"path": "notes/a.txt", "content": "hello"}, "wrote 5 bytes"),
    ("calculator", {"expression": "6*7"}, "42"),
    ("current_time", {"timezone": "Europe/Paris"}, "+0"),
    ("load_skill", {"name": "web-research-brief"}, "# Skill: web-research-brief"),
    ("read_skill_file", {"name": "csv-data-summary", "path": "references/report-template.md"}, "# Summary of"),
    ("web_search", {"query": "agents"}, "[1] Hit"),
]


@pytest.mark.parametrize("name, arguments, expected", CASES, ids=[c[0] for c in CASES])
async def test_each_tool_over_a_websocket(conversation, registry, tool_settings, tavily, name, arguments, expected):
    frames = await run_over_socket(conversation, tool_settings, (name, arguments))
    (end,) = [f for f in frames if f["type"] == "tool_end"]
    assert end["toolName"] == name and end["isError"] is False and expected in end["result"]
    record = await ToolRecord.objects.aget(run_id=frames[0]["runId"])
    assert record.tool_name == name and record.is_error is False
    if name == "web_search":
        (reference,) = [f for f in frames if f["type"] == "reference"]
        assert reference["references"][0]["url"] == "https://example.org/" and reference["seq"]


async def test_files_fetch_and_bash_share_the_conversation_workspace(conversation, registry, tool_settings, page_url):
    calls = [
        ("write_file", {"path": "data.csv", "content": "a,b\n1,2\n"}),
        ("fetch_url", {"url": page_url}),
    ]
    frames = await run_over_socket(conversation, tool_settings, *calls)
    ends = {f["toolName"]: f for f in frames if f["type"] == "tool_end"}
    assert ends["write_file"]["isError"] is False
    assert ends["fetch_url"]["isError"] is False and "Served locally." in ends["fetch_url"]["result"]
    from django.conf import settings

    workspace = settings.AGENT_WORKSPACE_ROOT / str(conversation.pk)
    assert (workspace / "data.csv").read_text() == "a,b\n1,2\n"

    later = [("read_file", {"path": "data.csv"}), ("list_files", {})]
    if _sandbox_problem() is None:
        later.append(("bash", {"command": "wc -l < data.csv"}))
    frames = await run_over_socket(conversation, tool_settings, *later)
    ends = {f["toolName"]: f for f in frames if f["type"] == "tool_end"}
    assert ends["read_file"]["result"] == "a,b\n1,2\n"
    assert "data.csv  (8 bytes)" in ends["list_files"]["result"]
    if "bash" in ends:
        assert ends["bash"]["isError"] is False and ends["bash"]["result"] == "2\n[exit code 0]"

    from chat.conversations.workspaces import workspace_listing

    assert [row[0] for row in await sync_to_async(workspace_listing)(conversation.pk)] == ["data.csv"]


HOSTILE = [
    ("read_file", {"path": "../../../etc/passwd"}, "'..' is not allowed"),
    ("write_file", {"path": "/tmp/pwned", "content": "x"}, "absolute path"),
    ("fetch_url", {"url": "http://169.254.169.254/latest/meta-data/"}, "link-local"),
    ("fetch_url", {"url": "http://0xa9fea9fe/latest/meta-data/"}, "link-local"),  # 169.254.169.254
    ("fetch_url", {"url": "http://[::ffff:10.0.0.1]/"}, "private"),
    ("bash", {"command": "sleep 600"}, "time limit"),
]


@pytest.mark.parametrize("name, arguments, message", HOSTILE, ids=[f"{h[0]}-{i}" for i, h in enumerate(HOSTILE)])
async def test_hostile_calls_over_a_websocket_are_clear_tool_errors(
    conversation, registry, tool_settings, settings, name, arguments, message
):
    if name == "bash":
        if _sandbox_problem() is not None:
            pytest.skip("no sandbox here")
        settings.AGENT_BASH_TIMEOUT = 1
    frames = await run_over_socket(conversation, tool_settings, (name, arguments))
    (end,) = [f for f in frames if f["type"] == "tool_end"]
    assert end["isError"] is True and message in json.loads(end["result"])["error"]
