"""A run's memory with compaction (docs/protocol.md, "Compaction"): which stored summary holds for
its branch, and how its messages are laid out for the agent's compactor (chat.agent.compaction).

A `compaction` event summarizes the turns of a branch up to the turn whose run holds the event
at its `throughSeq`. It holds for every branch that contains that turn: a run whose branch,
walked back from its parent, meets that turn starts from the summary and the turns after it,
never the summarized ones. When several hold, the first met (it covers the newest turn) is
used; of several summaries of the same turn, the newest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from chat.agent.compaction import EarlierTurn, Layout, Summary, summary_message
from chat.eventlog import history
from chat.models import RAW_PAYLOAD, Event, payload_of

Message = dict[str, Any]


@dataclass(frozen=True)
class Memory:
    """The messages a run starts from, and how they are made (its compactor's Layout)."""

    messages: list[Message]
    layout: Layout


def held_by_run(*, conversation_ids: Sequence[Any]) -> dict[Any, Summary]:
    """{run_id: the newest summary whose newest turn is that run's} over the conversations'
    compactions: two small queries, the second only when there are any."""
    rows = (
        Event.objects.filter(conversation_id__in=conversation_ids, type="compaction")
        .order_by("seq")
        .values_list("conversation_id", "seq", RAW_PAYLOAD)
    )
    found = []
    for conversation_id, seq, raw in rows:
        payload = payload_of(raw)
        through = payload.get("throughSeq")
        if isinstance(through, int) and isinstance(payload.get("summary"), str):
            found.append((conversation_id, through, Summary(payload["summary"], seq, int(payload.get("turns") or 0))))
    if not found:
        return {}
    where = Q()
    for conversation_id, through, _ in found:
        where |= Q(conversation_id=conversation_id, seq=through)
    runs = {
        (c, seq): run_id
        for c, seq, run_id in Event.objects.filter(where).values_list("conversation_id", "seq", "run_id")
    }
    held: dict[Any, Summary] = {}
    for conversation_id, through, summary in found:  # in seq order: the newest summary of a turn wins
        run_id = runs.get((conversation_id, through))
        if run_id is not None:
            held[run_id] = summary
    return held


def last_seqs(run_ids: Sequence[Any]) -> dict[Any, int]:
    """{run_id: the seq of its `complete`}: the `throughSeq` a compaction of its turn names."""
    if not run_ids:
        return {}
    return dict(Event.objects.filter(run_id__in=run_ids, type="complete").values_list("run_id", "seq"))


def memory_of(
    turns: Sequence[tuple[Any, list[Message], int | None]],
    own: list[Message],
    own_events: Sequence[Mapping[str, Any]],
    held: Mapping[Any, Summary],
) -> Memory:
    """The memory of a run from its branch's earlier `turns` (run, messages, seq of its last
    event; oldest first) and its `own` messages (made of `own_events`): the summary holding for
    the branch, the turns after it, then its own."""
    summary, start = None, 0
    for index in range(len(turns) - 1, -1, -1):
        if turns[index][0] in held:
            summary, start = held[turns[index][0]], index + 1
            break
    kept = turns[start:]
    pinned, recorded = (0, ()) if kept else _recorded_layout(own_events)
    messages = [summary_message(summary.text)] if summary else []
    messages += [message for _, turn, _ in kept for message in turn]
    layout = Layout(
        summary=summary,
        pinned=pinned,
        turns=tuple(EarlierTurn(len(turn), last) for _, turn, last in kept) + recorded,
        own=len(own) - pinned - sum(turn.size for turn in recorded),
    )
    return Memory(messages + own, layout)


def first_turn(events: Sequence[Mapping[str, Any]]) -> Memory:
    """The memory of a run with no earlier turn: its own messages (with an OpenAI-compatible
    request's history, laid out as turns to trim)."""
    return memory_of((), history.run_messages(events), events, {})


def _recorded_layout(own_events: Sequence[Mapping[str, Any]]) -> tuple[int, tuple[EarlierTurn, ...]]:
    """The `history` an OpenAI-compatible request's user_message carries, as the compactor sees
    it: its leading messages before the first user message pinned (a client's system prompt is
    never trimmed), then one turn per user message and what follows it."""
    head = next((event for event in own_events if event.get("type") == "user_message"), None)
    recorded = history.recorded_history(head) if head is not None else []
    pinned = next((i for i, message in enumerate(recorded) if message["role"] == "user"), len(recorded))
    starts = [i for i, message in enumerate(recorded) if message["role"] == "user"] + [len(recorded)]
    return pinned, tuple(EarlierTurn(end - begin, None) for begin, end in zip(starts, starts[1:], strict=False))
