"""The OpenAI-compatible endpoint's request reading and answer shapes, without a server
(docs/protocol.md, "OpenAI-compatible endpoint"); tests/e2e/test_openai_api.py runs them for real."""

from __future__ import annotations

import asyncio
import dataclasses
from concurrent.futures import ThreadPoolExecutor

import orjson
import pytest

from chat.agent.approval import DENIED, Unattended
from chat.agent.turns import ModelOptions
from chat.agents import profiles
from chat.models import API_SOURCE
from chat.web import openai_shapes as shapes


def test_the_last_user_message_is_the_content_and_the_rest_its_history():
    call = shapes.completion_request(
        {
            "model": "default",
            "messages": [
                {"role": "developer", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                {"role": "assistant", "content": "c"},
                {"role": "user", "content": "d"},
            ],
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": 0.5,
        }
    )
    assert call.content == "d" and call.stream and call.include_usage
    assert call.history == (
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "ab"},
        {"role": "assistant", "content": "c"},
    )
    assert call.options == ModelOptions(temperature=0.5)
    both = shapes.completion_request(
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 90, "max_completion_tokens": 70}
    )
    assert both.options == ModelOptions(max_tokens=70)  # both given: the lower


def test_a_requests_options_replace_the_temperature_and_cap_max_tokens_under_the_agents():
    agent = profiles.default_config()
    capped = dataclasses.replace(agent, options=ModelOptions(temperature=0.7, max_tokens=50, top_p=0.9))
    got = profiles.with_request_options(capped, ModelOptions(temperature=0.2, max_tokens=100)).options
    assert (got.temperature, got.max_tokens, got.top_p) == (0.2, 50, 0.9)  # the agent's cap is lower: it stays
    got = profiles.with_request_options(capped, ModelOptions(max_tokens=20)).options
    assert (got.temperature, got.max_tokens) == (0.7, 20)
    uncapped = dataclasses.replace(agent, options=ModelOptions())
    assert profiles.with_request_options(uncapped, ModelOptions(max_tokens=20)).options.max_tokens == 20
    assert profiles.with_request_options(uncapped, ModelOptions()).options == ModelOptions()


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        ([], None, "invalid_request"),
        ({"messages": [{"role": "user", "content": "x"}]}, "model", "invalid_request"),
        ({"model": "default", "messages": []}, "messages", "invalid_request"),
        ({"model": "default", "messages": [{"role": "assistant", "content": "x"}]}, "messages[0]", "invalid_request"),
        ({"model": "default", "messages": [{"role": "tool", "content": "x"}]}, "messages[0]", "invalid_request"),
        ({"model": "default", "messages": [{"role": "user", "content": 3}]}, "messages[0].content", "invalid_content"),
        (
            {"model": "default", "messages": [{"role": "user", "content": "x"}], "tools": [{}]},
            "tools",
            "tools_not_supported",
        ),
        (
            {"model": "default", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"},
            "temperature",
            "invalid_request",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 2.5},
            "temperature",
            "invalid_request",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
            "max_tokens",
            "invalid_request",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 10**30},
            "max_tokens",
            "invalid_request",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 1.5},
            "max_tokens",
            "invalid_request",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_completion_tokens": -1},
            "max_completion_tokens",
            "invalid_request",
        ),
    ],
)
def test_bad_requests_are_400_with_their_param(body, param, code):
    with pytest.raises(shapes.BadRequest) as caught:
        shapes.completion_request(body)
    assert (caught.value.param, caught.value.code) == (param, code)
    response = caught.value.response()
    error = orjson.loads(response.content)["error"]
    assert response.status_code == 400 and error["type"] == "invalid_request_error" and error["code"] == code


def _outcome(*frames):
    outcome = shapes.RunOutcome("r")
    for seq, frame in enumerate(frames, 1):
        outcome.add({**frame, "seq": seq, "runId": "r"})
    return outcome


USAGE = {"promptTokens": 3, "completionTokens": 4, "totalTokens": 7}


def test_the_answer_is_the_text_after_the_last_failed_attempt():
    outcome = _outcome(
        {"type": "user_message", "content": "q"},
        {"type": "thinking", "content": "hm"},
        {"type": "text", "content": "lost"},
        {"type": "error", "code": "LLM_CALL_FAILED", "message": "x", "detail": ""},
        {"type": "text", "content": "kept"},
        {"type": "complete", "status": "succeeded", "usage": USAGE},
    )
    body = shapes.completion(outcome, completion_id="c", model="default", created=1)
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "kept", "reasoning_content": "hm"}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    assert outcome.failure() is None


def test_the_iteration_limit_is_length_and_a_failed_model_call_502():
    stopped = _outcome(
        {"type": "error", "code": "MAX_ITERATIONS", "message": "x", "detail": ""},
        {"type": "complete", "status": "failed", "usage": USAGE},
    )
    assert stopped.finish_reason == "length" and stopped.failure() is None
    failed = _outcome(
        {"type": "error", "code": "LLM_CALL_FAILED", "message": "boom", "detail": ""},
        {"type": "complete", "status": "failed", "usage": USAGE},
    )
    assert failed.failure() == (502, "model_call_failed", "boom")
    other = shapes.RunOutcome("r")
    other.add({"type": "text", "content": "not mine", "runId": "s", "seq": 1})
    assert other.answer.text == ""


def test_chunks_are_openai_chunks_and_the_usage_chunk_has_no_choices():
    line = shapes.chunk(completion_id="c", model="m", created=1, delta={"content": "x"})
    assert line.startswith(b"data: ") and line.endswith(b"\n\n")
    body = orjson.loads(line[6:])
    assert body["object"] == "chat.completion.chunk" and body["choices"][0]["delta"] == {"content": "x"}
    usage = orjson.loads(shapes.chunk(completion_id="c", model="m", created=1, usage={"total_tokens": 1})[6:])
    assert usage["choices"] == [] and usage["usage"] == {"total_tokens": 1}


def test_an_api_run_is_unattended_and_its_approvals_denied_at_once():
    config = profiles.default_config()
    assert not profiles.for_source(config, source="").unattended
    assert profiles.for_source(config, source=API_SOURCE).unattended

    async def decide():
        return Unattended().expect(["call_0"])["call_0"].result()

    # A loop of its own, in a thread of its own: the browser tests (Playwright's sync API) leave a
    # loop running in the main thread, where asyncio.run() refuses to start.
    with ThreadPoolExecutor(max_workers=1) as thread:
        assert thread.submit(asyncio.run, decide()).result().decision == DENIED
