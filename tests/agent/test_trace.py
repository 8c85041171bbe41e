"""ModelCallRecord: the agent core tells its observers about every model call attempt."""

from __future__ import annotations

import time

from chat.agent import ModelCallRecord
from tests.fakellm import text_reply, tool_call_reply

from .helpers import run_events


def usage(reply: dict, prompt: int, completion: int) -> dict:
    return {
        **reply,
        "chunks": [*reply["chunks"], {"usage": {"prompt_tokens": prompt, "completion_tokens": completion}}],
    }


async def test_every_attempt_is_observed_failed_ones_included(fake_llm, make_agent):
    fake_llm.script(
        {"status": 503, "body": {"error": {"message": "busy"}}},
        usage(tool_call_reply(("add", {"a": 1, "b": 2})), 7, 3),
        {"chunks": [{"delta": {"content": "par"}}], "truncate_after": 1},  # cut mid-answer
        usage(text_reply("It is 3."), 12, 4),
    )
    records: list[ModelCallRecord] = []
    before = time.time()
    events = await run_events(make_agent(observers=[records.append]).stream("1+2?"))
    assert events[-1] == {"type": "complete", "status": "succeeded"}
    assert [(r.iteration, r.attempt) for r in records] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    failed, tools, cut, answer = records
    assert "503" in failed.error and failed.finish_reason == "" and failed.first_token_ms is None
    assert tools.finish_reason == "tool_calls" and tools.error == ""
    assert (tools.prompt_tokens, tools.completion_tokens) == (7, 3)
    assert "was lost" in cut.error and cut.first_token_ms is not None  # it streamed "par" first
    assert answer.finish_reason == "stop" and (answer.prompt_tokens, answer.completion_tokens) == (12, 4)
    for record in records:
        assert before <= record.started_at <= time.time()
        assert record.first_token_ms is None or record.first_token_ms <= record.duration_ms
        assert record.messages is None  # not asked for
    assert answer.message_count == failed.message_count + 2  # the assistant's tool call and its result


async def test_request_messages_are_kept_only_when_asked(fake_llm, make_agent):
    records: list[ModelCallRecord] = []
    await run_events(make_agent(observers=[records.append], trace_requests=True).stream("hello"))
    (record,) = records
    assert record.messages == [{"role": "user", "content": "hello"}] and record.message_count == 1


async def test_an_observer_that_raises_does_not_harm_the_run(fake_llm, make_agent):
    def broken(record: ModelCallRecord) -> None:
        raise RuntimeError("observer bug")

    seen: list[ModelCallRecord] = []
    events = await run_events(make_agent(observers=[broken, seen.append]).stream("hi"))
    assert events[-1]["status"] == "succeeded" and len(seen) == 1
