"""Export and import of a conversation (PROTOCOL.md section 6).

JSON is lossless: `{"conversation": {...}, "events": [<event frame>...]}`, each frame as the
client receives it plus `ts`. Importing it makes a new conversation of the importing user
with the same events (new conversation and run ids; seqs and every other field kept).

An import is untrusted input from a user: `parse_import` checks all of it before anything is
written, and refuses with an `ImportRefused` naming the first problem. Event fields this
module does not know (those later versions add) are kept as they are, but must be JSON
values with clean text; the known ones must have their types; the log must be what the
server itself writes: seqs 1..N without gap, each run's events together, a user_message
first and exactly one `complete` last (so no run is imported as running), every tool call
ended once.

Markdown is a readable transcript: the messages and answers as they are, thinking and tool
calls folded in <details> blocks, edited messages and regenerated answers marked as versions.
"""

from __future__ import annotations

import html
import json
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from chat.agent.events import RunStatus

from . import nesting
from .client_time import BadTime, parse_client_time
from .text import invalid_reason
from .versions import TurnVersion, depth_first, tree

EVENT_TYPES: dict[str, dict[str, type | tuple[type, ...]]] = {
    "user_message": {"content": str},
    "thinking": {"content": str},
    "text": {"content": str},
    "tool_start": {"toolName": str, "toolCallId": str, "arguments": str},
    "tool_end": {"toolName": str, "toolCallId": str, "result": str, "isError": bool, "durationMs": int},
    "error": {"code": str, "message": str, "detail": str},
    "complete": {"status": str},
    "reference": {"references": list},
    "approval_request": {"toolCallId": str, "toolName": str, "arguments": str},
    "approval_result": {"toolCallId": str, "decision": str},
}
RUN_STATUSES = {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.INTERRUPTED}
# Fields some events carry optionally, with their types; any other field is kept as JSON.
OPTIONAL_FIELDS: dict[str, type | tuple[type, ...]] = {
    "durationMs": int,
    "usage": dict,
    "resumed": bool,
    "ts": str,
    "attachments": list,
}
FRAME_COLUMNS = ("seq", "runId", "ts")  # columns of an Event row, not payload
_FIELD_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
MAX_RUN_ID_CHARS = 100
MAX_DEPTH = 20


