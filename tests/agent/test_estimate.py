"""The estimate a model call cut by a Stop counts (chat.agent.estimate): a token per 4 ASCII
characters and per other character, rounded up; 1,000 per image."""

from __future__ import annotations

import math

import pytest

from chat.agent.estimate import IMAGE_TOKENS, estimate_usage, text_tokens
from chat.agent.turns import Usage


def test_text_tokens_count_ascii_by_four_and_other_characters_one_each():
    assert text_tokens([]) == 0
    assert text_tokens(["abcd"]) == 1
    assert text_tokens(["abcde"]) == 2
    assert text_tokens(["你好世界"]) == 4
    assert text_tokens(["ab", "cd", "é"]) == 2


def test_the_prompt_counts_texts_tool_calls_images_and_tool_schemas():
    messages = [
        {"role": "system", "content": "x" * 40},
        {"role": "user", "content": [{"type": "text", "text": "y" * 8}, {"type": "image_url", "image_url": {}}]},
        {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "calc", "arguments": "{}"}}]},
        {"role": "tool", "content": "42"},
    ]
    tools = [{"type": "function", "function": {"name": "calc"}}]
    schema_chars = len('[{"type": "function", "function": {"name": "calc"}}]')
    prompt = -(-(40 + 8 + 4 + 2 + 2 + schema_chars) // 4) + IMAGE_TOKENS
    assert estimate_usage(messages, tools, "the answer so f") == Usage(prompt, 4, prompt + 4)
    assert estimate_usage([], [], "") == Usage(0, 0, 0)


@pytest.mark.parametrize(
    "text", ["", "plain", "naïve café", "你好, world", "emoji 🙂 and \u200b", "lone \ud800 surrogate", "\x00\x7f\x80"]
)
def test_text_tokens_count_each_character_as_a_loop_over_them_would(text):
    ascii_chars = sum(1 for char in text if char.isascii())
    expected = math.ceil(ascii_chars / 4) + (len(text) - ascii_chars)
    assert text_tokens([text]) == expected
