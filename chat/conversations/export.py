"""Export of a conversation (docs/protocol.md, "Export and import"): the JSON file that import reads back,
and a Markdown transcript that follows the conversation's versions."""

from __future__ import annotations

import html
import json
import re
import unicodedata
from typing import Any

from chat import nesting
from chat.agent.events import RunStatus
from chat.eventlog.frames import CHILD_KEY
from chat.eventlog.versions import TurnVersion, depth_first, tree

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


def conversation_fields(conversation) -> dict[str, Any]:
    """The `conversation` object of an export (its `events` follow it)."""
    return {
        "id": str(conversation.pk),
        "title": conversation.title,
        "titleSource": conversation.title_source,
        "pinned": conversation.pinned,
        "archived": conversation.archived,
        "created_at": conversation.created_at.isoformat(),
        "updated_at": conversation.updated_at.isoformat(),
    }


def export_document(*, conversation, frames: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON export of one conversation, as an object (import reads it back)."""
    return {"conversation": conversation_fields(conversation), "events": frames}


def export_json(*, conversation, frames: list[dict[str, Any]]) -> bytes:
    return json.dumps(export_document(conversation=conversation, frames=frames), ensure_ascii=False, indent=1).encode()


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
    """Every turn, each version followed by what continued from it (chat.eventlog.versions), its headings
    saying which version it is: an edited message, a regenerated answer (whose question is not
    repeated)."""
    title = " ".join(conversation.title.split()) or "Conversation"
    out = [f"# {title}", "", f"*Exported from agentsite; started {conversation.created_at:%Y-%m-%d %H:%M} UTC.*"]
    runs: dict[Any, list[dict[str, Any]]] = {}
    for frame in frames:
        if CHILD_KEY in frame:  # a child run: its parent's delegate call and result show it
            continue
        if frame["runId"] is not None:  # queued, unqueued: what waited shows as the turn it started
            runs.setdefault(frame["runId"], []).append(frame)
    heads = {events[0]["seq"]: events for events in runs.values() if events[0]["type"] == "user_message"}
    children, versions = tree([events[0] for events in heads.values()])
    summaries = _compactions(frames)
    # A run without a user_message first: a compaction run (on demand), shown only by its summary
    # row; any other (no log the server writes or imports) comes first.
    order = sorted(
        (
            events
            for events in runs.values()
            if events[0]["type"] != "user_message" and not any(_compacting(frame) for frame in events)
        ),
        key=lambda e: e[0]["seq"],
    )
    order += [heads[seq] for seq in depth_first(children)]
    for events in order:
        _markdown_run(out, events, versions.get(events[0]["seq"]))
        for frame in events:
            out.extend(_summary_row(compaction) for compaction in summaries.pop(frame["seq"], []))
    return "\n".join(out) + "\n"


def _compacting(frame: dict[str, Any]) -> bool:
    return frame["type"] == "compaction" or (frame["type"] == "error" and frame["code"] == "COMPACTION_FAILED")


def _compactions(frames: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """The compactions by the seq they follow: the last event of the newest turn they summarized
    (`throughSeq`), as the chat page draws them; their own seq if that event is not in the log."""
    seqs = {frame["seq"] for frame in frames}
    placed: dict[int, list[dict[str, Any]]] = {}
    for frame in frames:
        if frame["type"] == "compaction" and CHILD_KEY not in frame:
            after = frame["throughSeq"] if frame.get("throughSeq") in seqs else frame["seq"]
            placed.setdefault(after, []).append(frame)
    return placed


def _summary_row(compaction: dict[str, Any]) -> str:
    """ "Earlier conversation summarized", folded, opening to the summary (as a thinking block is)."""
    turns = compaction.get("turns") or 0
    count = "1 turn" if turns == 1 else f"{turns} turns"
    summary = str(compaction.get("summary", "")).strip()
    return f"\n---\n\n<details><summary>Earlier conversation summarized ({count})</summary>\n\n{summary}\n\n</details>"


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