class ImportRefused(ValueError):
    def __init__(self, message: str, *, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass
class ImportedRun:
    events: list[tuple[int, dict[str, Any], datetime | None]] = field(default_factory=list)  # seq, payload, ts
    status: str = ""


@dataclass
class Imported:
    title: str
    runs: list[ImportedRun]


def _check_text(value: Any, where: str, depth: int = 0) -> None:
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
            _check_text(key, where, depth + 1)
            _check_text(item, where, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_text(item, where, depth + 1)


def _is(value: Any, kind: type | tuple[type, ...]) -> bool:
    # bool is an int in Python, never in the protocol.
    if isinstance(value, bool) and kind is not bool:
        return False
    return isinstance(value, kind)


def _is_attachment(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and isinstance(item.get("path"), str)
        and bool(item["path"])
        and _is(item.get("size"), int)
        and 0 <= item["size"] < 2**63
        and isinstance(item.get("textPath", ""), str)
    )


def _timestamp(value: str, where: str) -> datetime:
    try:
        return parse_client_time(value)
    except BadTime as exc:
        raise ImportRefused(f"{where}: ts {exc}") from None


def parse_import(raw: bytes) -> Imported:
    """The conversation a JSON export holds, checked through; ImportRefused otherwise."""
    try:
        data = nesting.loads(raw)
    except nesting.TooDeep as exc:
        raise ImportRefused(f"the file is {exc}") from None
    except ValueError:  # UnicodeDecodeError is one
        raise ImportRefused("the file is not valid JSON (UTF-8)") from None
    if not isinstance(data, dict) or not isinstance(data.get("conversation"), dict):
        raise ImportRefused('the file must be a JSON object with "conversation" (an object) and "events" (a list)')
    if not isinstance(data.get("events"), list):
        raise ImportRefused('"events" must be a list')
    extra = set(data) - {"conversation", "events"}
    if extra:
        raise ImportRefused(f"unknown top-level field {sorted(extra)[0]!r}")
    title = data["conversation"].get("title", "")
    if not isinstance(title, str):
        raise ImportRefused("conversation.title must be a string")
    if len(title) > 200:
        raise ImportRefused("conversation.title is longer than 200 characters")
    _check_text(title, "conversation.title")
    if not data["events"]:
        raise ImportRefused("the conversation has no events")

    runs: list[ImportedRun] = []
    run_ids: set[str] = set()
    current_id: str | None = None
    for index, frame in enumerate(data["events"]):
        where = f"events[{index}]"
        if not isinstance(frame, dict):
            raise ImportRefused(f"{where} is not an object")
        seq, run_id, kind = frame.get("seq"), frame.get("runId"), frame.get("type")
        if not _is(seq, int) or seq != index + 1:
            raise ImportRefused(f"{where}: seq must be {index + 1} (seqs run 1, 2, 3, ... without gap)")
        if not isinstance(run_id, str) or not run_id or len(run_id) > MAX_RUN_ID_CHARS:
            raise ImportRefused(f"{where}: runId must be a non-empty string")
        if kind not in EVENT_TYPES:
            raise ImportRefused(f"{where}: unknown event type {str(kind)[:40]!r}")
        for name, kind_of in EVENT_TYPES[kind].items():
            if name not in frame:
                raise ImportRefused(f"{where} ({kind}) lacks {name}")
            if not _is(frame[name], kind_of):
                raise ImportRefused(f"{where} ({kind}): {name} has the wrong type")
        for name, value in frame.items():
            if not isinstance(name, str) or not _FIELD_NAME.fullmatch(name):
                raise ImportRefused(f"{where}: field name {str(name)[:40]!r} is not allowed")
            if name in OPTIONAL_FIELDS and name not in EVENT_TYPES[kind] and not _is(value, OPTIONAL_FIELDS[name]):
                raise ImportRefused(f"{where} ({kind}): {name} has the wrong type")
        _check_text(frame, where)
        if kind == "reference" and not all(
            isinstance(ref, dict) and all(isinstance(v, str) for v in ref.values()) for ref in frame["references"]
        ):
            raise ImportRefused(f"{where}: references must be objects of strings")
        if "attachments" in frame and not all(_is_attachment(item) for item in frame["attachments"]):
            raise ImportRefused(f'{where}: attachments must be objects with "path" (a string) and "size" (an integer)')
        ts = _timestamp(frame["ts"], where) if "ts" in frame else None

        if run_id != current_id:
            if runs and not runs[-1].status:
                raise ImportRefused(f"{where}: the run before it has no complete event (a run left running)")
            if run_id in run_ids:
                raise ImportRefused(f"{where}: the events of run {run_id[:40]!r} are not together")
            if kind != "user_message":
                raise ImportRefused(f"{where}: a run must begin with user_message")
            run_ids.add(run_id)
            runs.append(ImportedRun())
            current_id = run_id
        run = runs[-1]
        if run.status:
            raise ImportRefused(f"{where}: an event after its run's complete")
        if kind == "tool_end" and not 0 <= frame["durationMs"] < 2**31:
            raise ImportRefused(f"{where}: durationMs out of range")
        if kind == "complete":
            if frame["status"] not in RUN_STATUSES:
                raise ImportRefused(f"{where}: complete status must be one of {sorted(RUN_STATUSES)}")
            run.status = frame["status"]
        payload = {k: v for k, v in frame.items() if k not in FRAME_COLUMNS}
        run.events.append((seq, payload, ts))
    if not runs[-1].status:
        raise ImportRefused("the last run has no complete event (a run left running)")
    for run in runs:
        _check_tool_calls(run)
    return Imported(title=title, runs=runs)


def _check_tool_calls(run: ImportedRun) -> None:
    started: set[str] = set()
    ended: set[str] = set()
    for seq, payload, _ in run.events:
        call_id = payload.get("toolCallId")
        if payload["type"] == "tool_start":
            if call_id in started:
                raise ImportRefused(f"seq {seq}: tool call {call_id[:40]!r} started twice")
            started.add(call_id)
        elif payload["type"] == "tool_end":
            if call_id in ended:
                raise ImportRefused(f"seq {seq}: tool call {call_id[:40]!r} ended twice")
            ended.add(call_id)
    # A call refused at approval ends without a start; a started one must end.
    if started - ended:
        raise ImportRefused(f"tool call {sorted(started - ended)[0][:40]!r} never ended")


# Characters no file name may hold on Windows, macOS or Linux, and what a shell or a download
# bar would misread; each becomes a space.
_UNSAFE_IN_NAME = re.compile(r'[\\/:*?"<>|]+')
EXPORT_NAME_CHARS = 80


def export_filename(*, conversation, suffix: str) -> str:
    """The download's name: the conversation's title as a file name (no control characters,
    no path separators or characters a file system refuses, no leading dot, at most
    EXPORT_NAME_CHARS), else `conversation-<id prefix>` for an untitled or unnameable one."""
    title = "".join(" " if unicodedata.category(ch).startswith("C") else ch for ch in conversation.title)
    name = " ".join(_UNSAFE_IN_NAME.sub(" ", title).split())[:EXPORT_NAME_CHARS].strip(" .")
    return f"{name or f'conversation-{str(conversation.pk)[:8]}'}.{suffix}"


def export_json(*, conversation, frames: list[dict[str, Any]]) -> bytes:
    document = {
        "conversation": {
            "id": str(conversation.pk),
            "title": conversation.title,
            "created_at": conversation.created_at.isoformat(),
            "updated_at": conversation.updated_at.isoformat(),
        },
        "events": frames,
    }
    return json.dumps(document, ensure_ascii=False, indent=1).encode()


def _fence(text: str, info: str = "") -> str:
    """A fenced code block that the text cannot close: longer than any backtick run in it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    marks = "`" * max(3, longest + 1)
    return f"{marks}{info}\n{text}\n{marks}"


def _code(text: str) -> str:
    """An inline code span that the text cannot close."""
    marks = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{marks}{pad}{text}{pad}{marks}"


def _pretty(arguments: str) -> tuple[str, str]:
    shown = nesting.indented(arguments)
    return (arguments, "") if shown is None else (shown, "json")


def export_markdown(*, conversation, frames: list[dict[str, Any]]) -> str:
    """Every turn, each version followed by what continued from it (chat.versions), its headings
    saying which version it is: an edited message, a regenerated answer (whose question is not
    repeated)."""
    title = " ".join(conversation.title.split()) or "Conversation"
    out = [f"# {title}", "", f"*Exported from agentsite; started {conversation.created_at:%Y-%m-%d %H:%M} UTC.*"]
    runs: dict[Any, list[dict[str, Any]]] = {}
    for frame in frames:
        runs.setdefault(frame["runId"], []).append(frame)
    heads = {events[0]["seq"]: events for events in runs.values() if events[0]["type"] == "user_message"}
    children, versions = tree([events[0] for events in heads.values()])
    # A run without a user_message first (no log the server writes or imports) comes first.
    order = sorted(
        (events for events in runs.values() if events[0]["type"] != "user_message"), key=lambda e: e[0]["seq"]
    )
    order += [heads[seq] for seq in depth_first(children)]
    for events in order:
        _markdown_run(out, events, versions.get(events[0]["seq"]))
    return "\n".join(out) + "\n"


def _headings(version: TurnVersion | None) -> tuple[str | None, str]:
    """The run's "## You" heading (None: a regenerated answer, whose question stands above it)
    and its "## Assistant" heading."""
    if version is None:
        return "## You", "## Assistant"
    you = "## You"
    if version.edited:
        you += f" (edited: version {version.question} of {version.questions})"
    elif version.questions > 1:
        you += f" (version {version.question} of {version.questions})"
    assistant = "## Assistant"
    if version.answers > 1:
        assistant += f" (answer {version.answer} of {version.answers})"
    return (you if version.answer == 1 else None), assistant


def _markdown_run(out: list[str], events: list[dict[str, Any]], version: TurnVersion | None) -> None:
    text: list[str] = []
    thinking: list[str] = []
    starts: dict[str, dict[str, Any]] = {}
    you, assistant = _headings(version)

    def flush() -> None:
        if thinking:
            out.extend(["", "<details><summary>Thinking</summary>", "", "".join(thinking).strip(), "", "</details>"])
            thinking.clear()
        if text:
            out.extend(["", "".join(text).strip()])
            text.clear()

    for index, frame in enumerate(events):
        kind = frame["type"]
        if kind not in ("text", "thinking"):
            flush()
        if kind == "user_message":
            out.extend(["", "---"])
            if index == 0 and you is None:  # a regenerated answer: its question is above
                out.extend(["", assistant])
                continue
            out.extend(["", you or "## You", "", frame["content"]])
            out.extend(
                f"- Attached: {_code(attachment['path'])} ({attachment['size']} bytes)"
                for attachment in frame.get("attachments") or []
            )
            out.extend(["", assistant if index == 0 else "## Assistant"])
        elif kind == "text":
            if thinking:
                flush()
            text.append(frame["content"])
        elif kind == "thinking":
            if text:
                flush()
            thinking.append(frame["content"])
        elif kind in ("tool_start", "approval_request"):  # a call denied at approval never starts
            starts[frame["toolCallId"]] = frame
        elif kind == "tool_end":
            start = starts.get(frame["toolCallId"], {})
            arguments, info = _pretty(start.get("arguments", ""))
            failed = " (error)" if frame.get("isError") else ""
            out.extend(
                [
                    "",
                    f"<details><summary>Tool call: {html.escape(frame['toolName'])}{failed}</summary>",
                    "",
                    "Arguments:",
                    "",
                    _fence(arguments, info),
                    "",
                    "Result:",
                    "",
                    _fence(frame["result"]),
                    "",
                    "</details>",
                ]
            )
        elif kind == "error":
            out.extend(["", f"> **{frame['code']}**: {' '.join(frame['message'].split())}"])
        elif kind == "reference":
            out.append("")
            out.extend(f"- [{ref.get('title') or ref.get('url')}]({ref.get('url', '')})" for ref in frame["references"])
        elif kind == "complete" and frame["status"] != RunStatus.SUCCEEDED:
            out.extend(["", f"*The run ended: {frame['status']}.*"])
    flush()
