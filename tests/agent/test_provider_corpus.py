"""Every recorded provider stream of the shared corpus, replayed through the agent.

The corpus (`../shared/provider-corpus`, see its README) holds real streaming
bodies from many providers and inference servers, each with the outcome a
correct client reaches. Each body is served byte for byte by the fake server
to the real `openai` SDK over real HTTP; the run's status, answer, thinking and
tool calls must be the expected ones. The files are read where they are, never
copied into the project; a missing corpus is a failure, not a skip.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pydantic
import pytest

from chat.agent import Agent, ToolRegistry
from chat.agent.tools import Tool
from tests.fakellm import text_reply

from .helpers import run_events

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("AGENTSITE_PROVIDER_CORPUS") or ROOT.parent / "shared" / "provider-corpus")


def _corpus_files() -> list[Any]:
    files = sorted(CORPUS.glob("*.sse"))
    # No corpus: one case that fails and says where it looked.
    return [pytest.param(path, id=path.stem) for path in files] or [pytest.param(None, id="corpus-missing")]


def _expected(path: Path) -> tuple[dict[str, Any], str]:
    index = json.loads((CORPUS / "INDEX.json").read_text())
    entries = {entry["file"]: entry["expected"] for entry in index["entries"]}
    assert path.name in entries, f"{path.name} has no entry in INDEX.json"
    return entries[path.name], index["followup_text"]


def _collapsed(text: str | None) -> str | None:
    """Runs of whitespace as one space, as the corpus compares text and thinking."""
    return None if text is None else re.sub(r"\s+", " ", text).strip()


def _accepting_tool(name: str) -> Tool:
    """A tool of that name taking any arguments and answering "ok": the corpus calls tools of its own."""
    arguments = pydantic.create_model(f"{name}_arguments", __config__=pydantic.ConfigDict(extra="allow"))

    async def answer() -> str:
        return "ok"

    return Tool(name, f"the corpus tool {name}", answer, arguments, None, None)


@pytest.mark.parametrize("path", _corpus_files())
async def test_provider_stream(fake_llm, chat_model, path):
    assert path is not None, (
        f"the provider corpus is missing: no *.sse file in {CORPUS} "
        "(set AGENTSITE_PROVIDER_CORPUS to the folder that holds it)"
    )
    expected, followup = _expected(path)
    body = path.read_bytes()

    def respond(request: dict[str, Any]):
        # The request that carries the tool results gets the corpus' follow-up answer.
        return text_reply(followup) if request["messages"][-1]["role"] == "tool" else {"sse": body}

    fake_llm.responder = respond
    tools = ToolRegistry(_accepting_tool(name) for name in dict.fromkeys(c["name"] for c in expected["tool_calls"]))
    # No retries: a stream must give its outcome the first time, and a failing one fails once.
    run = Agent(chat_model, tools=tools, max_retries=0, retry_interval=0).stream("hello")
    events = await run_events(run)

    deltas = [e for e in events if e["type"] in ("text", "thinking")]
    assert all(isinstance(e["content"], str) and e["content"] for e in deltas), deltas
    assert run.result.status == expected["status"], events[-3:]
    errors = [e for e in events if e["type"] == "error"]
    if expected["status"] == "succeeded":
        assert errors == []
        assert _collapsed(run.result.text) == _collapsed(expected["text"])
    else:
        (error,) = errors
        assert expected["error"] in error["detail"]
    thinking = "".join(e["content"] for e in events if e["type"] == "thinking")
    assert _collapsed(thinking) == _collapsed(expected["thinking"])

    starts = [e for e in events if e["type"] == "tool_start"]
    assert [(e["toolName"], json.loads(e["arguments"]), e["toolCallId"]) for e in starts] == [
        (call["name"], call["arguments"], call["id"]) for call in expected["tool_calls"]
    ]
    ends = [e for e in events if e["type"] == "tool_end"]
    assert [(e["result"], e["isError"]) for e in ends] == [("ok", False)] * len(starts)
    assert len(fake_llm.requests) == (2 if starts else 1)
