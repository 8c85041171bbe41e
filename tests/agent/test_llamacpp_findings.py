"""What a real model server showed (issue 23: llama-cpp-python 0.3.36's server), against the fake one.

Each test stands for one finding: the product's own aiohttp client (as chat.runtime.build makes it)
over real HTTP; the realmodel group (tests/realmodel/) runs the same through the real server.
"""

from __future__ import annotations

import logging
import socket

import openai
import pytest

from chat.agent import Agent, ChatModel, ModelOptions
from chat.agent.llm import ModelCallError
from chat.agent.trace import ModelCallRecord
from chat.agent.turns import ModelRequest, ModelTurn
from tests.fakellm import TRANSCRIPTS, text_reply, tool_call_reply

from .helpers import run_events, sample_tools
from .test_provider_corpus import CORPUS

CORPUS_LENGTH = "llamacpppython-smollm2-text-length.sse"


@pytest.fixture
async def aio_client(fake_llm):
    client = openai.AsyncOpenAI(
        base_url=fake_llm.base_url, api_key="x", max_retries=0, http_client=openai.DefaultAioHttpClient()
    )
    yield client
    await client.close()


def agent_of(client, *, options: ModelOptions | None = None, observers=(), **kwargs) -> Agent:
    model = ChatModel(client=client, model="fake-model", options=options)
    return Agent(model, tools=sample_tools(), retry_interval=0, observers=list(observers), **kwargs)


async def turn_of(model: ChatModel) -> ModelTurn:
    items = [item async for item in model.stream(ModelRequest(messages=[{"role": "user", "content": "hi"}]))]
    assert isinstance(items[-1], ModelTurn)
    return items[-1]


async def failure_of(model: ChatModel) -> ModelCallError:
    with pytest.raises(ModelCallError) as failure:
        await turn_of(model)
    return failure.value


# -- 1. a tool round, then the next call ------------------------------------------------------


async def test_the_call_after_a_tool_round_sends_an_empty_string_content(fake_llm, aio_client):
    fake_llm.reject_null_content = True  # as llama-cpp-python: HTTP 500 for content null
    fake_llm.script(tool_call_reply(("add", {"a": 2, "b": 3})), text_reply("It is 5."))
    events = await run_events(agent_of(aio_client).stream("add 2 and 3"))
    assert events[-1] == {"type": "complete", "status": "succeeded"}
    assert not [e for e in events if e["type"] == "error"]
    assistant = [m for m in fake_llm.requests[-1]["messages"] if m["role"] == "assistant"]
    assert assistant == [{"role": "assistant", "content": "", "tool_calls": assistant[0]["tool_calls"]}]


async def test_a_memory_with_a_null_content_tool_round_is_sent_as_empty_string(fake_llm, aio_client):
    fake_llm.reject_null_content = True
    call = {"id": "call_0", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 1}'}}
    memory = [
        {"role": "user", "content": "add"},
        {"role": "assistant", "content": None, "tool_calls": [call]},  # as chat.eventlog.history rebuilds a round
        {"role": "tool", "tool_call_id": "call_0", "content": "2"},
        {"role": "assistant", "content": "2."},
        {"role": "user", "content": "and again?"},
    ]
    events = await run_events(agent_of(aio_client).stream(memory))
    assert events[-1]["status"] == "succeeded"
    assert len(fake_llm.requests) == 1
    assert fake_llm.requests[0]["messages"][1]["content"] == ""


# -- 2. [DONE] without a finish_reason ---------------------------------------------------------


async def test_done_without_a_finish_reason_is_recorded_as_no_reason(fake_llm, aio_client):
    # llama-cpp-python's stream interrupted by another request: some text, then a bare [DONE].
    fake_llm.script({"chunks": [{"delta": {"content": "The sky is"}}]})
    records: list[ModelCallRecord] = []
    events = await run_events(agent_of(aio_client, observers=[records.append]).stream("sky?"))
    assert events[-1] == {"type": "complete", "status": "succeeded"}
    assert [r.finish_reason for r in records] == [""]  # not "stop": the server never said so


# -- 3. the token limit --------------------------------------------------------------------------


async def test_an_answer_cut_at_the_token_limit_says_so_in_complete(fake_llm, aio_client):
    fake_llm.script({"sse": (CORPUS / CORPUS_LENGTH).read_bytes()})
    records: list[ModelCallRecord] = []
    events = await run_events(agent_of(aio_client, observers=[records.append]).stream("Why is the sky blue?"))
    assert events[-1] == {"type": "complete", "status": "succeeded", "finishReason": "length"}
    assert [r.finish_reason for r in records] == ["length"]


async def test_a_whole_answer_carries_no_finish_reason(fake_llm, aio_client):
    fake_llm.script(text_reply("Whole."))
    events = await run_events(agent_of(aio_client).stream("hi"))
    assert events[-1] == {"type": "complete", "status": "succeeded"}


# -- 4. an empty HTTP 200 body ---------------------------------------------------------------------


