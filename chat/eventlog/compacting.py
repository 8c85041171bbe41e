"""Compaction runs (docs/protocol.md, "Compaction", on demand): the branch one compacts, ending
at a top-level user_message (the newest by default), its memory as a message following that
turn would start from it, and whether it holds any turn to summarize beyond the newest
AGENT_COMPACT_KEEP_TURNS that the summary in use does not already cover. A compaction run has
no user_message: it is no turn, in no memory and no branch."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from chat.eventlog import memory
from chat.eventlog.compactions import Memory
from chat.eventlog.frames import CHILD_KEY
from chat.exceptions import NotAUserMessage, NothingToCompact
from chat.models import Event


def compaction_target(*, conversation_id: Any, seq: int | None) -> int:
    """The seq of the user_message whose turn ends the branch to compact: `seq`, which must be a
    top-level user_message of the conversation (NotAUserMessage), or the newest one
    (NothingToCompact when there is none)."""
    messages = Event.objects.filter(conversation_id=conversation_id, type="user_message").exclude(
        payload__has_key=CHILD_KEY
    )
    if seq is None:
        newest = messages.order_by("-seq").values_list("seq", flat=True).first()
        if newest is None:
            raise NothingToCompact("the conversation has no message")
        return newest
    if not messages.filter(seq=seq).exists():
        raise NotAUserMessage(f"seq {seq} is not a user_message of this conversation")
    return seq


def compaction_memory(*, conversation_id: Any, run_id: Any, seq: int | None) -> Memory:
    """The memory a message following the turn of `seq` (compaction_target) would start from."""
    target = compaction_target(conversation_id=conversation_id, seq=seq)
    found = memory.runs_memory(runs={conversation_id: run_id}, after={conversation_id: target})
    return found[conversation_id]


def compaction_refusal(*, conversation_id: Any, run_id: Any, seq: int | None) -> Exception | None:
    """Why a compaction run of that branch may not start (NotAUserMessage, NothingToCompact), or None."""
    try:
        turns = compaction_memory(conversation_id=conversation_id, run_id=run_id, seq=seq).layout.turns
    except (NotAUserMessage, NothingToCompact) as exc:
        return exc
    keep = max(settings.AGENT_COMPACT_KEEP_TURNS, 0)
    older = turns[: len(turns) - keep] if keep else turns
    if not older or older[-1].through_seq is None:
        return NothingToCompact(f"no turn beyond the newest {keep} that the summary in use does not cover")
    return None


def turn_runs(*, run_ids: set[str]) -> set[str]:
    """Those of the runs that have a user_message (all but compaction runs), as strings."""
    rows = Event.objects.filter(run_id__in=run_ids, type="user_message").values_list("run_id", flat=True)
    return {str(run_id) for run_id in rows}
