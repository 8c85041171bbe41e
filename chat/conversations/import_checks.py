"""The checks of an imported file's values (chat.conversations.importing): text that can be
stored, nesting, numbers, attachments, times; every refusal an ImportRefused."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from chat import nesting
from chat.agent.text import invalid_reason
from chat.conversations.client_time import BadTime, parse_client_time

MAX_DEPTH = 20


class ImportRefused(ValueError):
    def __init__(self, message: str, *, status: int = 400):
        super().__init__(message)
        self.status = status


def check_text(value: Any, where: str, depth: int = 0) -> None:
    """Every value storable and sendable: text without NUL or lone surrogates, integers that
    fit 64 bits and finite numbers (msgpack, orjson and jsonb refuse the others); nesting
    bounded."""
    if depth > MAX_DEPTH:
        raise ImportRefused(f"{where} is nested too deeply")
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise ImportRefused(f"{where} holds an integer out of range")
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ImportRefused(f"{where} holds a number that is not finite")
    elif isinstance(value, str):
        reason = invalid_reason(value)
        if reason:
            raise ImportRefused(f"{where} contains text that cannot be stored: {reason}")
        # A string holding JSON (a tool call's arguments or result) is pretty-printed by pages.
        if nesting.holds_deep_json(value):
            raise ImportRefused(f"{where} holds JSON {nesting.TooDeep()}")
    elif isinstance(value, dict):
        for key, item in value.items():
            check_text(key, where, depth + 1)
            check_text(item, where, depth + 1)
    elif isinstance(value, list):
        for item in value:
            check_text(item, where, depth + 1)


def is_of(value: Any, kind: type | tuple[type, ...]) -> bool:
    # bool is an int in Python, never in the protocol.
    if isinstance(value, bool) and kind is not bool:
        return False
    return isinstance(value, kind)


def is_attachment(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and isinstance(item.get("path"), str)
        and bool(item["path"])
        and is_of(item.get("size"), int)
        and 0 <= item["size"] < 2**63
        and isinstance(item.get("textPath", ""), str)
    )


def timestamp_of(value: str, where: str) -> datetime:
    try:
        return parse_client_time(value)
    except BadTime as exc:
        raise ImportRefused(f"{where}: ts {exc}") from None


def check_compaction(frame: dict[str, Any], where: str) -> None:
    """A compaction's fields (docs/protocol.md, "Compaction"): the seqs it names are of events
    before it; its counts are not negative; it was made automatically or on demand."""
    for name in ("throughSeq", "previousSeq"):  # throughSeq is there (its type checked), previousSeq may be null
        value = frame.get(name)
        if value is not None and (not is_of(value, int) or not 1 <= value < frame["seq"]):
            raise ImportRefused(f"{where} (compaction): {name} must be the seq of an earlier event")
    for name in ("turns", "tokensBefore", "tokensAfter"):
        if frame[name] < 0:
            raise ImportRefused(f"{where} (compaction): {name} must not be negative")
    if frame["trigger"] not in ("auto", "manual"):
        raise ImportRefused(f"{where} (compaction): trigger must be auto or manual")
