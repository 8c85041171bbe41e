"""The log's one formatter (settings.LOGGING gives it to the one handler): what a request sends
cannot forge a line of the log.

A value from a request (a path, a provider's `error_description`, a file name) reaches a record
as an argument, inside a message a library built itself, or inside an exception's message. A
newline in it would start what looks like a record of its own, a carriage return would hide the
start of the line on a terminal, an escape sequence would repaint the terminal. So the formatted
message is escaped whole, whatever put the text there: control characters and line separators
become `\\n`, `\\r`, `\\x1b`, `\\u2028`... and a record is one line. An exception's traceback keeps
its own lines (they come from the code), while each exception's message in it is escaped.

One exception is a line the project's code adds under a record on purpose (`record.plain_line`,
serving/daphne_log.py: the page to open once the server listens); it is the code's own text.
"""

from __future__ import annotations

import logging
import traceback
import unicodedata

# What a terminal or a log reader takes as the end of a line or a command: C0 and C1 controls
# (categories Cc) and the Unicode line and paragraph separators.
_ESCAPED_CATEGORIES = {"Cc", "Zl", "Zp"}
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def escape(text: str) -> str:
    """`text` on one line, its control characters and line separators written as escapes."""
    if text.isprintable():  # the usual case, in C: no character to look at one by one
        return text
    return "".join(_escape_char(c) if unicodedata.category(c) in _ESCAPED_CATEGORIES else c for c in text)


class EscapingFormatter(logging.Formatter):
    def formatMessage(self, record: logging.LogRecord) -> str:
        # record.message is made anew by every format(): escaping it changes nothing kept.
        record.message = escape(record.message)
        text = super().formatMessage(record)
        plain_line = getattr(record, "plain_line", None)
        return f"{text}\n{plain_line}" if plain_line else text

    def formatException(self, ei) -> str:
        """The traceback's lines as Python writes them, each exception's message (with its
        notes) escaped onto its line."""
        if ei[1] is None:
            return super().formatException(ei)
        report = traceback.TracebackException(*ei)
        own_lines = set()
        for exc in _chain(report):
            own_lines.update(exc.format_exception_only())
        return "".join(
            escape(chunk.removesuffix("\n")) + "\n" if chunk in own_lines else chunk for chunk in report.format()
        ).removesuffix("\n")


def _chain(report: traceback.TracebackException):
    """Every exception a traceback shows at the start of its lines: the causes and contexts. (An
    exception group's members are drawn inside its margin, `  | `, where no line can pass for a
    record.)"""
    seen: set[int] = set()
    todo = [report]
    while todo:
        exc = todo.pop()
        if id(exc) in seen:
            continue
        seen.add(id(exc))
        yield exc
        todo += [e for e in (exc.__cause__, exc.__context__) if e is not None]
