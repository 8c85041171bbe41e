"""The versions of a conversation's turns, read from their user_messages (docs/protocol.md, "Versions: edits, regenerated answers and branches") by
the same rule as the chat page (static/chat/versions.js), for the readers on the server (the
Markdown export). Both readers are held to one statement of the shape, tests/eventlog/version_trees.json.

Turns that follow the same turn (the same `parentSeq`) are versions of one another, in seq
order. An edit makes a version of the *question*; a regenerate makes a version of the *answer*
to the question it repeats: the regenerates of a message (and of its regenerates) belong to
that message's question. So a turn is "question i of n" among its siblings' questions and
"answer j of m" among its question's answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chat.eventlog.history import UserMessageRow, parents_of


@dataclass(frozen=True)
class TurnVersion:
    question: int  # 1-based, among the questions that follow the same turn
    questions: int
    answer: int  # 1-based, among the answers to its question
    answers: int
    edited: bool  # its user_message is an edit


def tree(heads: Sequence[Mapping[str, Any]]) -> tuple[dict[int | None, list[int]], dict[int, TurnVersion]]:
    """({parent seq (None for the first turns): child seqs, question by question}, {seq: its version})
    of the given user_messages, in seq order. A parent that is not an earlier user_message of
    the list (a damaged log) makes a first turn, as the page reads it."""
    rows = [(head["seq"], head.get("runId"), head.get("parentSeq"), "parentSeq" in head) for head in heads]
    parents = parents_of(rows)
    by_seq = {head["seq"]: head for head in heads}
    children: dict[int | None, list[int]] = {}
    question_of: dict[int, int] = {}
    for head in heads:
        seq, parent = head["seq"], parents[head["seq"]]
        if parent is not None and (parent >= seq or parent not in by_seq):
            parent = None
        parents[seq] = parent
        children.setdefault(parent, []).append(seq)
        repeated = head.get("regenerates")
        # A regenerate of a sibling answers that sibling's question again.
        same_turn = isinstance(repeated, int) and repeated in question_of and parents.get(repeated) == parent
        question_of[seq] = question_of[repeated] if same_turn else seq
    versions: dict[int, TurnVersion] = {}
    for siblings in children.values():
        questions = list(dict.fromkeys(question_of[seq] for seq in siblings))
        for seq in siblings:
            answers = [other for other in siblings if question_of[other] == question_of[seq]]
            versions[seq] = TurnVersion(
                questions.index(question_of[seq]) + 1,
                len(questions),
                answers.index(seq) + 1,
                len(answers),
                "edits" in by_seq[seq],
            )
        # Read in this order, a question's answers stand together.
        siblings.sort(key=lambda seq: (versions[seq].question, seq))
    return children, versions


def depth_first(children: Mapping[int | None, list[int]]) -> list[int]:
    """Every turn once, each version followed by the turns that continued from it."""
    order: list[int] = []
    stack = list(reversed(children.get(None, [])))
    while stack:
        seq = stack.pop()
        order.append(seq)
        stack.extend(reversed(children.get(seq, [])))
    return order


def turn_parents(rows: Sequence[UserMessageRow]) -> dict[int, int | None]:
    """{seq: the turn it follows} of the user_messages, given in seq order, as the page places
    them: a parent that is not an earlier user_message of the list (a damaged log) makes a
    first turn."""
    placed = parents_of(rows)
    return {
        seq: parent if parent is not None and parent < seq and parent in placed else None
        for seq, parent in placed.items()
    }


def viewed_leaf(rows: Sequence[UserMessageRow], target: int | None) -> int | None:
    """The last turn of the branch the chat page shows through `target` (static/chat/versions.js,
    layout): below it, at each turn, the version whose subtree holds the newest turn. None as
    `target`: the newest turn (the page's default); None back when there is no turn."""
    up = turn_parents(rows)
    if target is None:
        target = max(up, default=None)
    children: dict[int, list[int]] = {}
    for seq, parent in up.items():
        if parent is not None:
            children.setdefault(parent, []).append(seq)
    # A turn's children come after it: newest first, a subtree is summed before its root.
    newest: dict[int, int] = {}
    for seq in sorted(up, reverse=True):
        newest[seq] = max([seq, *(newest[child] for child in children.get(seq, []))])
    leaf = target
    while leaf is not None and children.get(leaf):
        leaf = max(children[leaf], key=newest.__getitem__)
    return leaf


def ancestry(parents_by_seq: Mapping[int, int | None], seq: int | None) -> list[int]:
    """The turns of the branch that ends at `seq`, first turn first."""
    chain: list[int] = []
    while seq is not None and seq in parents_by_seq:
        chain.append(seq)
        seq = parents_by_seq[seq]
    return chain[::-1]
