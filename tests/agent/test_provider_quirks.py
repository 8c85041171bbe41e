"""Providers' streaming quirks through whole runs: the tools run, the answer and thinking come out right.

The transcripts (tests/transcripts/) reproduce shapes reported for servers the
shared provider corpus has no recording of; the ChatModel-level details are in
test_llm.py.
"""

from __future__ import annotations

import json

import pytest

from .helpers import run_events, without_durations


def deltas(events, kind):
    return "".join(e["content"] for e in events if e["type"] == kind)


@pytest.mark.parametrize(
    ("transcript", "calls", "answer"),
    [
        (
            "parallel_same_index",
            [("call_o1", "add", {"a": 2, "b": 3}, "5"), ("call_o2", "mul", {"a": 6, "b": 7}, "42")],
            "5 and 42.",
        ),
        (
            "parallel_same_index_pieces",
            [("call_d1", "add", {"a": 2, "b": 3}, "5"), ("call_d2", "mul", {"a": 6, "b": 7}, "42")],
            "5 and 42.",
        ),
        (
            "sglang_tool_index",
            [("call_s1", "mul", {"a": 6, "b": 7}, "42"), ("call_s2", "add", {"a": 2, "b": 3}, "5")],
            "42 and 5.",
        ),
        ("vllm_reasoning_tool_call", [("chatcmpl-tool-9a1", "mul", {"a": 6, "b": 7}, "42")], "6*7=42."),
        ("ollama_think_tags", [("call_q1", "add", {"a": 40, "b": 2}, "42")], "The sum is 42."),
    ],
)
async def test_tool_calls_run_each_as_its_own_call(fake_llm, make_agent, transcript, calls, answer):
    fake_llm.load(transcript)
    run = make_agent().stream("compute")
    events = without_durations(await run_events(run))
    starts = [(e["toolCallId"], e["toolName"], json.loads(e["arguments"])) for e in events if e["type"] == "tool_start"]
    assert starts == [call[:3] for call in calls]
    ends = {e["toolCallId"]: (e["result"], e["isError"]) for e in events if e["type"] == "tool_end"}
    assert ends == {call_id: (result, False) for call_id, _, _, result in calls}
    assert run.result.status == "succeeded" and run.result.text == answer
    # The model is told of each call under its own id, and gets each result under it.
    messages = fake_llm.requests[-1]["messages"]
    assert [c["id"] for c in messages[1]["tool_calls"]] == [call[0] for call in calls]
    assert [m["tool_call_id"] for m in messages[2:]] == [call[0] for call in calls]


async def test_thinking_of_tagged_and_parsed_reasoning_reaches_the_run(fake_llm, make_agent):
    fake_llm.load("ollama_think_tags")
    events = await run_events(make_agent().stream("40+2?"))
    assert deltas(events, "thinking") == "I should add them.\n"
    fake_llm.load("vllm_reasoning_tool_call")
    events = await run_events(make_agent().stream("6*7?"))
    assert deltas(events, "thinking") == "The user wants 6 times 7."


async def test_refusal_is_shown_as_the_answer(fake_llm, make_agent):
    fake_llm.load("refusal")
    run = make_agent().stream("something forbidden")
    events = await run_events(run)
    assert [e["type"] for e in events] == ["text", "text", "complete"]
    assert run.result.status == "succeeded"
    assert run.result.text == "I'm sorry, I can't help with that."
    assert run.result.messages == [{"role": "assistant", "content": "I'm sorry, I can't help with that."}]


async def test_list_content_never_reaches_an_event(fake_llm, make_agent):
    fake_llm.load("content_parts")
    run = make_agent().stream("17*23?")
    events = await run_events(run)
    assert all(isinstance(e["content"], str) for e in events if e["type"] in ("text", "thinking"))
    assert run.result.status == "succeeded" and run.result.text == "It is 391"
    assert deltas(events, "thinking") == "Seventeen times 23 is 391. Done."
    assert len(fake_llm.requests) == 1  # no failed attempt, no retry


async def test_done_without_finish_reason_answers_at_once(fake_llm, make_agent):
    fake_llm.load("reasoning_details")
    run = make_agent().stream("15*27?")
    events = await run_events(run)
    assert [e["type"] for e in events if e["type"] != "thinking"] == ["text", "complete"]
    assert deltas(events, "thinking") == "15 * 27 = 405"
    assert run.result.status == "succeeded" and run.result.text == "405"
    assert len(fake_llm.requests) == 1
