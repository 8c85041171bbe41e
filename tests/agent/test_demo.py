"""The offline demo model, through the real SDK and the whole loop."""

from __future__ import annotations

import re

import httpx2
import openai
import pytest

from chat.agent import Agent, ChatModel, ToolRegistry
from chat.agent.demo import DEMO_BASE_URL, HOW_TO_CONFIGURE, DemoTransport
from chat.agent.tools import make_tool
from chat.tools.calculator import calculator
from chat.tools.clock import current_time

from .helpers import run_events, without_durations


@pytest.fixture
async def demo_agent():
    client = openai.AsyncOpenAI(
        api_key="demo", base_url=DEMO_BASE_URL, http_client=httpx2.AsyncClient(transport=DemoTransport(chunk_delay=0))
    )
    tools = ToolRegistry([make_tool(calculator), make_tool(current_time)])
    yield Agent(ChatModel(client=client, model="demo"), tools=tools, retry_interval=0)
    await client.close()


def joined(events, kind):
    return "".join(e["content"] for e in events if e["type"] == kind)


async def test_arithmetic(demo_agent):
    run = demo_agent.stream("what is 6*7?")
    events = without_durations(await run_events(run))
    kinds = [e["type"] for e in events]
    assert kinds[0] == "thinking"
    tools = [e for e in events if e["type"] in ("tool_start", "tool_end")]
    assert tools == [
        {
            "type": "tool_start",
            "toolName": "calculator",
            "toolCallId": "call_demo_0",
            "arguments": '{"expression": "6*7"}',
        },
        {"type": "tool_end", "toolName": "calculator", "toolCallId": "call_demo_0", "result": "42", "isError": False},
    ]
    assert joined(events, "thinking").startswith("The user asks for arithmetic: 6*7.")
    assert "42" in joined(events, "text")
    assert "<think>" not in joined(events, "text")
    assert events[-1] == {"type": "complete", "status": "succeeded"}
    assert kinds.index("tool_end") < kinds.index("text")
    assert run.result.usage.total_tokens > 0  # the demo reports usage like a real provider


async def test_time_question_calls_current_time(demo_agent):
    events = without_durations(await run_events(demo_agent.stream("What time is it?")))
    starts = [e for e in events if e["type"] == "tool_start"]
    assert [(e["toolName"], e["arguments"]) for e in starts] == [("current_time", '{"timezone": "UTC"}')]
    (end,) = [e for e in events if e["type"] == "tool_end"]
    assert not end["isError"] and end["result"].endswith("+00:00")
    assert end["result"] in joined(events, "text")
    assert events[-1]["status"] == "succeeded"


async def test_other_questions_explain_the_demo(demo_agent):
    events = await run_events(demo_agent.stream("Write me a poem about the sea"))
    assert [e["type"] for e in events if e["type"].startswith("tool")] == []
    text = joined(events, "text")
    assert "offline demo model" in text
    assert "OPENAI_API_KEY" in text and "AGENT_MODEL" in text
    assert HOW_TO_CONFIGURE.split()[-1] in text
    assert events[-1]["status"] == "succeeded"


async def test_a_tool_error_is_reported(demo_agent):
    events = without_durations(await run_events(demo_agent.stream("what is 1/0?")))
    (end,) = [e for e in events if e["type"] == "tool_end"]
    assert end["isError"] and end["result"] == '{"error": "division by zero"}'
    assert "problem" in joined(events, "text")


async def test_demo_without_tools_still_answers():
    client = openai.AsyncOpenAI(
        api_key="demo", base_url=DEMO_BASE_URL, http_client=httpx2.AsyncClient(transport=DemoTransport(chunk_delay=0))
    )
    agent = Agent(ChatModel(client=client, model="demo"), retry_interval=0)
    events = await run_events(agent.stream("what is 6*7?"))
    assert "offline demo model" in joined(events, "text")
    await client.close()


