"""What a shared link shows (docs/protocol.md, "Shared links"): the branch its owner was looking
at when the link was made, up to the last finished answer then, under the title it had then.

A link keeps its branch as the branch's last turn up to `up_to_seq` (`leaf_seq`). The turns a
turn follows never change (the log is append-only and a turn's parentSeq is written with it),
so the snapshot stays the same however the conversation goes on: renamed, edited, continued.

The snapshot's events are numbered again from 1, so that the page and a copy (an import, which
wants seqs without a gap) read one log complete in itself: each user_message names the turn it
follows by its new seq, and `edits` / `regenerates`, which name a version of its turn, so never
a turn of the branch, are left out.
"""

from __future__ import annotations

from typing import Any

from chat.eventlog.frames import CHILD_KEY, EventFrame
from chat.eventlog.reads import user_message_rows
from chat.eventlog.versions import ancestry, turn_parents, viewed_leaf
from chat.exceptions import NotAUserMessage
from chat.models import Conversation

# Fields of a user_message that name a version of its turn (not in a snapshot of one branch).
VERSION_FIELDS = ("edits", "regenerates")


def snapshot_leaf(*, conversation: Conversation, up_to: int, leaf_seq: int | None) -> int | None:
    """The last turn, at most `up_to`, of the branch the owner looks at: the one through
    `leaf_seq` when the client names it, else through the version the owner chose to view
    (`viewed_seq`), else the newest branch, each followed down as the chat page does. None when
    that branch has no turn up to `up_to`; NotAUserMessage when `leaf_seq` names no turn."""
    rows = user_message_rows(conversation_ids=[conversation.pk]).get(conversation.pk, [])
    parents = turn_parents(rows)
    if leaf_seq is not None and leaf_seq not in parents:
        raise NotAUserMessage(f"seq {leaf_seq} is not a user_message of this conversation")
    target = leaf_seq if leaf_seq is not None else conversation.viewed_seq
    chain = ancestry(parents, viewed_leaf(rows, target if target in parents else None))
    # A turn comes after the one it follows: the branch up to `up_to` is a beginning of it.
    shared = [seq for seq in chain if seq <= up_to]
    return shared[-1] if shared else None


def branch_frames(frames: list[EventFrame], *, leaf_seq: int) -> list[dict[str, Any]]:
    """Of a conversation's frames (up to the snapshot's end), those of the branch that ends at
    `leaf_seq`, numbered again from 1."""
    heads = [frame for frame in frames if frame["type"] == "user_message" and CHILD_KEY not in frame]
    parents = turn_parents([(f["seq"], f["runId"], f.get("parentSeq"), "parentSeq" in f) for f in heads])
    branch = set(ancestry(parents, leaf_seq))
    runs = {frame["runId"] for frame in heads if frame["seq"] in branch}
    for frame in frames:  # with their child runs (docs/protocol.md, "Sub-agents"), which start after them
        if frame.get(CHILD_KEY) in runs:
            runs.add(frame["runId"])
    kept = [frame for frame in frames if frame["runId"] in runs]
    new_seq = {frame["seq"]: index for index, frame in enumerate(kept, 1)}
    shown: list[dict[str, Any]] = []
    for frame in kept:
        old = frame["seq"]
        frame = {**frame, "seq": new_seq[old]}
        if frame["type"] == "user_message" and CHILD_KEY not in frame:
            parent = parents[old]
            frame["parentSeq"] = new_seq[parent] if parent is not None else None
            for name in VERSION_FIELDS:
                frame.pop(name, None)
        shown.append(frame)
    return shown
