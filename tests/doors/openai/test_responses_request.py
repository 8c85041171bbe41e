"""The body of POST /v1/responses read (chat.doors.openai.responses_request): what it accepts,
what it leaves out, and the param each refusal names."""

from __future__ import annotations

import pytest

from chat.doors.openai.openai_shapes import BadRequest
from chat.doors.openai.responses_request import responses_request


def refused(body: dict) -> BadRequest:
    with pytest.raises(BadRequest) as caught:
        responses_request(body)
    return caught.value


def test_a_string_input_is_one_user_message():
    asked = responses_request({"model": "default", "input": "hi", "stream": True})
    assert asked.call.content == "hi" and asked.call.history == () and asked.call.stream
    assert asked.recorded() == {"metadata": {}, "background": False}


def test_a_list_input_with_sent_back_items_left_out():
    asked = responses_request(
        {
            "model": "default",
            "input": [
                {"role": "developer", "content": "be brief"},
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"role": "assistant", "content": [{"type": "output_text", "text": "yes"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
            ],
            "instructions": "Answer in French.",
            "metadata": {"k": "v"},
            "max_output_tokens": 50,
            "temperature": 0.5,
            "previous_response_id": "resp_x",
        }
    )
    assert [(m.role, m.content) for m in asked.call.history] == [("system", "be brief"), ("assistant", "yes")]
    assert asked.call.content == "go"
    assert asked.recorded() == {
        "metadata": {"k": "v"},
        "background": False,
        "instructions": "Answer in French.",
        "previousResponseId": "resp_x",
        "maxOutputTokens": 50,
        "temperature": 0.5,
    }


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        ({"input": "x"}, "model", "invalid_request"),
        ({"model": "default", "input": []}, "input", "invalid_request"),
        ({"model": "default", "input": [{"type": "function_call"}]}, "input[0]", "invalid_input"),
        ({"model": "default", "input": [{"role": "assistant", "content": "x"}]}, "input", "invalid_input"),
        ({"model": "default", "input": "x", "tools": [{"type": "web_search"}]}, "tools", "tools_not_supported"),
        ({"model": "default", "input": "x", "tool_choice": "required"}, "tool_choice", "tools_not_supported"),
        (
            {"model": "default", "input": "x", "text": {"format": {"type": "json_object"}}},
            "text.format",
            "unsupported_parameter",
        ),
        ({"model": "default", "input": "x", "prompt": {"id": "p"}}, "prompt", "unsupported_parameter"),
        ({"model": "default", "input": "x", "metadata": {"k": 1}}, "metadata", "invalid_request"),
        ({"model": "default", "input": "x", "temperature": 3}, "temperature", "invalid_request"),
        ({"model": "default", "input": "x", "max_output_tokens": 0}, "max_output_tokens", "invalid_request"),
        (
            {"model": "default", "input": "x", "conversation": "c", "previous_response_id": "r"},
            "conversation",
            "invalid_request",
        ),
        (
            {"model": "default", "input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]},
            "input[0].content[0].image_url",
            "invalid_content",
        ),
    ],
)
def test_refusals_name_their_param(body, param, code):
    error = refused(body)
    assert (error.param, error.code) == (param, code)


def test_instructions_longer_than_a_message_are_refused(settings):
    settings.AGENT_MAX_MESSAGE_CHARS = 5
    error = refused({"model": "default", "input": "x", "instructions": "too long"})
    assert (error.param, error.code) == ("instructions", "context_length_exceeded")
