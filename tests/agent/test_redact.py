"""Secrets out of error text: known keys and their pieces, key shapes, named credentials, the length cap."""

from __future__ import annotations

import pytest

from chat.agent.redact import MAX_CHARS, REDACTED, redact

KEY = "sk-proj-Abc123xyzVERYsecretKEY9876"


@pytest.mark.parametrize(
    ("text", "leaks"),
    [
        ("Incorrect API key provided: sk-proj-Abc1**************9876.", ["Abc1", "9876"]),
        (f"the key {KEY} is revoked", [KEY, "VERYsecret"]),
        ("invalid key Abc123xyzVERYsec (truncated by the proxy)", ["Abc123xyzVERYsec"]),
        ("upstream: Authorization: Bearer tok_live_abcdef123456 refused", ["tok_live_abcdef123456"]),
        ("GET https://proxy.example/v1?api_key=hunter2hunter2&x=1 failed", ["hunter2hunter2"]),
        ('{"password": "correct-horse-battery"}', ["correct-horse-battery"]),
        ("tavily said tvly-AbCdEf0123456789 is unknown", ["tvly-AbCdEf0123456789"]),
        ("opaque 9f8e7d6c5b4a39281726354abcdef0 token", ["9f8e7d6c5b4a39281726354abcdef0"]),
    ],
)
def test_secrets_are_redacted(text, leaks):
    out = redact(text, [KEY])
    assert REDACTED in out
    for leak in leaks:
        assert leak not in out


@pytest.mark.parametrize(
    "text",
    [
        "rate limit exceeded",
        "The model `qwen2.5-72b-instruct-awq` does not exist",
        "This model's maximum context length is 8192 tokens",
        "model gpt-4o-mini-2024-07-18 not found at api.example.com:443",
    ],
)
def test_ordinary_text_stays_readable(text):
    assert redact(text, [KEY]) == text


def test_one_line_and_capped():
    out = redact("line one\nline two\r\n" + "word " * 200)
    assert "\n" not in out and out.startswith("line one line two word")
    assert len(out) == MAX_CHARS and out.endswith("…")


def test_secrets_too_short_to_be_keys_are_ignored():
    # A 4-character key would turn every common word into [redacted].
    assert redact("the model is busy", ["busy"]) == "the model is busy"
