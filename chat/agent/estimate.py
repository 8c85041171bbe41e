"""Tokens of a model call cut before the endpoint said how many it used (the run was stopped).

OpenAI-compatible endpoints report usage in a stream's last chunk (`stream_options.
include_usage`), after every delta: a call stopped mid-stream never gets it, yet the endpoint
has read the prompt and generated what was received, and bills for both. So that Stop is no
way around the daily quota, such a call counts an estimate, marked as one in its record
(ModelCallRecord.estimated, `estimated` in the run trace).

The heuristic, documented in docs/protocol.md: a token per 4 ASCII characters and a token per
other character (CJK text runs about one token per character, English about four characters
per token), rounded up, of
- the prompt: every message's text (content and its text parts, tool call names and
  arguments) plus the JSON of the tool schemas sent, and IMAGE_TOKENS per image part;
- the completion: the text and thinking received before the cut.

The offline demo model (chat.agent.demo) reports its usage by this same count, so that a
stopped demo run and a complete one count tokens of the same kind.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

from .turns import Usage

ASCII_CHARS_PER_TOKEN = 4
IMAGE_TOKENS = 1_000  # of the order OpenAI counts for a 1024x1024 image at high detail


def text_tokens(texts: Iterable[str]) -> int:
    ascii_chars = other = 0
    for text in texts:
        # The ASCII characters are what an ASCII encoding keeps, counted at C speed: a loop over
        # each character in Python was 0.35 s of the event loop in a burst of 100 run starts
        # (compaction sizes every request before it goes; bench.door_trace's profile).
        n = len(text) if text.isascii() else len(text.encode("ascii", "ignore"))
        ascii_chars += n
        other += len(text) - n
    return math.ceil(ascii_chars / ASCII_CHARS_PER_TOKEN) + other


def _message_texts(message: dict[str, Any]) -> tuple[list[str], int]:
    """The texts of one chat message, and its number of images."""
    texts, images = [], 0
    content = message.get("content")
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, dict) and part.get("type") == "image_url":
                images += 1
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {} if isinstance(call, dict) else {}
        texts += [value for value in (function.get("name"), function.get("arguments")) if isinstance(value, str)]
    return texts, images


def estimate_usage(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], received: str) -> Usage:
    """The estimated usage of a call sent `messages` and `tools` that streamed `received`."""
    texts: list[str] = [json.dumps(list(tools), ensure_ascii=False)] if tools else []
    images = 0
    for message in messages:
        more, seen = _message_texts(message)
        texts += more
        images += seen
    prompt = text_tokens(texts) + images * IMAGE_TOKENS
    completion = text_tokens([received])
    return Usage(prompt, completion, prompt + completion)
