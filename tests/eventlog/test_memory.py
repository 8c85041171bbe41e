"""chat.eventlog.memory: a run start reads memory checkpoints back only as far as its bound
(memory.read_bound()), and the newest messages are exactly what the derivation from the whole event log makes.

The reference below is that derivation as it was before checkpoints (every user_message of the
conversation walked for the branch, every event of the branch's runs made into messages): each
test builds conversations, starts a run, and compares the two, as lists (the new memory is a
suffix of the old one, cut at a run's start, at least read_bound() long) and as what the
trimming hook makes of them at the run's first and later model calls."""

from __future__ import annotations

import asyncio
import json
from itertools import groupby
from types import SimpleNamespace
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chat.agent.hooks import MessageTrimmingHook
from chat.conversations.importing import conversation_import, parse_import
from chat.eventlog import history, memory
from chat.eventlog.append import events_append
from chat.eventlog.reads import events_for_export
from chat.eventlog.takeover import run_interrupt
from chat.eventlog.types import RunOutcome
from chat.models import Conversation, Event, Run, RunMemory
from chat.runs.starts import run_start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


@pytest.fixture(autouse=True)
def _no_rate_limit(settings):
    settings.AGENT_MESSAGES_PER_MINUTE = 0  # the seeded runs all started this minute


# -- the reference: the memory as derived before checkpoints ---------------------------------
def reference_memory(conversation_id, run_id) -> list[dict[str, Any]]:
    rows = list(
        Event.objects.filter(conversation_id=conversation_id, type="user_message")
        .order_by("seq")
        .values_list("seq", "run_id", "payload")
    )
    parents: dict[int, Any] = {}
    previous = None
    for seq, _, payload in rows:
        parent = payload["parentSeq"] if "parentSeq" in payload else previous
        if "parentSeq" in payload and (not isinstance(parent, int) or isinstance(parent, bool)):
            parent = None
        parents[seq] = parent
        previous = seq
    runs = {seq: rid for seq, rid, _ in rows}
    seq = next((s for s, rid, _ in reversed(rows) if str(rid) == str(run_id)), None)
    branch = []
    while seq is not None and seq in runs:
        branch.append(runs[seq])
        parent = parents[seq]
        seq = parent if parent is not None and parent < seq else None
    branch = branch or [run_id]
    events = [
        {**payload, "runId": str(rid)}
        for rid, payload in Event.objects.filter(run_id__in=branch).order_by("seq").values_list("run_id", "payload")
    ]
    messages = []
    for _, run_events in groupby(events, key=lambda e: e["runId"]):
        messages.extend(history.run_messages(list(run_events)))
    return messages