async def test_an_empty_200_body_is_named_and_not_retried(fake_llm, aio_client):
    fake_llm.script({"sse": ""}, text_reply("never asked for"))
    error = await failure_of(ChatModel(client=aio_client, model="fake-model"))
    assert error.detail.startswith("The model endpoint answered with an empty response (HTTP 200")
    assert "context window" in error.detail
    assert not error.retryable

    fake_llm.reset()
    fake_llm.script({"sse": ""}, text_reply("never asked for"))
    events = await run_events(agent_of(aio_client, max_retries=3).stream("a long conversation"))
    assert len(fake_llm.requests) == 1
    errors = [e for e in events if e["type"] == "error"]
    assert [e["message"] for e in errors] == [error.detail]
    assert events[-1]["status"] == "failed"


# -- 5. connections reused ---------------------------------------------------------------------------


async def test_model_calls_reuse_one_connection(fake_llm, aio_client):
    model = ChatModel(client=aio_client, model="fake-model")
    for _ in range(3):
        # The body ends in a read after [DONE]'s, as llama-cpp-python's server sends it.
        fake_llm.script({**text_reply("again"), "tail_delay": 0.05})
        assert (await turn_of(model)).content == "again"
    assert len(fake_llm.requests) == 3
    assert fake_llm.connections == 1


# -- 6. causes named as they are ----------------------------------------------------------------------


async def test_a_server_killed_mid_body_is_a_lost_connection(fake_llm, aio_client):
    fake_llm.script({"chunks": [{"delta": {"content": f"p{i}"}} for i in range(5)], "truncate_after": 2})
    error = await failure_of(ChatModel(client=aio_client, model="fake-model"))
    assert (
        error.detail
        == f"The connection to the model endpoint at 127.0.0.1:{fake_llm.port} was lost mid-response (TransferEncodingError)."
    )
    assert error.retryable


async def test_a_refused_connection_is_logged_as_refused(caplog):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = openai.AsyncOpenAI(
        base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0, http_client=openai.DefaultAioHttpClient()
    )
    try:
        with caplog.at_level(logging.WARNING, logger="chat.agent"):
            events = await run_events(agent_of(client, max_retries=0).stream("hi"))
    finally:
        await client.close()
    assert events[-1]["status"] == "failed"
    [line] = [r.getMessage() for r in caplog.records if "model call failed" in r.getMessage()]
    assert "ConnectionRefusedError: " in line
    assert "timed out" not in line.lower()


# -- 7. tool_choice ----------------------------------------------------------------------------------------


async def test_a_named_tool_choice_is_sent_on_the_first_call_only(fake_llm, aio_client):
    fake_llm.script(tool_call_reply(("add", {"a": 2, "b": 3})), text_reply("5."))
    events = await run_events(agent_of(aio_client, options=ModelOptions(tool_choice="add")).stream("add"))
    assert events[-1]["status"] == "succeeded"
    first, second = fake_llm.requests
    assert first["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    assert "tool_choice" not in second  # forced again, the model could never answer
    assert second["tools"] == first["tools"]


@pytest.mark.parametrize("mode", ["auto", "none"])
async def test_a_mode_tool_choice_is_sent_on_every_call(fake_llm, aio_client, mode):
    fake_llm.script(tool_call_reply(("add", {"a": 2, "b": 3})), text_reply("5."))
    await run_events(agent_of(aio_client, options=ModelOptions(tool_choice=mode)).stream("add"))
    assert [r.get("tool_choice") for r in fake_llm.requests] == [mode, mode]


async def test_no_tool_choice_unless_set_and_never_without_tools(fake_llm, aio_client):
    await turn_of(ChatModel(client=aio_client, model="fake-model"))
    await turn_of(ChatModel(client=aio_client, model="fake-model", options=ModelOptions(tool_choice="required")))
    assert ["tool_choice" in r for r in fake_llm.requests] == [False, False]  # no tools in these requests


# -- recorded from the real server (python -m tests.realmodel record) ------------------------------------


@pytest.mark.parametrize(("name", "answer"), [("text", "The sky blue is a result"), ("after-tool-round", "The")])
async def test_recorded_llama_cpp_python_streams_replay(fake_llm, aio_client, name, answer):
    fake_llm.script({"sse": (TRANSCRIPTS / f"llamacpppython-{name}.sse").read_bytes()})
    records: list[ModelCallRecord] = []
    events = await run_events(agent_of(aio_client, observers=[records.append]).stream("hi"))
    text = "".join(e["content"] for e in events if e["type"] == "text")
    assert text.startswith(answer)
    assert events[-1] == {"type": "complete", "status": "succeeded", "finishReason": "length"}  # max_tokens 24
    assert [r.finish_reason for r in records] == ["length"]


async def test_the_recorded_context_window_overflow_is_an_empty_body(fake_llm, aio_client):
    raw = (TRANSCRIPTS / "llamacpppython-context-exceeded.sse").read_bytes()
    assert raw == b""  # what llama-cpp-python 0.3.36 sent for a prompt over n_ctx
    fake_llm.script({"sse": raw})
    error = await failure_of(ChatModel(client=aio_client, model="fake-model"))
    assert error.detail.startswith("The model endpoint answered with an empty response") and not error.retryable
