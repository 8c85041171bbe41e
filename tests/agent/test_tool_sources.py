"""Tools known only when a run starts (tool sources) and tools described by a JSON schema (SchemaTool)."""

from __future__ import annotations

import json

from chat.agent.tools import ToolError, schema_tool
from tests.fakellm import text_reply, tool_call_reply

from .helpers import check_invariants, run_events

SCHEMA = {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}


async def echo(arguments, context):
    if arguments.get("word") == "bad":
        raise ToolError("bad word")
    return f"echo: {arguments['word']}"


async def test_a_sources_tools_are_offered_and_called_with_the_schema_as_given(fake_llm, make_agent):
    calls = []

    async def source():
        calls.append(1)
        return [schema_tool("remote__echo", "Echo a word.", SCHEMA, echo, timeout=5)]

    fake_llm.script(tool_call_reply(("remote__echo", {"word": "hi"}), ("remote__echo", {"word": "bad"})),
                    text_reply("done"))  # fmt: skip
    events = await run_events(make_agent(tool_sources=[source]).stream("go"))
    check_invariants(events)
    offered = {tool["function"]["name"]: tool["function"] for tool in fake_llm.requests[0]["tools"]}
    assert offered["remote__echo"] == {"name": "remote__echo", "description": "Echo a word.", "parameters": SCHEMA}
    assert "add" in offered  # the registry's own tools stay
    good, bad = [e for e in events if e["type"] == "tool_end"]
    assert (good["result"], good["isError"]) == ("echo: hi", False)
    assert bad["isError"] is True and json.loads(bad["result"]) == {"error": "bad word"}
    assert calls == [1]  # asked once per run


async def test_schema_tool_arguments_must_be_a_json_object(fake_llm, make_agent):
    async def source():
        return [schema_tool("remote__echo", "Echo a word.", SCHEMA, echo)]

    deep = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"  # past the JSON decoder's recursion limit
    calls = (("remote__echo", "[1, 2]"), ("remote__echo", "{oops"), ("remote__echo", deep))
    fake_llm.script(tool_call_reply(*calls), text_reply("done"))
    events = await run_events(make_agent(tool_sources=[source]).stream("go"))
    ends = sorted((e for e in events if e["type"] == "tool_end"), key=lambda e: e["toolCallId"])
    not_object, not_json, too_deep = [json.loads(e["result"])["error"] for e in ends]
    assert not_object == "arguments must be a JSON object"
    assert not_json.startswith("arguments are not valid JSON")
    assert too_deep == "arguments are nested too deep"


async def test_a_failing_source_costs_only_its_tools(fake_llm, make_agent):
    async def broken():
        raise RuntimeError("source down")

    fake_llm.script(tool_call_reply(("add", {"a": 40, "b": 2})), text_reply("42"))
    events = await run_events(make_agent(tool_sources=[broken]).stream("go"))
    assert events[-1]["status"] == "succeeded"
    (end,) = [e for e in events if e["type"] == "tool_end"]
    assert end["result"] == "42" and end["isError"] is False