@pytest.mark.parametrize(
    ("question", "zone", "offset"),
    [
        ("What time is it in Shanghai?", "Asia/Shanghai", "+08:00"),
        ("上海现在几点？", "Asia/Shanghai", "+08:00"),
        ("what time is it in New York?", "America/New_York", ""),
        ("What time is it?", "UTC", "+00:00"),
    ],
)
async def test_a_time_question_names_the_place_it_asks_about(demo_agent, question, zone, offset):
    events = without_durations(await run_events(demo_agent.stream(question)))
    (start,) = [e for e in events if e["type"] == "tool_start"]
    assert start["arguments"] == f'{{"timezone": "{zone}"}}'
    (end,) = [e for e in events if e["type"] == "tool_end"]
    assert not end["isError"] and end["result"].endswith(offset)


async def test_the_code_suggestion_gets_code_and_a_table(demo_agent):
    events = await run_events(
        demo_agent.stream("Write a Python function that reverses a string, with a table of examples.")
    )
    text = joined(events, "text")
    assert "```python\ndef reverse(text: str) -> str:\n    return text[::-1]" in text
    assert '| `"hello"` | `"olleh"` |' in text and HOW_TO_CONFIGURE not in text


async def test_the_fallback_hints_are_code_and_each_one_works(demo_agent):
    text = joined(await run_events(demo_agent.stream("Tell me a joke")), "text")
    hints = re.findall(r"try `([^`]+)`", text)
    assert hints == ["what is 6 * 7?", "what time is it in Tokyo?"]
    for hint in hints:
        events = await run_events(demo_agent.stream(hint))
        assert [e["type"] for e in events].count("tool_end") == 1
        assert HOW_TO_CONFIGURE not in joined(events, "text")


async def test_an_attached_file_is_read_and_described(tmp_path):
    """The demo reads the first file the attachment note names (chat.eventlog.history) and describes a CSV."""
    from chat.agent import ToolContext
    from chat.eventlog.history import attachments_note
    from chat.tools.files import read_file

    (tmp_path / "sales.csv").write_text("region,amount\nnorth,10\nsouth,32\n")
    note = attachments_note({"attachments": [{"path": "sales.csv", "size": 32}]})
    client = openai.AsyncOpenAI(
        api_key="demo", base_url=DEMO_BASE_URL, http_client=httpx2.AsyncClient(transport=DemoTransport(chunk_delay=0))
    )
    agent = Agent(ChatModel(client=client, model="demo"), tools=ToolRegistry([make_tool(read_file)]), retry_interval=0)
    context = ToolContext(conversation_id="c", user_id="u", run_id="r", workspace=tmp_path)
    events = await run_events(agent.stream("What is in it?" + note, context=context))
    await client.close()
    start = next(e for e in events if e["type"] == "tool_start")
    assert start["toolName"] == "read_file" and '"sales.csv"' in start["arguments"]
    assert "CSV with 2 columns: region, amount; 2 data rows" in joined(events, "text")


async def test_a_stopped_demo_call_counts_tokens_of_the_same_kind_as_a_complete_one():
    """The demo reports usage counted as a call cut by Stop is estimated (chat.agent.estimate):
    the same prompt counts the same, and what was cut counts less than the whole reply."""
    transport = DemoTransport(chunk_delay=0.01)  # slow enough to be stopped mid-reply
    client = openai.AsyncOpenAI(
        api_key="demo", base_url=DEMO_BASE_URL, http_client=httpx2.AsyncClient(transport=transport)
    )
    calls = []
    agent = Agent(
        ChatModel(client=client, model="demo"),
        tools=ToolRegistry([make_tool(calculator), make_tool(current_time)]),
        system_prompt="You are a helpful agent. " * 40,
        retry_interval=0,
        observers=[calls.append],
    )
    complete = agent.stream("Tell me a story")
    await run_events(complete)
    stopped = agent.stream("Tell me a story")
    seen = 0
    async for event in stopped:
        seen += event.type == "text"
        if seen == 3:
            stopped.cancel()
    await client.close()
    whole, cut = calls
    assert (whole.estimated, cut.estimated) == (False, True)
    assert cut.prompt_tokens == whole.prompt_tokens > 200  # the system prompt and tool schemas, both times
    assert 0 < cut.completion_tokens < whole.completion_tokens
    assert complete.result.usage.total_tokens == whole.total_tokens
