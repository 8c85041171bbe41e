"""The model's memory, derived from the event log (never stored twice).

A conversation's earlier runs become OpenAI chat messages: the user message,
each tool round as an assistant message with its tool_calls followed by the
tool results (in call order; a call denied at approval has its denial as
result), and the answer. Thinking is left out: providers
such as DeepSeek refuse reasoning sent back as input. The text of a failed
attempt (a failed model call, or one whose process died before a resume) is left
out too, as chat.agent.answer decides: the retry answered again from the start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chat.agent.answer import without_discarded
from chat.eventlog.frames import CHILD_KEY


def attachments_note(event: Mapping[str, Any]) -> str:
    """What the model is told of the files a user_message carries (docs/protocol.md, "Attachments"): a line
    after the message, so that it reads them with its file tools. Derived from the event, so
    every later turn's memory says it the same way."""
    attachments = event.get("attachments")
    if not isinstance(attachments, list) or not attachments:
        return ""
    described = []
    for attachment in attachments:
        if not isinstance(attachment, dict) or not isinstance(attachment.get("path"), str):
            continue  # a damaged or forged log
        text_path = attachment.get("textPath")
        extra = f"; its text is in {text_path}" if isinstance(text_path, str) else ""
        described.append(f"{attachment['path']} ({attachment.get('size', '?')} bytes{extra})")
    if not described:
        return ""
    return "\n\n[Attached files in your workspace (read them with read_file): " + ", ".join(described) + "]"


def attached_images(event: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The images among a user_message's files (docs/protocol.md, "Images"), as references
    [{"path"}] that the memory keeps: chat.runtime.image_parts turns them into image parts when
    the request is built, so no event or checkpoint holds the image itself."""
    attachments = event.get("attachments")
    if not isinstance(attachments, list):
        return []
    return [
        {"path": a["path"]}
        for a in attachments
        if isinstance(a, dict) and isinstance(a.get("path"), str) and isinstance(a.get("image"), dict)
    ]


def recorded_history(event: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The earlier messages a user_message carries as `history`, each {"role", "content"} and, on
    a user's, the `attachments` its images became: an OpenAI-compatible request's messages
    before its last user message (docs/protocol.md, "OpenAI-compatible endpoint"). A user's
    files are told and shown as a user_message's are, so a model sees an earlier image of the
    request as it sees an earlier turn's."""
    recorded = event.get("history")
    if not isinstance(recorded, list):
        return []
    return [
        user_turn(m) if m["role"] == "user" else {"role": m["role"], "content": m["content"]}
        for m in recorded
        if isinstance(m, dict)
        and m.get("role") in ("system", "user", "assistant")
        and isinstance(m.get("content"), str)
    ]


def user_turn(message: Mapping[str, Any]) -> dict[str, Any]:
    """A user's message (a user_message, or a user's item of its `history`) as the memory holds
    it: the text with the attachments line, and the references of its images."""
    # Files sent alone: the note is the whole message.
    text = message["content"] + attachments_note(message) if message["content"] else attachments_note(message).lstrip()
    turn: dict[str, Any] = {"role": "user", "content": text}
    shown = attached_images(message)
    if shown:
        turn["images"] = shown
    return turn


def run_messages(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One run's chat messages, from its events in order (thinking may be left out: unread). The
    events of child runs among a top-level run's are no part of it (docs/protocol.md, "Sub-agents"):
    its model saw a child only as its delegate call's result."""
    if events and CHILD_KEY not in events[0]:
        events = [event for event in events if CHILD_KEY not in event]
    messages: list[dict[str, Any]] = []
    text: list[str] = []
    calls: list[dict[str, Any]] = []
    results: dict[str, str] = {}
    steers: dict[str, str] = {}  # queueId -> content, of the run's `steer` events

    def close_round() -> None:
        nonlocal text, calls, results
        if calls:
            messages.append(
                {
                    "role": "assistant",
                    "content": "".join(text) or None,
                    "tool_calls": [
                        {
                            "id": c["toolCallId"],
                            "type": "function",
                            "function": {"name": c["toolName"], "arguments": c["arguments"]},
                        }
                        for c in calls
                    ],
                }
            )
            for call in calls:
                # A call that never ended (a crash mid-tool) still needs an answer for the model.
                content = results.get(call["toolCallId"], '{"error": "the tool did not finish"}')
                messages.append({"role": "tool", "tool_call_id": call["toolCallId"], "content": content})
        elif text:
            messages.append({"role": "assistant", "content": "".join(text)})
        text, calls, results = [], [], {}

    for event in without_discarded(events):
        kind = event["type"]
        if kind == "user_message":
            close_round()
            messages.extend(recorded_history(event))
            messages.append(user_turn(event))
        elif kind == "text":
            if calls and len(results) == len(calls):
                close_round()  # the text after a tool round starts the next assistant message
            text.append(event["content"])
        elif kind in ("tool_start", "approval_request"):
            # A call that waited for approval is in the round from its request on (a denied one
            # never starts); its tool_start, if approved, is the same call.
            if any(c["toolCallId"] == event["toolCallId"] for c in calls) and event["toolCallId"] not in results:
                continue
            if calls and len(results) == len(calls):
                close_round()
            calls.append(event)
        elif kind == "tool_end":
            results[event["toolCallId"]] = event["result"]
        elif kind == "steer":
            steers[event["queueId"]] = event["content"]
        elif kind == "steer_applied" and event["queueId"] in steers:
            # Where the run took the steer in, the model was sent it as a user message.
            close_round()
            messages.append({"role": "user", "content": steers[event["queueId"]]})
    close_round()
    return messages


# -- branches (docs/protocol.md, "Versions: edits, regenerated answers and branches") ---------------------------------------------------------
# A user_message row of the branch walk: (seq, runId, parentSeq, whether the payload has
# parentSeq at all). Messages stored before versions existed have none: they follow the
# user_message before them, so an old conversation is one linear branch.
UserMessageRow = tuple[int, Any, int | None, bool]


def parents_of(rows: Sequence[UserMessageRow]) -> dict[int, int | None]:
    """{seq: parentSeq} of a conversation's user_messages, given in seq order."""
    parents: dict[int, int | None] = {}
    previous: int | None = None
    for seq, _, parent, has_parent in rows:
        if not has_parent:
            parent = previous
        elif not isinstance(parent, int) or isinstance(parent, bool):
            parent = None  # not a seq (an imported or damaged log): a first turn
        parents[seq] = parent
        previous = seq
    return parents


def branch_run_ids(rows: Sequence[UserMessageRow], *, run_id: Any) -> list[Any]:
    """The runs of the branch that leads to `run_id`, oldest first: its user_message, then the
    turn before it on its branch, and so on back to the first turn. A parent that is not an
    earlier user_message (a damaged or forged log) ends the walk instead of looping."""
    parents = parents_of(rows)
    runs = {seq: rid for seq, rid, _, _ in rows}
    seq = next((s for s, rid, _, _ in reversed(rows) if str(rid) == str(run_id)), None)
    branch: list[Any] = []
    while seq is not None and seq in runs:
        branch.append(runs[seq])
        parent = parents[seq]
        seq = parent if parent is not None and parent < seq else None
    return branch[::-1]
