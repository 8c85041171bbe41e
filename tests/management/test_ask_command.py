"""`manage.py ask`: one run printed in the terminal."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from chat.runtime import build as assistant
from tests.fakellm import text_reply, tool_call_reply


@pytest.fixture
def demo_settings(settings, tmp_path):
    settings.AGENT_MODEL = "demo"
    settings.AGENT_DEMO_CHUNK_DELAY = 0
    settings.AGENT_TOOLS = ["calculator", "current_time"]
    settings.AGENT_WORKSPACE_ROOT = tmp_path
    assistant._client.cache_clear()
    yield settings
    assistant._client.cache_clear()


def ask(*args) -> str:
    out = io.StringIO()
    call_command("ask", *args, stdout=out)
    return out.getvalue()


def test_ask_the_demo_model(demo_settings):
    output = ask("what is 6*7?")
    lines = output.splitlines()
    assert lines[0].startswith("[thinking] The user asks for arithmetic: 6*7.")
    assert '[tool] calculator({"expression": "6*7"}) ...' in lines
    assert any(line.startswith("[tool] calculator done in ") and line.endswith(": 42") for line in lines)
    answer = [line for line in lines if line.startswith("[answer] ")]
    assert len(answer) == 1 and "42" in answer[0]
    assert lines[-1] == "[complete] succeeded"


def test_ask_as_json_lines(demo_settings):
    # succeeded: no SystemExit (the status used to be read only in the text output)
    events = [json.loads(line) for line in ask("what is 6*7?", "--json").splitlines()]
    assert events[-1] == {"type": "complete", "status": "succeeded"}
    assert [e["toolName"] for e in events if e["type"] == "tool_start"] == ["calculator"]
    assert [e["result"] for e in events if e["type"] == "tool_end"] == ["42"]
    assert "42" in "".join(e["content"] for e in events if e["type"] == "text")


def test_ask_a_failing_model_exits_non_zero(llm_settings, settings, tmp_path):
    settings.AGENT_TOOLS = ["calculator"]
    settings.AGENT_MAX_RETRIES = 1
    settings.AGENT_WORKSPACE_ROOT = tmp_path
    llm_settings.script(*[{"status": 500, "body": {"error": {"message": "down"}}}] * 2)
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("ask", "hi", stdout=out)
    assert exit_.value.code == 1
    lines = out.getvalue().splitlines()
    assert (
        "[error LLM_CALL_FAILED] The model call failed, retrying in 0 s (1/1)"
        " - The model endpoint failed with a server error (HTTP 500)." in lines
    )
    assert lines[-1] == "[complete] failed"


def test_ask_prints_a_failed_tool(llm_settings, settings, tmp_path):
    settings.AGENT_TOOLS = ["calculator"]
    settings.AGENT_WORKSPACE_ROOT = tmp_path
    llm_settings.script(tool_call_reply(("calculator", {"expression": "1/0"})), text_reply("Cannot divide by zero."))
    lines = ask("1/0?").splitlines()
    (failed,) = [line for line in lines if line.startswith("[tool] calculator failed in ")]
    assert '{"error": "division by zero", "hint": ' in failed  # the ToolErrorPolicy of build_agent
    assert "[answer] Cannot divide by zero." in lines
    # the real settings reached the fake server
    body = llm_settings.requests[0]
    assert body["model"] == "fake-model"
    assert [t["function"]["name"] for t in body["tools"]] == ["calculator"]
