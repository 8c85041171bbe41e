"""Text that can be stored and sent: valid UTF-8, without NUL.

A Python str can hold what no UTF-8 byte string can: lone surrogates
(U+D800-U+DFFF, from a JSON escape such as "\\ud800" or a page decoded with
utf-7 or unicode_escape). orjson, msgpack and the database drivers refuse them,
so one stored surrogate broke every later replay of its conversation.
PostgreSQL also refuses NUL in text and jsonb.

Two answers, one test of what is bad:
- `invalid_reason` for what a user sends (a message, a title): refused at the
  edge with a clear error, so nothing the user typed is silently changed;
- `clean` / `clean_value` for what the server produces or fetches (model text,
  tool results, file contents, pages): each bad character becomes U+FFFD, so the
  rest is kept and the damage stays visible.

Django-free: the agent core uses it too.
"""

from __future__ import annotations

import re
from typing import Any

REPLACEMENT = "\ufffd"

_BAD = re.compile("[\x00\ud800-\udfff]")


def invalid_reason(text: str) -> str | None:
    """Why `text` cannot be stored as it is ("a NUL character at position 3"), or None."""
    match = _BAD.search(text)
    if match is None:
        return None
    char = match.group()
    what = "a NUL character" if char == "\x00" else f"a lone surrogate (U+{ord(char):04X})"
    return f"{what} at position {match.start()}"


def clean(text: str) -> str:
    """`text` with each NUL and lone surrogate replaced by U+FFFD (a surrogate pair that
    arrived as two code points, e.g. from unicode_escape, is joined into its character)."""
    if text.isascii():  # the common case, and a fast one
        return text.replace("\x00", REPLACEMENT) if "\x00" in text else text
    if _BAD.search(text) is None:
        return text
    # UTF-16 with surrogatepass turns the code points back into code units; decoding them
    # joins the valid pairs and replaces the lone ones.
    text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text.replace("\x00", REPLACEMENT)


def clean_value(value: Any) -> Any:
    """`clean` applied to every string in a JSON-like value (dict keys and nested values too)."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {clean(k) if isinstance(k, str) else k: clean_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_value(v) for v in value]
    return value
