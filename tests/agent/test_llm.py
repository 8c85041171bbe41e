"""ChatModel over the real openai SDK and real HTTP against the fake server, one transcript per behaviour."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from chat.agent import ChatModel, ModelOptions
from chat.agent.chunks import STREAM_DONE
from chat.agent.events import TextEvent
from chat.agent.llm import ModelCallError
from chat.agent.turns import ModelRequest, ModelTurn, ToolCall, Usage
from tests.fakellm import text_reply

from .helpers import sample_tools


def request(**kwargs) -> ModelRequest:
    return ModelRequest(messages=[{"role": "user", "content": "hi"}], **kwargs)


async def stream(model: ChatModel, req: ModelRequest | None = None):
    """(deltas as protocol JSON, the closing ModelTurn)."""
    items = [item async for item in model.stream(req or request())]
    turn = items.pop()
    assert isinstance(turn, ModelTurn)
    assert not any(isinstance(item, ModelTurn) for item in items)
    return [item.to_dict() for item in items], turn


async def test_plain_answer_and_request_body(fake_llm, client):
    fake_llm.script(
        {
            "chunks": [
                {"delta": {"content": "Hel"}},
                {"delta": {"content": "lo"}},
                {"delta": {}, "finish_reason": "stop"},
            ]
        }
    )
    model = ChatModel(client=client, model="fake-model")
    options = ModelOptions(temperature=0.5, max_tokens=99, extra_body={"enable_thinking": True})
    events, turn = await stream(model, request(tools=sample_tools().specs(), options=options))
    assert events == [{"type": "text", "content": "Hel"}, {"type": "text", "content": "lo"}]
    assert turn == ModelTurn(content="Hello", thinking="", tool_calls=(), finish_reason="stop", usage=None)
    body = fake_llm.requests[-1]
    assert body["model"] == "fake-model"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["temperature"] == 0.5 and body["max_tokens"] == 99 and body["enable_thinking"] is True
    assert "top_p" not in body
    assert [t["function"]["name"] for t in body["tools"]] == ["add", "mul", "explode", "refuse"]


async def test_no_tools_key_when_there_are_no_tools(fake_llm, chat_model):
    await stream(chat_model)
    assert "tools" not in fake_llm.requests[-1]
    assert "response_format" not in fake_llm.requests[-1]


async def test_split_think_tags(fake_llm, chat_model):
    fake_llm.load("split_think_tags")
    events, turn = await stream(chat_model)
    assert events == [
        {"type": "thinking", "content": "Let me "},
        {"type": "thinking", "content": "add."},
        {"type": "text", "content": "It is"},
        {"type": "text", "content": " 4."},
    ]
    assert (turn.thinking, turn.content) == ("Let me add.", "It is 4.")


async def test_reasoning_content(fake_llm, chat_model):
    fake_llm.load("reasoning_content")
    events, turn = await stream(chat_model)
    assert events == [
        {"type": "thinking", "content": "The user "},
        {"type": "thinking", "content": "greets me."},
        {"type": "text", "content": "Hello"},
        {"type": "text", "content": "!"},
    ]
    assert (turn.thinking, turn.content) == ("The user greets me.", "Hello!")


async def test_reasoning_field(fake_llm, chat_model):
    fake_llm.load("reasoning_field")
    events, turn = await stream(chat_model)
    assert events == [
        {"type": "thinking", "content": "Short "},
        {"type": "thinking", "content": "thought."},
        {"type": "text", "content": "Done."},
    ]
    assert turn.thinking == "Short thought."


async def test_start_in_thinking(fake_llm, client):
    fake_llm.script(
        {
            "chunks": [
                {"delta": {"content": "plan</think>"}},
                {"delta": {"content": "answer"}},
                {"delta": {}, "finish_reason": "stop"},
            ]
        }
    )
    model = ChatModel(client=client, model="m", start_in_thinking=True)
    events, turn = await stream(model)
    assert events == [{"type": "thinking", "content": "plan"}, {"type": "text", "content": "answer"}]


async def test_parallel_tool_calls_with_interleaved_argument_pieces(fake_llm, chat_model):
    fake_llm.load("parallel_tool_calls")
    events, turn = await stream(chat_model)
    assert events == []
    assert turn.tool_calls == (
        ToolCall("call_a", "add", '{"a": 2, "b": 3}'),
        ToolCall("call_b", "mul", '{"a": 6, "b": 7}'),
    )
    assert turn.finish_reason == "tool_calls"
    assert turn.assistant_message() == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}},
            {"id": "call_b", "type": "function", "function": {"name": "mul", "arguments": '{"a": 6, "b": 7}'}},
        ],
    }


async def test_missing_id_gets_a_generated_one(fake_llm, chat_model):
    fake_llm.load("missing_id")
    _, turn = await stream(chat_model)
    (call,) = turn.tool_calls
    assert re.fullmatch(r"call_[0-9a-f]{24}", call.id)
    assert (call.name, call.arguments) == ("add", '{"a": 1, "b": 1}')


async def test_resent_name_is_not_repeated(fake_llm, chat_model):
    fake_llm.load("resent_name")
    _, turn = await stream(chat_model)
    assert turn.tool_calls == (ToolCall("call_r", "add", '{"a": 2, "b": 40}'),)


async def test_missing_index(fake_llm, chat_model):
    fake_llm.load("missing_index")
    _, turn = await stream(chat_model)
    assert turn.tool_calls == (
        ToolCall("call_x", "add", '{"a": 1, "b": 2}'),
        ToolCall("call_y", "mul", '{"a": 3, "b": 4}'),
    )


async def test_arguments_resent_whole_at_the_end(fake_llm, chat_model):
    fake_llm.load("arguments_resent_whole")
    _, turn = await stream(chat_model)
    assert turn.tool_calls == (ToolCall("call_w", "add", '{"a": 20, "b": 22}'),)


async def test_finish_reason_stop_with_tool_calls_is_still_a_tool_round(fake_llm, chat_model):
    fake_llm.load("stop_with_tool_calls")
    _, turn = await stream(chat_model)
    assert turn.finish_reason == "stop"
    assert turn.tool_calls == (ToolCall("call_s", "add", '{"a": 1, "b": 1}'),)


async def test_text_before_a_tool_call_keeps_its_held_tail_and_drops_trailing_filler(fake_llm, chat_model):
    fake_llm.load("text_then_tool_call")
    events, turn = await stream(chat_model)
    assert events == [{"type": "text", "content": "Checking 1 "}, {"type": "text", "content": "<"}]
    assert turn.content == "Checking 1 <"
    assert turn.tool_calls == (ToolCall("call_t", "add", '{"a": 1, "b": 2}'),)


async def test_truncated_stream_is_a_failed_call(fake_llm, chat_model):
    fake_llm.load("truncated_stream")
    seen = []
    with pytest.raises(ModelCallError) as failure:
        async for item in chat_model.stream(request()):
            seen.append(item.to_dict())
    assert seen == [{"type": "text", "content": "Half an "}, {"type": "text", "content": "answer"}]
    assert failure.value.detail  # says why
    assert await fake_llm.endings() == ["truncated"]


async def test_stream_ending_with_neither_finish_reason_nor_done_is_a_failed_call(fake_llm, chat_model):
    fake_llm.script({"chunks": [{"delta": {"content": "no end"}}], "done": False})
    with pytest.raises(ModelCallError, match="truncated"):
        await stream(chat_model)
    assert await fake_llm.endings() == ["done"]  # the body ended cleanly, just without an end


async def test_done_without_finish_reason_is_a_finished_turn(fake_llm, chat_model):
    # Snowflake Cortex never sends a finish_reason; its [DONE] is the end of the turn, and the
    # turn says that no reason came (llama-cpp-python ends an interrupted stream the same way).
    fake_llm.script(
        {"chunks": [{"delta": {"content": "4"}}]},
        {
            "chunks": [
                {
                    "delta": {
                        "tool_calls": [
                            {"index": 0, "id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
                        ]
                    }
                }
            ]
        },
    )
    events, turn = await stream(chat_model)
    assert events == [{"type": "text", "content": "4"}]
    assert (turn.content, turn.finish_reason, turn.tool_calls) == ("4", None, ())
    _, turn = await stream(chat_model)
    assert (turn.finish_reason, turn.tool_calls) == (None, (ToolCall("c1", "add", "{}"),))


async def test_midstream_error_event_is_a_failed_call(fake_llm, chat_model):
    fake_llm.load("midstream_error")
    seen = []
    with pytest.raises(ModelCallError) as failure:
        async for item in chat_model.stream(request()):
            seen.append(item)
    assert seen == [TextEvent("Start")]
    assert "overloaded" in failure.value.detail


@pytest.mark.parametrize(
    ("status", "message", "detail"),
    [
        (500, "internal failure", "The model endpoint failed with a server error (HTTP 500)."),
        (429, "rate limit exceeded", "The model endpoint is limiting requests (HTTP 429)."),
    ],
)
async def test_http_error_is_a_failed_call_with_status_and_message(fake_llm, chat_model, status, message, detail):
    fake_llm.script({"status": status, "body": {"error": {"message": message}}})
    with pytest.raises(ModelCallError) as failure:
        await stream(chat_model)
    # Users see the cause in our words; the endpoint's own text goes to the log only.
    assert failure.value.detail == detail
    assert failure.value.log_detail == f"HTTP {status}: {message}"
    assert failure.value.status == status and failure.value.retryable
    assert len(fake_llm.requests) == 1, "the SDK must not retry on its own"


async def test_timeout_is_a_failed_call(fake_llm, client):
    fake_llm.script({"chunks": [{"delta": {"content": "slow"}}, {"delta": {}, "finish_reason": "stop"}], "delay": 1})
    model = ChatModel(client=client, model="m", timeout=0.2)
    with pytest.raises(ModelCallError, match="did not finish within 0.2 s"):
        await stream(model)


async def test_usage_is_captured(fake_llm, chat_model):
    fake_llm.load("usage")
    events, turn = await stream(chat_model)
    assert events == [{"type": "text", "content": "Hi."}]
    assert turn.usage == Usage(11, 3, 14)


async def test_usage_chunk_with_choices_null(fake_llm, chat_model):
    fake_llm.load("usage_choices_null")
    events, turn = await stream(chat_model)
    assert events == [{"type": "text", "content": "Hi."}]
    assert turn.usage == Usage(5, 2, 7)


async def test_endpoint_rejecting_stream_options_is_retried_without_and_remembered(fake_llm, chat_model):
    fake_llm.load("stream_options_rejected")
    _, first = await stream(chat_model)
    _, second = await stream(chat_model)
    assert (first.content, second.content) == ("First.", "Second.")
    assert len(fake_llm.requests) == 3
    assert fake_llm.requests[0]["stream_options"] == {"include_usage": True}
    assert "stream_options" not in fake_llm.requests[1]
    assert "stream_options" not in fake_llm.requests[2]  # remembered: no second 400


async def test_other_bad_requests_are_not_retried(fake_llm, chat_model):
    fake_llm.script({"status": 400, "body": {"error": {"message": "messages must not be empty"}}})
    with pytest.raises(ModelCallError, match=re.escape("rejected the request as invalid (HTTP 400)")) as failure:
        await stream(chat_model)
    assert not failure.value.retryable
    assert failure.value.log_detail == "HTTP 400: messages must not be empty"
    assert len(fake_llm.requests) == 1
    fake_llm.script({"chunks": [{"delta": {}, "finish_reason": "stop"}]})
    await stream(chat_model)
    assert fake_llm.requests[-1]["stream_options"] == {"include_usage": True}


def test_model_options_to_kwargs():
    assert ModelOptions().to_kwargs() == {}
    assert ModelOptions(temperature=0, top_p=0.9, extra_body={"x": 1}).to_kwargs() == {
        "temperature": 0,
        "top_p": 0.9,
        "extra_body": {"x": 1},
    }


def test_usage_adds_up():
    assert Usage(1, 2, 3) + Usage(10, 20, 30) == Usage(11, 22, 33)


def test_sdk_retries_are_off(client):
    assert ChatModel(client=client, model="m").client.max_retries == 0


def test_transcripts_have_a_description_and_replies():
    from tests.fakellm import TRANSCRIPTS

    files = sorted(TRANSCRIPTS.glob("*.json"))
    assert len(files) >= 12
    for path in files:
        data = json.loads(path.read_text())
        assert data["description"].strip(), path.name
        assert data["replies"] and all(isinstance(r, dict) for r in data["replies"]), path.name


class _RawResponse:
    def __init__(self, *reads: bytes):
        self.reads = reads

    async def aiter_bytes(self):
        for read in self.reads:
            yield read


async def _payloads(*reads: bytes) -> list:
    from chat.agent.chunks import sse_batches

    return [item async for batch in sse_batches(_RawResponse(*reads)) for item in batch]


SSE_BODY = (
    ': OPENROUTER PROCESSING\r\n\r\nevent: message\r\ndata: {"a":\r\ndata: 1}\r\n\r\n'
    'id: 7\ndata:{"b": "caf\u00e9 \u4f60\u597d"}\n\n'
    'data: {"c": 3}\r\rdata: [DONE]\n\ndata: {"after": "done"}\n\n'
).encode()
SSE_PAYLOADS = [{"a": 1}, {"b": "caf\u00e9 \u4f60\u597d"}, {"c": 3}, STREAM_DONE]


async def test_sse_reader_skips_comments_and_fields_and_joins_multiline_data():
    assert await _payloads(SSE_BODY) == SSE_PAYLOADS


async def test_sse_reader_gives_the_same_payloads_wherever_the_reads_are_cut():
    # Every cut point, including inside a CRLF and inside a multi-byte UTF-8 character.
    for cut in range(1, len(SSE_BODY)):
        assert await _payloads(SSE_BODY[:cut], SSE_BODY[cut:]) == SSE_PAYLOADS, cut
    assert await _payloads(*(SSE_BODY[i : i + 1] for i in range(len(SSE_BODY)))) == SSE_PAYLOADS


async def test_sse_reader_groups_payloads_by_read_and_takes_a_last_event_without_blank_line():
    from chat.agent.chunks import sse_batches

    reads = (b'data: {"x": 1}\n\ndata: {"x": 2}\n\ndata: {"x"', b': 3}\n\ndata: {"x": 4}')
    batches = [batch async for batch in sse_batches(_RawResponse(*reads))]
    assert batches == [[{"x": 1}, {"x": 2}], [{"x": 3}], [{"x": 4}]]


async def test_sse_reader_passes_on_done_also_without_its_blank_line():
    assert await _payloads(b'data: {"x": 1}\n\ndata: [DONE]') == [{"x": 1}, STREAM_DONE]
    assert await _payloads(b'data: {"x": 1}\n\n') == [{"x": 1}]  # no [DONE]: nothing says the turn ended


async def test_content_parts_are_read_as_thinking_and_text(fake_llm, chat_model):
    fake_llm.load("content_parts")
    events, turn = await stream(chat_model)
    assert events == [
        {"type": "thinking", "content": "Seventeen "},
        {"type": "thinking", "content": "times 23"},
        {"type": "thinking", "content": " is 391."},
        {"type": "thinking", "content": " Done."},
        {"type": "text", "content": "It is "},
        {"type": "text", "content": "3"},
        {"type": "text", "content": "91"},
    ]
    assert (turn.thinking, turn.content) == ("Seventeen times 23 is 391. Done.", "It is 391")
    assert turn.finish_reason == "stop"


async def test_think_tags_inside_text_parts_are_still_thinking(fake_llm, chat_model):
    fake_llm.script(
        {
            "chunks": [
                {"delta": {"content": [{"type": "text", "text": "<think>hm</think>"}]}},
                {"delta": {"content": [{"type": "text", "text": "Yes."}]}, "finish_reason": "stop"},
            ]
        }
    )
    events, turn = await stream(chat_model)
    assert events == [{"type": "thinking", "content": "hm"}, {"type": "text", "content": "Yes."}]


async def test_reasoning_details_text_and_summary_are_thinking_and_encrypted_ones_are_skipped(fake_llm, chat_model):
    fake_llm.load("reasoning_details")
    events, turn = await stream(chat_model)
    assert events == [
        {"type": "thinking", "content": "15 * 27"},
        {"type": "thinking", "content": " = 405"},
        {"type": "text", "content": "405"},
    ]
    assert (turn.thinking, turn.content, turn.finish_reason, turn.usage) == (
        "15 * 27 = 405",
        "405",
        None,  # Snowflake's stream: [DONE] and no finish_reason
        Usage(10, 5, 15),
    )


async def test_reasoning_details_beside_plain_reasoning_are_not_read_twice(fake_llm, chat_model):
    details = [{"type": "reasoning.text", "text": "same"}]
    fake_llm.script(
        {
            "chunks": [
                {"delta": {"reasoning": "same", "reasoning_details": details}},
                {"delta": {"reasoning_content": "also", "reasoning_details": details}},
                {"delta": {"content": "ok"}, "finish_reason": "stop"},
            ]
        }
    )
    _, turn = await stream(chat_model)
    assert turn.thinking == "samealso"


async def test_refusal_is_the_answer(fake_llm, chat_model):
    fake_llm.load("refusal")
    events, turn = await stream(chat_model)
    assert events == [
        {"type": "text", "content": "I'm sorry, "},
        {"type": "text", "content": "I can't help with that."},
    ]
    assert turn.content == "I'm sorry, I can't help with that."


@pytest.mark.parametrize("transcript", ["parallel_same_index", "parallel_same_index_pieces"])
async def test_parallel_calls_under_one_index_stay_apart(fake_llm, chat_model, transcript):
    fake_llm.load(transcript)
    _, turn = await stream(chat_model)
    ids = [call.id for call in turn.tool_calls]
    assert ids == (["call_o1", "call_o2"] if transcript == "parallel_same_index" else ["call_d1", "call_d2"])
    assert [(c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [
        ("add", {"a": 2, "b": 3}),
        ("mul", {"a": 6, "b": 7}),
    ]


async def test_sglang_first_delta_indexed_by_tool_position(fake_llm, chat_model):
    fake_llm.load("sglang_tool_index")
    _, turn = await stream(chat_model)
    assert turn.tool_calls == (
        ToolCall("call_s1", "mul", '{"a": 6, "b": 7}'),
        ToolCall("call_s2", "add", '{"a": 2, "b": 3}'),
    )


async def test_ids_that_repeat_under_distinct_indexes_are_still_distinct_calls(fake_llm, chat_model):
    # Dynamo's harmony path once numbered every call "call-1"; the index keeps them apart.
    fake_llm.script(
        {
            "chunks": [
                {
                    "delta": {
                        "tool_calls": [{"index": 0, "id": "call-1", "function": {"name": "add", "arguments": "{}"}}]
                    }
                },
                {
                    "delta": {
                        "tool_calls": [{"index": 1, "id": "call-1", "function": {"name": "mul", "arguments": "{}"}}]
                    }
                },
                {"delta": {}, "finish_reason": "tool_calls"},
            ]
        }
    )
    _, turn = await stream(chat_model)
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("add", "{}"), ("mul", "{}")]


async def test_ollama_think_tags_then_a_tool_call(fake_llm, chat_model):
    fake_llm.load("ollama_think_tags")
    events, turn = await stream(chat_model)
    assert events == [{"type": "thinking", "content": "I should "}, {"type": "thinking", "content": "add them.\n"}]
    assert (turn.content, turn.tool_calls) == ("", (ToolCall("call_q1", "add", '{"a": 40, "b": 2}'),))
    events, turn = await stream(chat_model)
    assert events == [{"type": "text", "content": "The sum is 42."}]  # the empty think block leaves nothing


async def test_vllm_reasoning_then_tool_call_in_one_turn(fake_llm, chat_model):
    fake_llm.load("vllm_reasoning_tool_call")
    events, turn = await stream(chat_model)
    assert events == [{"type": "thinking", "content": "The user wants "}, {"type": "thinking", "content": "6 times 7."}]
    assert turn.thinking == "The user wants 6 times 7."
    assert turn.tool_calls == (ToolCall("chatcmpl-tool-9a1", "mul", '{"a": 6, "b": 7}'),)
    assert turn.finish_reason == "tool_calls"


async def _until(condition, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.005)


async def test_a_held_model_sends_its_request_and_reads_nothing_until_released(fake_llm, client):
    fake_llm.script(text_reply("held words", piece=4))
    hold = asyncio.Event()
    model = ChatModel(client=client, model="fake-model", hold=hold)
    items: list = []

    async def read() -> None:
        async for item in model.stream(request()):
            items.append(item)

    reader = asyncio.create_task(read())
    await _until(lambda: len(fake_llm.requests) == 1)  # the request went out at once
    await fake_llm.endings(1)  # and the whole answer was sent
    await asyncio.sleep(0.05)
    assert items == []  # none of it read
    hold.set()
    await asyncio.wait_for(reader, 5)
    assert "".join(i.content for i in items if isinstance(i, TextEvent)) == "held words"


async def test_a_held_model_s_failure_comes_only_once_released(fake_llm, client):
    fake_llm.script({"status": 500, "body": {"error": {"message": "boom"}}})
    hold = asyncio.Event()
    model = ChatModel(client=client, model="fake-model", hold=hold)
    reader = asyncio.create_task(stream(model))
    await _until(lambda: len(fake_llm.requests) == 1)
    await asyncio.sleep(0.05)
    assert not reader.done()  # the agent would retry at once: not before the run is stored
    hold.set()
    with pytest.raises(ModelCallError) as failure:
        await asyncio.wait_for(reader, 5)
    assert failure.value.status == 500


async def test_a_held_model_cancelled_while_held_closes_its_response(fake_llm, client):
    fake_llm.script(text_reply("never read " * 50, piece=2, delay=0.02))
    model = ChatModel(client=client, model="fake-model", hold=asyncio.Event())
    reader = asyncio.create_task(stream(model))
    await _until(lambda: len(fake_llm.requests) == 1)
    reader.cancel()  # a refused start
    with pytest.raises(asyncio.CancelledError):
        await reader
    assert await fake_llm.endings(1) == ["aborted"]  # the connection was closed mid-answer