def trimmed(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest messages from a user message on, AGENT_COMPACT_MAX_MESSAGES of them at least."""
    state = SimpleNamespace(messages=[{"role": "system", "content": "sys"}, *messages])
    asyncio.run(MessageTrimmingHook(max_messages=80).before_model(state))  # type: ignore[arg-type]
    return state.messages


def assert_same_memory(conversation_id, run_id, *, bounded: bool = True) -> list[dict[str, Any]]:
    """`bounded`: read from checkpoints (no more than the budget and the run that crosses it);
    else from the log, whole (the fallback)."""
    old = reference_memory(conversation_id, run_id)
    new = memory.runs_memory(runs={conversation_id: run_id})[conversation_id].messages
    assert len(new) < memory.read_bound() + 30 if bounded else new == old
    assert new == old[len(old) - len(new) :]
    assert new == old or (len(new) >= memory.read_bound() and new[0]["role"] == "user")
    # What the model is sent: at the first call, and after the run added tool rounds of its own.
    for added in (0, 3, 40, 200):
        rounds = [{"role": "assistant", "content": None, "tool_calls": []}, {"role": "tool", "content": "r"}]
        extra = (rounds * added)[:added]
        assert trimmed(new + extra) == trimmed(old + extra)
    return new


# -- conversations -------------------------------------------------------------------------
def turn_events(i: int, shape: str) -> tuple[list[dict[str, Any]], str]:
    """What a run of this shape stores after its user_message, and its status."""
    a, b, c = f"a{i}", f"b{i}", f"c{i}"

    def start(call, name="calculator", arguments='{"expression": "1+1"}'):
        return {"type": "tool_start", "toolName": name, "toolCallId": call, "arguments": arguments}

    def end(call, result="2", error=False, name="calculator"):
        return {
            "type": "tool_end",
            "toolName": name,
            "toolCallId": call,
            "result": result,
            "isError": error,
            "durationMs": 1,
        }

    def failed(n):
        return {"type": "error", "code": "LLM_CALL_FAILED", "message": f"retrying ({n}/3)", "detail": "503"}

    text = [
        {"type": "thinking", "content": "hm"},
        {"type": "text", "content": f"answer {i} "},
        {"type": "text", "content": "ends."},
    ]
    shapes = {
        "plain": (text, "succeeded"),
        # parallel calls ending out of order, a failing one, a second round with text before it
        "tools": ([{"type": "text", "content": "Checking."}, start(a), start(b), start(c, "current_time", "{}"),
                   end(b), end(a, "4"), end(c, '{"error": "bad zone"}', True, "current_time"),
                   start(f"d{i}"), end(f"d{i}"), *text], "succeeded"),
        # a failed attempt's text is discarded, the retry answers
        "retry": ([{"type": "text", "content": "half an ans"}, failed(1), {"type": "text", "content": "whole "}, failed(2), *text], "succeeded"),
        "failed": ([{"type": "text", "content": "par"}, {**failed(3), "message": "gave up"}], "failed"),
        "cancelled": ([start(a), end(a, '{"error": "cancelled"}', True),
                       {"type": "error", "code": "CANCELLED", "message": "cancelled", "detail": ""}], "cancelled"),
        # died mid-answer, resumed: the half answer is discarded, the rest kept
        "resumed": ([{"type": "text", "content": "before the crash"},
                     {"type": "error", "code": "INTERRUPTED", "message": "x", "detail": "", "resumed": True},
                     start(a), end(a), *text], "succeeded"),
        "interrupted": ([start(a), end(a, '{"error": "interrupted"}', True),
                         {"type": "error", "code": "INTERRUPTED", "message": "x", "detail": ""}], "interrupted"),
        "approval": ([{"type": "approval_request", "toolCallId": a, "toolName": "bash", "arguments": "{}", "expiresAt": "x"},
                      {"type": "approval_result", "toolCallId": a, "decision": "denied", "reason": "no"},
                      end(a, '{"error": "denied by the user: no"}', True, "bash"), *text], "succeeded"),
        "reference": ([start(a, "web_search", '{"query": "q"}'),
                       {"type": "reference", "references": [{"title": "t", "url": "https://e.org", "snippet": "s"}]},
                       end(a, "found", name="web_search"), {"type": "text", "content": "see"},
                       {"type": "error", "code": "LLM_CALL_FAILED", "message": "x", "detail": ""}, *text], "succeeded"),
        "max_iterations": ([start(a), end(a), start(b), end(b),
                            {"type": "error", "code": "MAX_ITERATIONS", "message": "stopped", "detail": ""}], "failed"),
        "unfinished_tool": ([start(a), {"type": "text", "content": "?"}], "failed"),  # a log from before tool_end was sure
    }  # fmt: skip
    payloads, status = shapes[shape]
    return [*payloads, {"type": "complete", "status": status}], status


SHAPES = ["plain", "tools", "retry", "failed", "cancelled", "resumed", "interrupted", "approval", "reference",
          "max_iterations", "unfinished_tool", "tools", "plain"]  # fmt: skip


def bulk_conversation(owner, turns: int, *, legacy: bool = False, shapes: list[str] = SHAPES) -> Conversation:
    """A conversation of `turns` finished runs of every shape, inserted straight into the tables,
    without checkpoints (as a database from before them holds it). `legacy`: user_messages
    without parentSeq, as stored before versions existed."""
    conversation = Conversation.objects.create(owner=owner, title="long")
    runs = Run.objects.bulk_create(
        Run(conversation=conversation, user=owner, status=turn_events(i, shapes[i % len(shapes)])[1])
        for i in range(turns)
    )
    events, seq, previous, now = [], 0, None, timezone.now()
    for i, run in enumerate(runs):
        head: dict[str, Any] = {"type": "user_message", "content": f"question {i}"}
        if not legacy:
            head["parentSeq"] = previous
        payloads, _ = turn_events(i, shapes[i % len(shapes)])
        previous = seq + 1
        for payload in [head, *payloads]:
            seq += 1
            events.append(
                Event(
                    conversation=conversation, run=run, seq=seq, type=payload["type"], payload=payload, created_at=now
                )
            )
    Event.objects.bulk_create(events, batch_size=2000)
    Conversation.objects.filter(pk=conversation.pk).update(last_seq=seq)
    conversation.refresh_from_db()
    return conversation


def start(conversation, content="next", **version) -> tuple[Run, int]:
    run, frames = run_start(
        conversation=conversation, user=conversation.owner, content=content, model="m", worker="", **version
    )
    return run, frames[0]["seq"]


def finish(conversation, run, i: int) -> None:
    payloads, status = turn_events(i, SHAPES[i % len(SHAPES)])
    events_append(conversation_id=conversation.pk, run_id=run.pk, payloads=payloads[: len(payloads) // 2])
    events_append(
        conversation_id=conversation.pk,
        run_id=run.pk,
        payloads=payloads[len(payloads) // 2 :],
        outcome=RunOutcome(status=status),
    )


def user_seqs(conversation) -> list[int]:
    return list(
        Event.objects.filter(conversation=conversation, type="user_message")
        .order_by("seq")
        .values_list("seq", flat=True)
    )


# -- tests ---------------------------------------------------------------------------------
def test_a_long_branched_tool_heavy_conversation_has_the_same_memory_at_every_start(make_user):
    """1,200 turns from before checkpoints (filled at the first start), then live turns of every
    shape: messages, edits and regenerates of recent and old turns, continuing from an older
    version, a run resumed after its process died."""
    conversation = bulk_conversation(make_user("alice"), 1200)
    assert not RunMemory.objects.filter(run__conversation=conversation).exists()
    seqs = user_seqs(conversation)
    plan: list[dict[str, Any]] = [
        {},
        {},
        {"regenerates": "newest"},
        {"edits": seqs[-3]},
        {},
        {"parent_seq": seqs[-10]},  # continue from an older version
        {},
        {"edits": seqs[4]},  # a short branch near the start: all of it is memory
        {},
        {"regenerates": seqs[-1]},  # back on the long branch
        {"parent_seq": "newest"},
    ] + [{}] * 12
    for i, version in enumerate(plan):
        version = {k: user_seqs(conversation)[-1] if v == "newest" else v for k, v in version.items()}
        run, _ = start(conversation, f"live {i}", **version)
        new = assert_same_memory(conversation.pk, run.pk)
        if i == 0:  # the first start filled every finished run's checkpoint, from the log, once
            assert RunMemory.objects.filter(run__conversation=conversation).count() == 1200
            assert len(new) < 2 * memory.read_bound()
        finish(conversation, run, i)
        assert RunMemory.objects.filter(run=run, size__gt=0).exists()  # written with `complete`

    # A run whose process died mid-tool-call is resumed from its own events and its branch.
    run, _ = start(conversation, "crash")
    events_append(
        conversation_id=conversation.pk,
        run_id=run.pk,
        payloads=[
            {"type": "text", "content": "looking"},
            {"type": "tool_start", "toolName": "calculator", "toolCallId": "x1", "arguments": "{}"},
        ],
    )
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timezone.timedelta(minutes=5))
    interruption = run_interrupt(run_id=run.pk, message="died", worker="w2", max_resumes=1)
    assert interruption is not None and interruption.resumed
    new = assert_same_memory(conversation.pk, run.pk)
    assert new[-1] == {"role": "tool", "tool_call_id": "x1", "content": json.dumps({"error": "interrupted"})}


def test_a_conversation_from_before_versions_and_checkpoints_is_one_branch_filled_once(make_user):
    conversation = bulk_conversation(make_user("alice"), 150, legacy=True)
    seqs = user_seqs(conversation)
    for version in ({}, {"regenerates": seqs[-1]}, {"edits": seqs[100]}, {"parent_seq": seqs[20]}):
        run, _ = start(conversation, "again", **version)
        assert_same_memory(conversation.pk, run.pk)
        finish(conversation, run, 0)
    assert RunMemory.objects.filter(run__conversation=conversation, size__gt=0).count() == 154


def test_an_imported_conversation_has_its_checkpoints_and_the_same_memory(make_user):
    alice = make_user("alice")
    # every shape an export can hold (an import refuses a tool call that never ended)
    source = bulk_conversation(alice, 300, shapes=[s for s in SHAPES if s != "unfinished_tool"])
    exported = json.dumps({"conversation": {"title": "t"}, "events": events_for_export(conversation_id=source.pk)})
    imported = conversation_import(owner=alice, imported=parse_import(exported.encode()))
    assert RunMemory.objects.filter(run__conversation=imported, size__gt=0).count() == 300
    seqs = user_seqs(imported)
    for version in ({}, {"edits": seqs[-40]}, {"regenerates": seqs[-1]}):
        run, _ = start(imported, "after import", **version)
        with CaptureQueriesContext(connection) as queries:
            assert_same_memory(imported.pk, run.pk)
        finish(imported, run, 1)
    assert len(queries) < 20  # nothing filled: the import wrote them


def test_an_imported_run_with_two_user_messages_falls_back_to_the_log(make_user):
    """The server never writes such a run, an import may: the branch walk enters it at either
    user_message and leaves from that one's parent, which one checkpoint cannot tell."""
    alice = make_user("alice")
    frames = []
    seq = 0
    for i in range(120):
        seq += 1
        frames.append(
            {
                "seq": seq,
                "runId": f"r{i}",
                "type": "user_message",
                "content": f"q{i}",
                "parentSeq": seq - 3 if i else None,
            }
        )
        if i == 60:  # a second user_message in the run, following turn 10
            seq += 1
            frames.append({"seq": seq, "runId": f"r{i}", "type": "user_message", "content": "again", "parentSeq": 31})
        seq += 1
        frames.append({"seq": seq, "runId": f"r{i}", "type": "text", "content": f"a{i}"})
        seq += 1
        frames.append({"seq": seq, "runId": f"r{i}", "type": "complete", "status": "succeeded"})
    imported = conversation_import(
        owner=alice, imported=parse_import(json.dumps({"conversation": {}, "events": frames}).encode())
    )
    assert RunMemory.objects.filter(run__conversation=imported, size__isnull=True).count() == 1
    twice = [
        s
        for s, p in Event.objects.filter(conversation=imported, type="user_message").values_list("seq", "payload")
        if p["content"] == "again"
    ][0]
    early = user_seqs(imported)[30]  # a branch that does not reach the odd run: checkpoints only
    for version in (
        {"parent_seq": twice},
        {"parent_seq": twice - 1},
        {"edits": user_seqs(imported)[64]},
        {},
        {"parent_seq": early},
    ):
        run, _ = start(imported, "then", **version)
        through_it = version.get("parent_seq") != early
        assert_same_memory(imported.pk, run.pk, bounded=not through_it)
        finish(imported, run, 0)


def test_a_run_start_reads_as_much_at_2000_turns_as_at_10(make_user):
    alice = make_user("alice")
    counts, sizes = [], []
    for turns in (10, 2000):
        conversation = bulk_conversation(alice, turns)
        run, _ = start(conversation, "warm up")
        memory.runs_memory(runs={conversation.pk: run.pk})  # fills the checkpoints the seeded runs lack
        finish(conversation, run, 0)
        run, _ = start(conversation, "measured")
        with CaptureQueriesContext(connection) as queries:
            messages = memory.runs_memory(runs={conversation.pk: run.pk})[conversation.pk].messages
        counts.append(len(queries))
        sizes.append(len(messages))
        assert messages == reference_memory(conversation.pk, run.pk)[-len(messages) :]
        assert not any("user_message" in q["sql"] and "parentSeq" in q["sql"] for q in queries.captured_queries)
        finish(conversation, run, 1)
    assert counts[0] == counts[1]  # the same few queries
    assert sizes[1] < memory.read_bound() + 20  # the budget and the run that crosses it, not 2,000 turns


def test_runs_of_several_conversations_start_in_one_group(make_user):
    alice = make_user("alice")
    conversations = [bulk_conversation(alice, n) for n in (3, 90, 400)]
    runs = {c.pk: start(c, "together")[0].pk for c in conversations}
    memories = {key: each.messages for key, each in memory.runs_memory(runs=runs).items()}
    for conversation_id, run_id in runs.items():
        old = reference_memory(conversation_id, run_id)
        assert memories[conversation_id] == old[len(old) - len(memories[conversation_id]) :]
        assert trimmed(memories[conversation_id]) == trimmed(old)
