"""The ReAct loop end to end: exact event sequences against the fake server."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from chat.agent import Agent, ModelOptions, ToolContext, ToolRegistry
from chat.agent.events import Reference, ReferenceEvent
from chat.agent.loop import AgentRunError
from chat.agent.turns import Usage
from tests.fakellm import load_transcript, text_reply, tool_call_reply

from .helpers import check_invariants, error, run_events, without_durations

DONE = {"type": "complete", "status": "succeeded"}
FAILED = {"type": "complete", "status": "failed"}


def start(name, call_id, arguments):
    return {"type": "tool_start", "toolName": name, "toolCallId": call_id, "arguments": arguments}


def end(name, call_id, result, is_error=False):
    return {"type": "tool_end", "toolName": name, "toolCallId": call_id, "result": result, "isError": is_error}


def text(content):
    return {"type": "text", "content": content}


def retrying(detail, i, n):
    return {
        "type": "error",
        "code": "LLM_CALL_FAILED",
        "message": f"The model call failed, retrying in 0 s ({i}/{n})",
        "detail": detail,
    }


async def test_plain_answer(fake_llm, make_agent):
    fake_llm.script(text_reply("Hello there", piece=6))
    run = make_agent().stream("hi")
    assert await run_events(run) == [text("Hello "), text("there"), DONE]
    assert run.result.status == "succeeded"
    assert run.result.text == "Hello there"
    assert run.result.messages == [{"role": "assistant", "content": "Hello there"}]
    assert run.result.iterations == 1


async def test_tool_round_then_answer(fake_llm, make_agent):
    fake_llm.load("parallel_tool_calls")
    run = make_agent().stream("2+3 and 6*7?")
    events = await run_events(run)
    assert without_durations(events) == [
        start("add", "call_a", '{"a": 2, "b": 3}'),
        start("mul", "call_b", '{"a": 6, "b": 7}'),
        end("add", "call_a", "5"),
        end("mul", "call_b", "42"),
        text("2+3=5"),
        text(" and 6*7=42."),
        DONE,
    ]
    second = fake_llm.requests[1]["messages"]
    assert second[0] == {"role": "user", "content": "2+3 and 6*7?"}
    assert second[1]["role"] == "assistant" and [c["id"] for c in second[1]["tool_calls"]] == ["call_a", "call_b"]
    assert second[2:] == [
        {"role": "tool", "tool_call_id": "call_a", "content": "5"},
        {"role": "tool", "tool_call_id": "call_b", "content": "42"},
    ]
    assert [
        (r.tool_name, r.result, r.is_error) for r in sorted(run.result.tool_records, key=lambda r: r.tool_call_id)
    ] == [("add", "5", False), ("mul", "42", False)]
    assert run.result.iterations == 2
    assert run.result.messages[1:] == second[2:] + [{"role": "assistant", "content": "2+3=5 and 6*7=42."}]


@pytest.mark.parametrize(
    "transcript", ["missing_id", "resent_name", "missing_index", "stop_with_tool_calls", "arguments_resent_whole"]
)
async def test_tool_call_variants_run_the_tool(fake_llm, make_agent, transcript):
    replies = fake_llm.load(transcript)
    events = await run_events(make_agent().stream("compute"))
    starts = [e for e in events if e["type"] == "tool_start"]
    ends = [e for e in events if e["type"] == "tool_end"]
    assert starts and all(not e["isError"] for e in ends), events
    assert [e["type"] for e in events][-2:] == ["text", "complete"]
    assert events[-1] == DONE
    final = replies[-1]["chunks"][0]["delta"]["content"]
    assert events[-2] == text(final)
    # the ids the tool results go back under are the ones of the assistant message
    messages = fake_llm.requests[-1]["messages"]
    asked = [c["id"] for c in messages[1]["tool_calls"]]
    assert [m["tool_call_id"] for m in messages[2:]] == asked == [e["toolCallId"] for e in starts]


async def test_missing_id_exact_sequence(fake_llm, make_agent):
    fake_llm.load("missing_id")
    events = without_durations(await run_events(make_agent().stream("1+1?")))
    call_id = events[0]["toolCallId"]
    assert call_id.startswith("call_")
    assert events == [start("add", call_id, '{"a": 1, "b": 1}'), end("add", call_id, "2"), text("1+1=2."), DONE]


async def test_think_tags_and_reasoning_in_a_run(fake_llm, make_agent):
    fake_llm.load("split_think_tags")
    assert await run_events(make_agent().stream("2+2?")) == [
        {"type": "thinking", "content": "Let me "},
        {"type": "thinking", "content": "add."},
        text("It is"),
        text(" 4."),
        DONE,
    ]


@pytest.mark.parametrize(
    ("transcript", "detail"),
    [
        ("http_500_then_success", "The model endpoint failed with a server error (HTTP 500)."),
        ("http_429_then_success", "The model endpoint is limiting requests (HTTP 429)."),
    ],
)
async def test_http_error_then_success(fake_llm, make_agent, transcript, detail):
    fake_llm.load(transcript)
    run = make_agent().stream("hi")
    events = await run_events(run)
    assert events == [retrying(detail, 1, 3), text("Recovered."), DONE]
    assert events[0]["message"].endswith("(1/3)")
    assert run.result.status == "succeeded" and run.result.text == "Recovered."
    assert len(fake_llm.requests) == 2


async def test_all_retries_fail(fake_llm, make_agent):
    fake_llm.load("all_retries_fail")
    run = make_agent(max_retries=2).stream("hi")
    detail = "The model endpoint failed with a server error (HTTP 503)."
    assert await run_events(run) == [
        retrying(detail, 1, 2),
        retrying(detail, 2, 2),
        {
            "type": "error",
            "code": "LLM_CALL_FAILED",
            "message": "The model call failed; gave up after 2 retries.",
            "detail": detail,
        },
        FAILED,
    ]
    assert len(fake_llm.requests) == 3
    assert run.result.status == "failed"
    assert run.result.error.code == "LLM_CALL_FAILED"


async def test_truncated_stream_is_retried_and_the_partial_text_is_not_the_answer(fake_llm, make_agent):
    fake_llm.load("truncated_stream")
    fake_llm.script(text_reply("Whole answer.", piece=20))
    run = make_agent().stream("hi")
    events = await run_events(run)
    assert [e["type"] for e in events] == ["text", "text", "error", "text", "complete"]
    assert events[:2] == [text("Half an "), text("answer")]
    assert events[2]["code"] == "LLM_CALL_FAILED" and events[2]["message"].endswith("(1/3)")
    assert events[3:] == [text("Whole answer."), DONE]
    assert run.result.text == "Whole answer."
    assert run.result.messages == [{"role": "assistant", "content": "Whole answer."}]


async def test_midstream_error_is_retried(fake_llm, make_agent):
    fake_llm.load("midstream_error")
    fake_llm.script(text_reply("Fine.", piece=10))
    run = make_agent().stream("hi")
    events = await run_events(run)
    assert events == [text("Start"), retrying("error in the stream: overloaded", 1, 3), text("Fine."), DONE]
    assert run.result.text == "Fine."


async def test_max_iterations(fake_llm, make_agent):
    loop_round = load_transcript("endless_tool_calls")[0]
    fake_llm.responder = lambda body: loop_round
    run = make_agent(max_iterations=3).stream("never stop")
    events = without_durations(await run_events(run))
    assert events == [
        start("add", "call_loop", '{"a": 1, "b": 1}'),
        end("add", "call_loop", "2"),
    ] * 3 + [
        {
            "type": "error",
            "code": "MAX_ITERATIONS",
            "message": "Stopped after 3 model calls without a final answer.",
            "detail": "AGENT_MAX_ITERATIONS=3",
        },
        FAILED,
    ]
    assert len(fake_llm.requests) == 3
    assert run.result.iterations == 3


async def test_tool_that_raises(fake_llm, make_agent):
    fake_llm.load("tool_raises")
    run = make_agent().stream("explode")
    events = without_durations(await run_events(run))
    failure = error("explode failed: RuntimeError: kaboom")
    assert events == [
        start("explode", "call_e", "{}"),
        end("explode", "call_e", failure, True),
        text("The tool failed."),
        DONE,
    ]
    assert fake_llm.requests[-1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_e", "content": failure}
    assert run.result.tool_records[0].is_error


async def test_tool_error_message_goes_to_the_model(fake_llm, make_agent):
    fake_llm.script(tool_call_reply(("refuse", {})), text_reply("ok"))
    events = without_durations(await run_events(make_agent().stream("x")))
    assert events[:2] == [start("refuse", "call_0", "{}"), end("refuse", "call_0", error("not today"), True)]


async def test_bad_json_arguments(fake_llm, make_agent):
    fake_llm.load("bad_json_arguments")
    events = without_durations(await run_events(make_agent().stream("x")))
    assert events == [
        start("add", "call_j", '{"a": 1, "b": '),
        end("add", "call_j", error("arguments are not valid JSON: Expecting value at position 14"), True),
        text("Sorry."),
        DONE,
    ]


async def test_arguments_not_fitting_the_schema(fake_llm, make_agent):
    fake_llm.load("schema_mismatch_arguments")
    events = without_durations(await run_events(make_agent().stream("x")))
    assert events[0] == start("add", "call_m", '{"a": "one", "b": 2, "c": 3}')
    assert events[1]["isError"] is True
    message = json.loads(events[1]["result"])["error"]
    assert message.startswith("invalid arguments for add: ")
    assert "a: Input should be a valid integer" in message
    assert "c: Extra inputs are not permitted" in message
    assert events[2:] == [text("Sorry."), DONE]


async def test_unknown_tool(fake_llm, make_agent):
    fake_llm.load("unknown_tool")
    events = without_durations(await run_events(make_agent().stream("x")))
    assert events == [
        start("teleport", "call_n", '{"to": "Mars"}'),
        end("teleport", "call_n", error("unknown tool 'teleport'; available tools: add, mul, explode, refuse"), True),
        text("I cannot teleport."),
        DONE,
    ]


async def test_parallel_tool_calls_run_concurrently(fake_llm, make_agent):
    registry = ToolRegistry()

    @registry.tool
    async def slow_a() -> str:
        await asyncio.sleep(0.3)
        return "a"

    @registry.tool
    async def slow_b() -> str:
        await asyncio.sleep(0.3)
        return "b"

    fake_llm.script(tool_call_reply(("slow_a", {}), ("slow_b", {})), text_reply("done"))
    began = time.monotonic()
    events = await run_events(make_agent(tools=registry).stream("x"))
    assert time.monotonic() - began < 0.55
    assert [e["type"] for e in events[:2]] == ["tool_start", "tool_start"]
    assert all(e["durationMs"] >= 290 for e in events if e["type"] == "tool_end")


async def test_tool_results_go_back_in_call_order(fake_llm, make_agent):
    registry = ToolRegistry()

    @registry.tool
    async def wait(seconds: float, label: str) -> str:
        await asyncio.sleep(seconds)
        return label

    fake_llm.script(
        tool_call_reply(("wait", {"seconds": 0.2, "label": "first"}), ("wait", {"seconds": 0.01, "label": "second"})),
        text_reply("done"),
    )
    events = await run_events(make_agent(tools=registry).stream("x"))
    assert [e["result"] for e in events if e["type"] == "tool_end"] == ["second", "first"]  # finished first
    assert fake_llm.requests[-1]["messages"][-2:] == [
        {"role": "tool", "tool_call_id": "call_0", "content": "first"},
        {"role": "tool", "tool_call_id": "call_1", "content": "second"},
    ]


async def test_tool_concurrency_limit(fake_llm, make_agent):
    registry = ToolRegistry()
    running, peak = 0, 0

    @registry.tool
    async def busy() -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05)
        running -= 1
        return "ok"

    fake_llm.script(tool_call_reply(*[("busy", {})] * 5), text_reply("done"))
    await run_events(make_agent(tools=registry, tool_concurrency=2).stream("x"))
    assert peak == 2


async def test_per_tool_timeout(fake_llm, make_agent):
    registry = ToolRegistry()

    @registry.tool(timeout=0.1)
    async def sleepy() -> str:
        await asyncio.sleep(5)
        return "never"

    @registry.tool
    async def sleepy_default() -> str:
        await asyncio.sleep(5)
        return "never"

    fake_llm.script(tool_call_reply(("sleepy", {}), ("sleepy_default", {})), text_reply("done"))
    began = time.monotonic()
    events = without_durations(await run_events(make_agent(tools=registry, tool_timeout=0.2).stream("x")))
    assert time.monotonic() - began < 1
    ends = {e["toolName"]: e for e in events if e["type"] == "tool_end"}
    assert ends["sleepy"] == end("sleepy", "call_0", error("sleepy timed out after 0.1 s"), True)
    assert ends["sleepy_default"] == end(
        "sleepy_default", "call_1", error("sleepy_default timed out after 0.2 s"), True
    )
    assert events[-1] == DONE


async def test_max_tool_calls(fake_llm, make_agent):
    fake_llm.script(
        tool_call_reply(("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2}), ("add", {"a": 3, "b": 3})),
        text_reply("done"),
    )
    events = without_durations(await run_events(make_agent(max_tool_calls=2).stream("x")))
    ends = [e for e in events if e["type"] == "tool_end"]
    assert sorted((e["toolCallId"], e["result"], e["isError"]) for e in ends) == [
        ("call_0", "2", False),
        ("call_1", "4", False),
        ("call_2", error("tool-call limit reached (2 per run); answer with what you have"), True),
    ]
    assert events[-1] == DONE


async def test_tool_result_truncation(fake_llm, make_agent):
    registry = ToolRegistry()

    @registry.tool
    async def big() -> str:
        return "x" * 25

    fake_llm.script(tool_call_reply(("big", {})), text_reply("done"))
    events = await run_events(make_agent(tools=registry, max_tool_result_chars=10).stream("x"))
    expected = "x" * 10 + "\n[... truncated: 15 more characters]"
    assert [e["result"] for e in events if e["type"] == "tool_end"] == [expected]
    assert fake_llm.requests[-1]["messages"][-1]["content"] == expected


async def test_non_string_tool_results_are_json(fake_llm, make_agent):
    registry = ToolRegistry()

    @registry.tool
    async def info() -> dict:
        return {"name": "Zoë", "n": 1}

    fake_llm.script(tool_call_reply(("info", {})), text_reply("done"))
    events = await run_events(make_agent(tools=registry).stream("x"))
    assert [e["result"] for e in events if e["type"] == "tool_end"] == ['{"name": "Zoë", "n": 1}']


async def test_cancel_mid_stream_closes_the_connection(fake_llm, make_agent):
    fake_llm.load("slow_stream")
    run = make_agent().stream("talk")
    events = []
    async for event in run:
        events.append(event.to_dict())
        if len(events) == 3:
            run.cancel()
    check_invariants(events)
    assert events == [
        text("word0 "),
        text("word1 "),
        text("word2 "),
        {"type": "error", "code": "CANCELLED", "message": "The run was cancelled.", "detail": ""},
        {"type": "complete", "status": "cancelled"},
    ]
    assert run.result.status == "cancelled"
    for _ in range(100):  # the server notices at its next write
        if fake_llm.stream_endings:
            break
        await asyncio.sleep(0.02)
    assert fake_llm.stream_endings == ["aborted"]
    assert len(fake_llm.requests) == 1


async def test_cancel_mid_tool(fake_llm, make_agent):
    registry = ToolRegistry()
    started = asyncio.Event()
    finished = []

    @registry.tool
    async def forever() -> str:
        started.set()
        try:
            await asyncio.sleep(30)
        finally:
            finished.append("cleaned up")
        return "never"

    @registry.tool
    async def quick() -> str:
        return "quick"

    fake_llm.script(tool_call_reply(("forever", {}), ("quick", {}), ("forever", {})))
    run = make_agent(tools=registry).stream("x")
    events = []
    async for event in run:
        events.append(event.to_dict())
        if event.to_dict()["type"] == "tool_end":
            await asyncio.wait_for(started.wait(), 2)
            run.cancel()
    check_invariants(events)
    events = without_durations(events)
    cancelled = error("cancelled: the run was stopped before the tool finished")
    assert events == [
        start("forever", "call_0", "{}"),
        start("quick", "call_1", "{}"),
        start("forever", "call_2", "{}"),
        end("quick", "call_1", "quick"),
        end("forever", "call_0", cancelled, True),
        end("forever", "call_2", cancelled, True),
        {"type": "error", "code": "CANCELLED", "message": "The run was cancelled.", "detail": ""},
        {"type": "complete", "status": "cancelled"},
    ]
    assert finished == ["cleaned up", "cleaned up"]
    assert len(fake_llm.requests) == 1


async def test_cancel_as_interrupted(fake_llm, make_agent):
    fake_llm.load("slow_stream")
    run = make_agent().stream("talk")
    events = []
    async for event in run:
        events.append(event.to_dict())
        if len(events) == 1:
            run.cancel(status="interrupted", code="INTERRUPTED", message="The server stopped.")
    check_invariants(events)
    assert events[-2:] == [
        {"type": "error", "code": "INTERRUPTED", "message": "The server stopped.", "detail": ""},
        {"type": "complete", "status": "interrupted"},
    ]
    assert run.result.status == "interrupted"


async def test_cancel_before_the_run_starts(fake_llm, make_agent):
    run = make_agent().stream("hi")
    run.cancel()
    events = await asyncio.wait_for(run_events(run), 2)
    assert events == [
        {"type": "error", "code": "CANCELLED", "message": "The run was cancelled.", "detail": ""},
        {"type": "complete", "status": "cancelled"},
    ]
    assert fake_llm.requests == []


async def test_cancel_after_the_end_changes_nothing(fake_llm, make_agent):
    run = make_agent().stream("hi")
    events = await run_events(run)
    run.cancel()
    assert [e async for e in run] == []  # ended for good
    assert events[-1] == DONE and run.result.status == "succeeded"


async def test_aclose_stops_a_run(fake_llm, make_agent):
    fake_llm.load("slow_stream")
    run = make_agent().stream("talk")
    first = await asyncio.wait_for(anext(run), 2)  # anext() alone starts the run
    await run.aclose()
    rest = [e.to_dict() async for e in run]
    check_invariants(rest)
    assert rest[-1] == {"type": "complete", "status": "cancelled"}
    assert first.to_dict() == text("word0 ")


async def test_invoke_and_call(fake_llm, make_agent):
    agent = make_agent()
    fake_llm.script(text_reply("Answer one."))
    result = await agent.invoke("q")
    assert (result.status, result.text) == ("succeeded", "Answer one.")
    fake_llm.script(text_reply("Answer two."))
    assert await agent.call([{"role": "user", "content": "q2"}]) == "Answer two."
    assert fake_llm.requests[-1]["messages"] == [{"role": "user", "content": "q2"}]


async def test_call_raises_when_the_run_fails(fake_llm, make_agent):
    fake_llm.load("all_retries_fail")
    with pytest.raises(AgentRunError, match="agent run failed: The model call failed; gave up after 2 retries.") as exc:
        await make_agent(max_retries=2).call("q")
    assert exc.value.result.status == "failed"


async def test_system_prompt_and_model_options_reach_the_model(fake_llm, chat_model):
    chat_model.options = ModelOptions(temperature=0.2, top_p=0.5)
    agent = Agent(chat_model, system_prompt="Be brief.", retry_interval=0)
    await agent.invoke("q")
    body = fake_llm.requests[-1]
    assert body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "q"}]
    assert (body["temperature"], body["top_p"]) == (0.2, 0.5)
    assert "tools" not in body  # an agent without tools offers none
    # a history that brings its own system message keeps it
    await agent.invoke([{"role": "system", "content": "Own."}, {"role": "user", "content": "q"}])
    assert fake_llm.requests[-1]["messages"][0] == {"role": "system", "content": "Own."}


async def test_instructions_follow_the_system_prompt_never_replace_it(fake_llm, chat_model):
    agent = Agent(chat_model, system_prompt="Be brief.", instructions="Answer in French.", retry_interval=0)
    await agent.invoke("q")
    assert fake_llm.requests[-1]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "q"},
    ]
    bare = Agent(chat_model, instructions="Answer in French.", retry_interval=0)
    await bare.invoke("q")
    assert fake_llm.requests[-1]["messages"][0] == {"role": "system", "content": "Answer in French."}


async def test_usage_summed_over_rounds(fake_llm, make_agent):
    fake_llm.load("usage_two_rounds")
    run = make_agent().stream("1+2")
    await run_events(run)
    assert run.result.usage == Usage(30, 7, 37)


async def test_tool_context_emit_reference(fake_llm, make_agent):
    registry = ToolRegistry()
    seen = {}

    @registry.tool
    async def search(query: str, ctx: ToolContext) -> str:
        seen["conversation"] = ctx.conversation_id
        await ctx.emit(ReferenceEvent((Reference("Doc", "https://example.com/doc", "a snippet"),)))
        return "found"

    fake_llm.script(tool_call_reply(("search", {"query": "django"})), text_reply("done"))
    context = ToolContext(conversation_id="conv-1")
    events = without_durations(await run_events(make_agent(tools=registry).stream("x", context=context)))
    assert events == [
        start("search", "call_0", '{"query": "django"}'),
        {
            "type": "reference",
            "references": [{"title": "Doc", "url": "https://example.com/doc", "snippet": "a snippet"}],
        },
        end("search", "call_0", "found"),
        text("done"),
        DONE,
    ]
    assert seen == {"conversation": "conv-1"}
    assert "ctx" not in json.dumps(fake_llm.requests[0]["tools"])


async def test_a_failing_hook_still_closes_the_run(fake_llm, make_agent):
    from chat.agent import AgentHook

    class Broken(AgentHook):
        async def before_model(self, state):
            raise KeyError("oops")

    run = make_agent(hooks=[Broken()]).stream("x")
    events = await run_events(run)
    assert events == [
        {"type": "error", "code": "AGENT_ERROR", "message": "The agent failed.", "detail": "KeyError: 'oops'"},
        FAILED,
    ]


@pytest.mark.parametrize(
    "events",
    [
        [],
        [{"type": "complete", "status": "succeeded"}, {"type": "text", "content": "late"}],
        [{"type": "complete", "status": "succeeded"}, {"type": "complete", "status": "succeeded"}],
        [start("add", "c1", "{}"), DONE],
        [end("add", "c1", "1") | {"durationMs": 1}, DONE],
        [
            start("add", "c1", "{}"),
            end("add", "c1", "1") | {"durationMs": 1},
            end("add", "c1", "1") | {"durationMs": 1},
            DONE,
        ],
        [start("add", "c1", "{}"), start("add", "c1", "{}"), end("add", "c1", "1") | {"durationMs": 1}, DONE],
    ],
)
def test_the_invariant_checker_catches_violations(events):
    with pytest.raises(AssertionError):
        check_invariants(events)


async def test_after_agent_hook_runs_when_cancelled(fake_llm, make_agent):
    from chat.agent import AgentHook

    log = []

    class Last(AgentHook):
        async def after_agent(self, state):
            log.append("after_agent")

    fake_llm.load("slow_stream")
    run = make_agent(hooks=[Last()]).stream("talk")
    async for event in run:
        if event.type == "text":
            run.cancel()
    assert log == ["after_agent"]
    assert run.result.status == "cancelled"
