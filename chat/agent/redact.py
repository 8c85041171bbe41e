"""Secrets out of error text before anyone sees it.

Model endpoints echo what they were sent: a wrong key comes back as "Incorrect
API key provided: sk-abc1****wxyz", some providers quote the whole key, a proxy
may quote its URL with a token in the query. Error text goes to users (events)
and to the server log, so it passes through `redact` first: known secrets and
any piece of them, key-like tokens, credentials after `key=`/`Bearer`, and a
cap on the length.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

REDACTED = "[redacted]"
MAX_CHARS = 300

# Well-known key shapes: OpenAI/Anthropic/DeepSeek (sk-), Tavily, Hugging Face, GitHub,
# Slack, Google, AWS access key ids.
_KEY_SHAPES = re.compile(
    r"\b(?:sk|pk|rk|tvly|hf|ghp|gho|ghs|ghu|xox[abprs]|AIza|AKIA)[-_]?[A-Za-z0-9][A-Za-z0-9_\-]{5,}"
    r"(?:\*+[A-Za-z0-9_\-]*)?"
)
# A masked secret as providers print it: letters, stars, letters ("sk-ab****xyz", "****1234").
_MASKED = re.compile(r"[A-Za-z0-9_\-]*\*{3,}[A-Za-z0-9_\-]*")
# A credential named as such: api_key=..., "token": "...", Authorization: Bearer ...
_NAMED = re.compile(
    r"(?i)\b(api[-_]?key|access[-_]?token|token|secret|password|passwd|authorization|key)"
    r"(\"?\s*[:=]\s*\"?)(?:bearer\s+)?([^\s\"',;&]{4,})"
)
_BEARER = re.compile(r"(?i)\b(bearer\s+)[^\s\"',;&]{4,}")
# Long opaque runs (20+ letters and digits, mixed, no separator): keys of unknown providers.
# Model names ("qwen2.5-72b-instruct-awq") and ids split by hyphens stay readable.
_OPAQUE = re.compile(r"[A-Za-z0-9]{20,}")
# Pieces of a known secret shorter than this are left alone (they say nothing useful).
_MIN_PIECE = 6


def redact(text: str, secrets: Iterable[str | None] = (), *, limit: int = MAX_CHARS) -> str:
    """`text` with secrets replaced by [redacted], on one line, at most `limit` characters."""
    known = [s for s in secrets if s and len(s) >= _MIN_PIECE]
    for secret in known:
        text = text.replace(secret, REDACTED)
    if known:
        text = re.sub(
            rf"[A-Za-z0-9_\-.]{{{_MIN_PIECE},}}",
            lambda m: REDACTED if any(m.group(0) in s for s in known) else m.group(0),
            text,
        )
    text = _KEY_SHAPES.sub(REDACTED, text)
    text = _MASKED.sub(REDACTED, text)
    text = _NAMED.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    text = _OPAQUE.sub(lambda m: REDACTED if _mixes_letters_and_digits(m.group(0)) else m.group(0), text)
    text = " ".join(text.split())  # one log line, whatever the endpoint sent
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return text


def _mixes_letters_and_digits(token: str) -> bool:
    return any(c.isdigit() for c in token) and any(c.isalpha() for c in token)
