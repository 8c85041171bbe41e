"""The model's memory at a run start, read in a time that does not grow with the conversation.

A run's memory is its branch's earlier turns (docs/protocol.md, "Versions: edits, regenerated answers and branches")
as chat messages (chat.eventlog.history), back to the newest compaction
that holds for the branch (chat.eventlog.compactions: its summary then stands for the turns
before), then its own events so far. The run's compactor (chat.agent.compaction) keeps each
request within the agent's context. Deriving all of it from the event log at every start read
every user_message of the conversation and every event of its branch: a message's first text
came 7.7x later at 1,000 turns than in a fresh conversation.

So each finished run keeps a checkpoint (RunMemory): its own messages and the run of the turn
before it on its branch. A run start walks its branch backwards through those links in one
recursive query, until it meets the newest summarized turn or the messages gathered reach
read_bound(), and reads those checkpoints: a few rows whatever the conversation's length.
Checkpoints rather than an index to start reading the log from: the walk still needs each
turn's parent, and a checkpoint is one row per turn where the log holds every delta of it.

The bound: a memory past AGENT_COMPACT_MAX_MESSAGES is compacted, so a branch with summaries
meets one well within twice that; turns beyond it on a branch never summarized (a conversation
from before compaction, or with AGENT_COMPACT_MAX_MESSAGES at 0) are not read, as the trimming
they would get anyway (tests/eventlog/test_memory.py compares the walk with the derivation from
the log on long, branched, tool-heavy, failed, resumed, imported and compacted conversations).

Checkpoints are written in the transaction that stores a run's `complete` (chat.eventlog.append), at
import, and, for runs that have none (conversations from before checkpoints existed), on the
conversation's next run start, from the log, once. A run that one parent cannot place (an
imported run holding several user_messages: the branch walk of chat.eventlog.history enters it at one
of them and leaves from that one's parent) gets an empty checkpoint; a walk that meets it
reads the branch from the log as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import groupby
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q

from chat.agent.compaction import Summary
from chat.eventlog import history
from chat.eventlog.compactions import Memory, held_by_run, last_seqs, memory_of
from chat.eventlog.frames import CHILD_KEY
from chat.eventlog.reads import runs_memory_events, user_message_rows
from chat.models import RAW_PAYLOAD, Event, Run, RunMemory, payload_of

Message = dict[str, Any]
# Events a run's messages are made of: all but thinking (chat.eventlog.history never reads it; any other
# event ends a failed attempt's claim on the text before it, chat.agent.answer).
_UNREAD = "thinking"
# Runs per query: keeps `IN` lists under SQLite's limit on parameters.
CHUNK = 500


def checkpoints_write(*, runs: Mapping[Any, tuple[Any, list[dict[str, Any]]]]) -> None:
    """Store the checkpoints of runs that have just completed, in the caller's transaction, from
    their events as events_of read them. A run whose user_message has no parentSeq (one started
    before versions existed) is left to checkpoints_fill, which follows such messages as
    chat.eventlog.history does."""
    heads = {run_id: _head(events) for run_id, (_, events) in runs.items()}
    wanted = {
        run_id: (runs[run_id][0], head) for run_id, head in heads.items() if head is not None and "parentSeq" in head
    }
    parents = _parent_runs(wanted)
    _store((run_id, parents[run_id], history.run_messages(runs[run_id][1])) for run_id in wanted)


def checkpoints_fill(*, conversation_id) -> None:
    """Store the checkpoints that the conversation's finished runs lack: an import, or runs from
    before checkpoints existed. Reads the conversation's user_messages and the events of those
    runs, once."""
    rows = user_message_rows(conversation_ids=[conversation_id]).get(conversation_id, [])
    parents = history.parents_of(rows)
    run_of = {seq: run_id for seq, run_id, _, _ in rows}
    missing = list(
        Run.objects.filter(conversation_id=conversation_id, memory__isnull=True, parent__isnull=True)
        .exclude(status=Run.Status.RUNNING)
        .values_list("pk", flat=True)
    )
    for start in range(0, len(missing), CHUNK):
        runs = events_of(missing[start : start + CHUNK])
        checkpoints = []
        for run_id, (_, events) in runs.items():
            seqs = [e["seq"] for e in events if e["type"] == "user_message"]
            if len(seqs) != 1:
                checkpoints.append((run_id, None, None))  # the walk cannot pass through it
                continue
            parent = parents[seqs[0]]
            valid = parent is not None and parent < seqs[0] and parent in run_of
            checkpoints.append((run_id, run_of[parent] if valid else None, history.run_messages(events)))
        with transaction.atomic():
            _store(checkpoints)


def read_bound() -> int:
    """The most messages of earlier turns a run start reads (the module's docstring)."""
    return 2 * max(settings.AGENT_COMPACT_MAX_MESSAGES, 80)


def runs_memory(*, runs: Mapping[Any, Any], after: Mapping[Any, int] | None = None) -> dict[Any, Memory]:
    """For running runs, {conversation_id: run_id}: the memory each one's model starts from, its
    branch's summary and earlier turns, then the run's own events so far. A handful of queries
    for all of them. `after` {conversation_id: seq}: those runs have no user_message (compaction
    runs): their branch is the one whose newest turn is that of the user_message at `seq`."""
    return _memories(runs, fill=True, after=after or {})


def _memories(runs: Mapping[Any, Any], *, fill: bool, after: Mapping[Any, int]) -> dict[Any, Memory]:
    own = events_of(list(runs.values()))
    held = held_by_run(conversation_ids=list(runs))
    out: dict[Any, Memory] = {}
    fallback: dict[Any, Any] = {}
    walks: dict[Any, tuple[Any, Mapping[str, Any]]] = {}
    mine: dict[Any, list[Message]] = {}
    own_events: dict[Any, list[dict[str, Any]]] = {}
    for conversation_id, run_id in runs.items():
        events = own_events[conversation_id] = own.get(_key(run_id), (conversation_id, []))[1]
        mine[conversation_id] = history.run_messages(events)
        heads = [e for e in events if e["type"] == "user_message"]
        if conversation_id in after:  # as if a message followed the user_message at that seq
            heads = [{"type": "user_message", "seq": after[conversation_id] + 1, "parentSeq": after[conversation_id]}]
        if not heads:  # its user_message is not stored (cannot be): its own events alone
            out[conversation_id] = memory_of((), mine[conversation_id], events, {})
        elif len(heads) > 1 or "parentSeq" not in heads[0]:
            fallback[conversation_id] = run_id  # only imported or pre-versions runs
        else:
            walks[conversation_id] = (conversation_id, heads[0])
    parents = _parent_runs(walks)
    needs = {c: read_bound() - len(mine[c]) for c in walks}
    roots = {c: parent for c, parent in parents.items() if parent is not None and needs[c] > 0}
    chains = _walk(set(roots.values()), budget=max(needs.values(), default=0), stops=set(held))
    taken: dict[Any, list[Any]] = {}
    missing: dict[Any, Any] = {}
    for conversation_id in walks:
        root = roots.get(conversation_id)
        if root is None:  # a first turn, or the run's own messages fill the budget
            taken[conversation_id] = []
            continue
        chain = _enough(chains.get(root, []), need=needs[conversation_id], stops=held)
        if chain is None:
            fallback[conversation_id] = runs[conversation_id]
        elif isinstance(chain, str):
            missing[conversation_id] = runs[conversation_id]
        else:
            taken[conversation_id] = chain
    if missing and fill:
        for conversation_id in missing:
            checkpoints_fill(conversation_id=conversation_id)
        out.update(_memories(missing, fill=False, after=after))
    else:
        fallback.update(missing)
    checkpoints = dict(
        RunMemory.objects.filter(run_id__in=[r for chain in taken.values() for r in chain]).values_list(
            "run_id", "messages"
        )
    )
    seqs = last_seqs([run_id for chain in taken.values() for run_id in chain])
    for conversation_id, chain in taken.items():
        turns = [(run_id, checkpoints[run_id], seqs.get(run_id)) for run_id in reversed(chain)]
        out[conversation_id] = memory_of(turns, mine[conversation_id], own_events[conversation_id], held)
    if fallback:
        # A compaction run's branch is read from the log from the turn it ends at (`after`).
        branch_of = {c: parents.get(c) or run_id if c in after else run_id for c, run_id in fallback.items()}
        for conversation_id, events in runs_memory_events(runs=branch_of).items():
            out[conversation_id] = _from_log(events, run_id=fallback[conversation_id], held=held)
    return out


def _from_log(events: list[dict[str, Any]], *, run_id: Any, held: Mapping[Any, Summary]) -> Memory:
    """The memory of a run from the events of its branch, run by run in the order given."""
    turns, own_events = [], []
    for each, run_events in groupby(events, key=lambda e: e["runId"]):
        listed = list(run_events)
        if str(each) == str(run_id):
            own_events = listed
        elif each is not None:
            turns.append((_key(each), history.run_messages(listed), listed[-1]["seq"]))
    return memory_of(turns, history.run_messages(own_events), own_events, held)


_MISSING = "missing"  # a run on the way has no checkpoint yet


def _enough(
    chain: list[tuple[Any, Any, int | None]], *, need: int, stops: Mapping[Any, Summary]
) -> list[Any] | str | None:
    """The runs of a walked chain (newest first) whose messages reach `need`, or to the newest
    summarized turn (one of `stops`, included: its summary opens the memory), or the chain to
    its first turn when it holds fewer; None when it meets a run it cannot pass (fall back to
    the log); _MISSING when a run on the way has no checkpoint."""
    runs, total = [], 0
    for run_id, _, size in chain:
        if run_id in stops:
            return [*runs, run_id]
        if size is None:
            return None
        runs.append(run_id)
        total += size
        if total >= need:
            return runs
    if not chain or chain[-1][1] is not None:
        return _MISSING
    return runs


def _walk(roots: set[Any], *, budget: int, stops: set[Any]) -> dict[Any, list[tuple[Any, Any, int | None]]]:
    """From each root run back through its checkpoints' parents, while the messages gathered
    stay under `budget`, the runs can be passed and none of `stops` (summarized turns) is met:
    {root: [(run, parent, size), ...] newest first}. One recursive query for all the roots,
    each step a primary-key lookup."""
    if not roots:
        return {}
    table = connection.ops.quote_name(RunMemory._meta.db_table)
    pk = Run._meta.pk
    assert pk is not None
    stop = f" AND chain.run_id NOT IN ({', '.join(['%s'] * len(stops))})" if stops else ""
    sql = f"""
        WITH RECURSIVE chain(root, run_id, parent_id, size, total, depth) AS (
            SELECT m.run_id, m.run_id, m.parent_id, m.size, COALESCE(m.size, 0), 0
            FROM {table} m WHERE m.run_id IN ({", ".join(["%s"] * len(roots))})
            UNION ALL
            SELECT chain.root, m.run_id, m.parent_id, m.size, chain.total + COALESCE(m.size, 0), chain.depth + 1
            FROM chain JOIN {table} m ON m.run_id = chain.parent_id
            WHERE chain.size IS NOT NULL AND chain.total < %s{stop}
        )
        SELECT root, run_id, parent_id, size FROM chain ORDER BY root, depth
    """
    params = [pk.get_db_prep_value(root, connection) for root in roots] + [budget]
    params += [pk.get_db_prep_value(run_id, connection) for run_id in stops]
    chains: dict[Any, list[tuple[Any, Any, int | None]]] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for root, run_id, parent_id, size in cursor.fetchall():
            chains.setdefault(_key(root), []).append(
                (_key(run_id), None if parent_id is None else _key(parent_id), size)
            )
    return chains


def _parent_runs(heads: Mapping[Any, tuple[Any, Mapping[str, Any]]]) -> dict[Any, Any]:
    """{key: the run of the turn before} for user_messages given as {key: (conversation_id,
    payload with seq and parentSeq)}, None for a first turn or a parentSeq that is not an
    earlier user_message of the conversation (which ends chat.eventlog.history's walk too). One query."""
    wanted: dict[Any, tuple[Any, int]] = {}
    for key, (conversation_id, head) in heads.items():
        parent = head.get("parentSeq")
        if isinstance(parent, int) and not isinstance(parent, bool) and parent < head["seq"]:
            wanted[key] = (conversation_id, parent)
    found: dict[tuple[Any, int], Any] = {}
    if wanted:
        where = Q()
        for conversation_id, seq in set(wanted.values()):
            where |= Q(conversation_id=conversation_id, seq=seq)
        rows = (
            Event.objects.filter(where, type="user_message")
            .exclude(payload__has_key=CHILD_KEY)
            .values_list("conversation_id", "seq", "run_id")
        )
        found = {(_key(conversation_id), seq): run_id for conversation_id, seq, run_id in rows}
    return {key: found.get((_key(wanted[key][0]), wanted[key][1])) if key in wanted else None for key in heads}


def events_of(run_ids: Sequence[Any]) -> dict[Any, tuple[Any, list[dict[str, Any]]]]:
    """{run_id: (conversation_id, its events but thinking, in order, each with its seq)}: what a
    run's memory is made of, and (chat.eventlog.search) its searchable text. At most CHUNK runs."""
    rows = (
        Event.objects.filter(run_id__in=run_ids)
        .exclude(type=_UNREAD)
        .order_by("run_id", "seq")
        .values_list("run_id", "conversation_id", "seq", RAW_PAYLOAD)
    )
    out: dict[Any, tuple[Any, list[dict[str, Any]]]] = {}
    for run_id, conversation_id, seq, payload in rows:
        out.setdefault(run_id, (conversation_id, []))[1].append({**payload_of(payload), "seq": seq})
    return out


def _head(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A run's one user_message; None when it has none or several (checkpoints_fill's case)."""
    heads = [e for e in events if e["type"] == "user_message"]
    return heads[0] if len(heads) == 1 else None


def _store(checkpoints: Iterable[tuple[Any, Any, list[Message] | None]]) -> None:
    """Upsert (run, parent, messages) checkpoints. The messages come from stored events, which
    chat.agent.text cleaned on their way in: they are not cleaned twice."""
    rows = [
        RunMemory(run_id=run_id, parent_id=parent, messages=messages, size=None if messages is None else len(messages))
        for run_id, parent, messages in checkpoints
    ]
    if rows:
        RunMemory.objects.bulk_create(
            rows, update_conflicts=True, unique_fields=["run"], update_fields=["parent", "messages", "size"]
        )


def _key(value: Any) -> Any:
    """A run or conversation id as the ORM returns it (raw SQL gives SQLite's hex strings)."""
    return Run._meta.pk.to_python(value)  # type: ignore[union-attr]
