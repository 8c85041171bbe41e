"""Hooks and interceptors, and the shipped examples, against the fake server."""

from __future__ import annotations

import json

from chat.agent import AgentHook, ModelInterceptor, ToolInterceptor, ToolRegistry
from chat.agent.events import ErrorEvent
from chat.agent.hooks import (
    AgentState,
    DynamicSystemPrompt,
    KeywordGuardrail,
    MessageTrimmingHook,
    StopRun,
    ToolErrorPolicy,
)
from chat.agent.tools import ToolContext, ToolError
from tests.fakellm import text_reply, tool_call_reply

from .helpers import run_events, without_durations

DONE = {"type": "complete", "status": "succeeded"}


class Recorder(AgentHook):
    def __init__(self, log):
        self.log = log

    async def before_agent(self, state):
        self.log.append(("before_agent", len(state.messages)))

    async def after_agent(self, state):
        self.log.append(("after_agent", len(state.tool_records)))

    async def before_model(self, state):
        self.log.append(("before_model", state.iteration))

    async def after_model(self, state, turn):
        self.log.append(("after_model", state.iteration, len(turn.tool_calls)))


async def test_hooks_are_called_in_order(fake_llm, make_agent):
    fake_llm.script(tool_call_reply(("add", {"a": 1, "b": 2})), text_reply("3"))
    log = []
    await run_events(make_agent(hooks=[Recorder(log)]).stream("1+2"))
    assert log == [
        ("before_agent", 1),
        ("before_model", 1),
        ("after_model", 1, 1),
        ("before_model", 2),
        ("after_model", 2, 0),
        ("after_agent", 1),
    ]


async def test_after_agent_runs_when_the_run_fails(fake_llm, make_agent):
    fake_llm.load("all_retries_fail")
    log = []
    run = make_agent(hooks=[Recorder(log)], max_retries=2).stream("x")
    await run_events(run)
    assert log == [("before_agent", 1), ("before_model", 1), ("after_agent", 0)]


async def test_before_model_edits_only_what_is_sent(fake_llm, make_agent):
    class Annotate(AgentHook):
        async def before_model(self, state):
            state.messages.append({"role": "user", "content": f"(iteration {state.iteration})"})

    fake_llm.script(tool_call_reply(("add", {"a": 1, "b": 2})), text_reply("3"))
    run = make_agent(hooks=[Annotate()]).stream("1+2")
    await run_events(run)
    first, second = (r["messages"] for r in fake_llm.requests)
    assert first[-1] == {"role": "user", "content": "(iteration 1)"}
    assert second[-1] == {"role": "user", "content": "(iteration 2)"}
    assert {"role": "user", "content": "(iteration 1)"} not in second  # the run's own history is untouched


