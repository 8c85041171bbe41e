"""Text orjson cannot carry, on the model's side: a lone surrogate in a streamed chunk, and one in
the memory sent back to the model (a tool's output). Neither may fail the call."""

from __future__ import annotations

from chat.agent import Agent, ChatModel, ToolRegistry
from tests.fakellm import text_reply, tool_call_reply

from .helpers import run_events


async def test_a_lone_surrogate_escape_in_the_stream_becomes_a_replacement_character(fake_llm, chat_model):
    # The fake server writes "\ud800" as the JSON escape a provider would send; orjson refuses it.
    fake_llm.script(text_reply("half an emoji \ud83d then more", thinking="a \udfff b", piece=6))
    events = await run_events(Agent(chat_model, retry_interval=0).stream("hi"))
    assert [e["type"] for e in events if e["type"] == "error"] == []
    assert "".join(e["content"] for e in events if e["type"] == "text") == "half an emoji \ufffd then more"
    assert "".join(e["content"] for e in events if e["type"] == "thinking") == "a \ufffd b"
    assert events[-1]["status"] == "succeeded"


async def test_a_tool_output_with_a_lone_surrogate_goes_back_to_the_model(fake_llm, client):
    tools = ToolRegistry()

    @tools.tool
    async def decode_page() -> str:
        """Returns text decoded from an odd page."""
        return b"caf\\u00e9 \\ud800 end".decode("unicode_escape")  # "café \ud800 end"

    fake_llm.script(tool_call_reply(("decode_page", {})), text_reply("done"))
    agent = Agent(ChatModel(client=client, model="fake-model"), tools=tools, retry_interval=0, max_retries=0)
    events = await run_events(agent.stream("go"))
    assert events[-1]["status"] == "succeeded", events[-3:]
    tool_message = fake_llm.requests[-1]["messages"][-1]
    assert tool_message == {"role": "tool", "tool_call_id": "call_0", "content": "café \ufffd end"}
