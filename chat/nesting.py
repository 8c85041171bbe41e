"""How deep JSON may nest: one limit for what clients send, and pages that survive any value.

Python's parser and the indenting encoder recurse once per level, so a value nested tens
of thousands deep raises RecursionError wherever it is read: in a frame, an API body, an
imported file, or later, from a stored string that holds JSON (a tool call's `arguments`,
its `result`), on every page that pretty-prints it. So:

- `loads` reads what a client sends (WebSocket frames, API bodies, imports) and refuses,
  with `TooDeep`, JSON nested deeper than MAX_NESTING; an import refuses a string field
  holding such JSON too (`holds_deep_json`);
- `pretty` (and `indented`) show a stored string on a page: indented JSON within the limit,
  otherwise the text as it is, so that no stored value can break a page.

The depth is measured without recursing: a scan of the brackets outside JSON strings.
"""

from __future__ import annotations

import json
import re
from typing import Any

# Far deeper than any real payload, and well inside what the parser and the encoder manage
# below Django's and daphne's own stack.
MAX_NESTING = 512

# A JSON string (escapes included; unterminated: to the end) or a bracket.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]')


class TooDeep(ValueError):
    def __init__(self) -> None:
        super().__init__(f"nested deeper than {MAX_NESTING} levels")


def nesting(text: str | bytes) -> int:
    """The deepest bracket nesting of `text` outside JSON strings, counted up to one past
    MAX_NESTING (past it, how far does not matter)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    depth = deepest = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_NESTING:
                    break
        elif token in "]}":
            depth -= 1
    return deepest


def loads(text: str | bytes) -> Any:
    """json.loads for what a client sends: TooDeep past MAX_NESTING, ValueError when not JSON."""
    if nesting(text) > MAX_NESTING:
        raise TooDeep
    return json.loads(text)


def holds_deep_json(text: str) -> bool:
    """Whether a string is JSON (or begins as JSON does) nested past MAX_NESTING: a stored
    value no page could pretty-print."""
    return text.lstrip()[:1] in ("[", "{") and nesting(text) > MAX_NESTING


def indented(text: str) -> str | None:
    """A stored string as indented JSON; None when it is not JSON, or too deep to show as such."""
    if nesting(text) > MAX_NESTING:
        return None
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return None


def pretty(text: str | None) -> str:
    """A stored string for a page: JSON indented, anything else (too deep included) as it is;
    the template escapes either."""
    return (indented(text) or text) if text else ""