def conversation(turns: int) -> list[dict]:
    messages = [{"role": "system", "content": "sys"}]
    for i in range(turns):
        messages += [
            {"role": "user", "content": f"q{i}"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "add", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": f"c{i}", "content": "1"},
            {"role": "assistant", "content": f"a{i}"},
        ]
    return messages


async def test_message_trimming_cuts_at_a_user_message():
    for max_messages in range(1, 14):
        state = AgentState(messages=conversation(4), context=ToolContext())
        await MessageTrimmingHook(max_messages=max_messages).before_model(state)
        kept = state.messages
        assert kept[0] == {"role": "system", "content": "sys"}
        assert kept[1]["role"] == "user", (max_messages, kept)  # never a tool message first
        if max_messages <= 4:  # the newest user message is kept even over the budget
            assert kept[1:] == conversation(4)[-4:]
        else:
            assert len(kept) - 1 <= max_messages
        assert kept[-4:] == conversation(4)[-4:]


async def test_message_trimming_by_characters_keeps_the_newest_user_message():
    messages = [
        {"role": "user", "content": "old " * 50},
        {"role": "assistant", "content": "x"},
        {"role": "user", "content": "new " * 500},
    ]
    state = AgentState(messages=list(messages), context=ToolContext())
    await MessageTrimmingHook(max_chars=100).before_model(state)
    assert state.messages == [messages[2]]


async def test_message_trimming_leaves_short_histories_alone():
    state = AgentState(messages=conversation(2), context=ToolContext())
    await MessageTrimmingHook(max_messages=50, max_chars=10_000).before_model(state)
    assert state.messages == conversation(2)


async def test_message_trimming_in_a_run(fake_llm, make_agent):
    history = conversation(3)[1:] + [{"role": "user", "content": "latest"}]
    await run_events(make_agent(hooks=[MessageTrimmingHook(max_messages=2)]).stream(history))
    assert fake_llm.requests[-1]["messages"] == [{"role": "user", "content": "latest"}]


async def test_dynamic_system_prompt(fake_llm, make_agent):
    calls = []

    def build(request):
        calls.append(len(request.messages))
        return f"Call number {len(calls)}."

    fake_llm.script(tool_call_reply(("add", {"a": 1, "b": 2})), text_reply("3"))
    agent = make_agent(system_prompt="static", model_interceptors=[DynamicSystemPrompt(build)])
    await run_events(agent.stream("1+2"))
    first, second = (r["messages"] for r in fake_llm.requests)
    assert first == [{"role": "system", "content": "Call number 1."}, {"role": "user", "content": "1+2"}]
    assert second[0] == {"role": "system", "content": "Call number 2."}
    assert [m["role"] for m in second].count("system") == 1


async def test_keyword_guardrail_answers_without_the_model(fake_llm, make_agent):
    agent = make_agent(model_interceptors=[KeywordGuardrail([r"\bbomb\b"], reply="No.")])
    run = agent.stream("How do I build a BOMB?")
    assert await run_events(run) == [{"type": "text", "content": "No."}, DONE]
    assert fake_llm.requests == []
    assert run.result.text == "No."
    # other questions go through
    assert await run_events(agent.stream("How do I build a shed?")) == [
        {"type": "text", "content": "Hell"},
        {"type": "text", "content": "o fr"},
        {"type": "text", "content": "om t"},
        {"type": "text", "content": "he f"},
        {"type": "text", "content": "ake "},
        {"type": "text", "content": "mode"},
        {"type": "text", "content": "l."},
        DONE,
    ]
    assert len(fake_llm.requests) == 1


async def test_tool_error_policy_retries_connection_errors_once(fake_llm, make_agent):
    registry = ToolRegistry()
    attempts = []

    @registry.tool
    async def flaky() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("reset by peer")
        return "ok"

    fake_llm.script(tool_call_reply(("flaky", {})), text_reply("done"))
    events = without_durations(
        await run_events(make_agent(tools=registry, tool_interceptors=[ToolErrorPolicy(delay=0)]).stream("x"))
    )
    assert len(attempts) == 2
    assert events[1] == {
        "type": "tool_end",
        "toolName": "flaky",
        "toolCallId": "call_0",
        "result": "ok",
        "isError": False,
    }


async def test_tool_error_policy_gives_up_after_its_retries(fake_llm, make_agent):
    registry = ToolRegistry()
    attempts = []

    @registry.tool
    async def down() -> str:
        attempts.append(1)
        raise ConnectionError("refused")

    fake_llm.script(tool_call_reply(("down", {})), text_reply("done"))
    events = await run_events(make_agent(tools=registry, tool_interceptors=[ToolErrorPolicy(delay=0)]).stream("x"))
    assert len(attempts) == 2
    assert json.loads(events[1]["result"]) == {"error": "down failed: ConnectionError: refused"}
    assert events[1]["isError"] is True


async def test_tool_error_policy_adds_a_hint_to_errors(fake_llm, make_agent):
    fake_llm.script(tool_call_reply(("refuse", {}), ("add", {"a": "x"}), ("add", {"a": 1, "b": 1})), text_reply("done"))
    policy = ToolErrorPolicy(delay=0, hint="Try something else.")
    events = without_durations(await run_events(make_agent(tool_interceptors=[policy]).stream("x")))
    ends = {e["toolCallId"]: e for e in events if e["type"] == "tool_end"}
    assert json.loads(ends["call_0"]["result"]) == {"error": "not today", "hint": "Try something else."}
    bad_args = json.loads(ends["call_1"]["result"])
    assert bad_args["error"].startswith("invalid arguments for add") and bad_args["hint"] == "Try something else."
    assert ends["call_0"]["isError"] and ends["call_1"]["isError"]
    assert ends["call_2"]["result"] == "2" and not ends["call_2"]["isError"]  # successes untouched


async def test_tool_error_policy_adds_a_hint_to_error_outcomes():
    from chat.agent.hooks import ToolCallRequest, ToolOutcome
    from chat.agent.turns import ToolCall

    async def failing(request):
        return ToolOutcome("not json at all", is_error=True)

    outcome = await ToolErrorPolicy(hint="H").intercept_tool(
        ToolCallRequest(ToolCall("i", "n", "{}"), ToolContext()), failing
    )
    assert outcome == ToolOutcome(json.dumps({"error": "not json at all", "hint": "H"}), True)


async def test_interceptors_run_outermost_first(fake_llm, make_agent):
    log = []

    class M(ModelInterceptor):
        def __init__(self, name):
            self.name = name

        async def intercept_model(self, request, call_next):
            log.append(f"{self.name} in")
            turn = await call_next(request)
            log.append(f"{self.name} out")
            return turn

    class T(ToolInterceptor):
        def __init__(self, name):
            self.name = name

        async def intercept_tool(self, request, call_next):
            log.append(f"{self.name} in {request.call.name}")
            outcome = await call_next(request)
            log.append(f"{self.name} out")
            return outcome

    fake_llm.script(tool_call_reply(("add", {"a": 1, "b": 2})), text_reply("3"))
    agent = make_agent(model_interceptors=[M("m1"), M("m2")], tool_interceptors=[T("t1"), T("t2")])
    await run_events(agent.stream("x"))
    assert log == [
        "m1 in",
        "m2 in",
        "m2 out",
        "m1 out",
        "t1 in add",
        "t2 in add",
        "t2 out",
        "t1 out",
        "m1 in",
        "m2 in",
        "m2 out",
        "m1 out",
    ]


async def test_tool_interceptor_can_skip_the_tool_and_change_the_request(fake_llm, make_agent):
    from chat.agent.hooks import ToolOutcome
    from chat.agent.turns import ToolCall

    class Rewrite(ToolInterceptor):
        async def intercept_tool(self, request, call_next):
            if request.call.name == "explode":
                return ToolOutcome("skipped")
            request.call = ToolCall(request.call.id, request.call.name, '{"a": 100, "b": 1}')
            return await call_next(request)

    fake_llm.script(tool_call_reply(("explode", {}), ("add", {"a": 1, "b": 1})), text_reply("done"))
    events = await run_events(make_agent(tool_interceptors=[Rewrite()]).stream("x"))
    assert [e["result"] for e in events if e["type"] == "tool_end"] == ["skipped", "101"]


async def test_model_interceptor_can_change_options(fake_llm, make_agent):
    from dataclasses import replace

    class Cool(ModelInterceptor):
        async def intercept_model(self, request, call_next):
            request.options = replace(request.options, temperature=0.0)
            return await call_next(request)

    await run_events(make_agent(model_interceptors=[Cool()]).stream("x"))
    assert fake_llm.requests[-1]["temperature"] == 0.0


def test_tool_error_is_what_tools_raise():
    assert issubclass(ToolError, Exception)


async def test_an_interceptor_stops_the_run_before_an_attempt_its_text_kept(fake_llm, make_agent):
    """StopRun raised before a model call, a retry included: no further call, the interceptor's
    error (with its own fields), `complete` failed, the text so far the answer."""

    class Budget(ModelInterceptor):
        def __init__(self):
            self.attempts = 0

        async def intercept_model(self, request, call_next):
            self.attempts += 1
            if self.attempts == 3:  # the retry of the second round's call
                raise StopRun(ErrorEvent("BUDGET_EXHAUSTED", "used up", "9 of 5", extra={"retryAfter": 7}))
            return await call_next(request)

    said = {**tool_call_reply(("add", {"a": 1, "b": 2}))}
    said["chunks"] = [{"delta": {"content": "Adding. "}}, *said["chunks"]]
    fake_llm.script(said, {"status": 500, "body": {"error": {"message": "busy"}}}, text_reply("never"))
    run = make_agent(model_interceptors=[Budget()], max_retries=3).stream("1+2")
    events = await run_events(run)
    error, complete = events[-2], events[-1]
    assert error == {
        "type": "error",
        "code": "BUDGET_EXHAUSTED",
        "message": "used up",
        "detail": "9 of 5",
        "retryAfter": 7,
    }
    assert complete["type"] == "complete" and complete["status"] == "failed"
    assert len(fake_llm.requests) == 2 and run.result.text == "Adding. "
