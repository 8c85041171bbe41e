"""EventSink and its shared FlushClock: a stream's first delta at once, growing windows after it,
one writer round per tick, failures surfacing."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async

from chat.conversations.services import conversation_create
from chat.exceptions import ConversationGone
from chat.models import Event
from chat.runs.starts import run_start
from chat.runtime import sink as sink_module

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


async def _running_conversation(owner_name, make_user):
    user = await sync_to_async(make_user)(owner_name)
    conversation = await sync_to_async(conversation_create)(owner=user)
    run, _ = await sync_to_async(run_start)(conversation=conversation, user=user, content="hi", model="m", worker="")
    return conversation, run


async def test_the_deltas_of_many_runs_are_coalesced_and_stored_in_one_round(make_user):
    pairs = [await _running_conversation(f"user{i}", make_user) for i in range(5)]
    sinks = [sink_module.EventSink(conversation_id=c.pk, run_id=r.pk, flush_seconds=0.05) for c, r in pairs]
    for word in ("one ", "two ", "three "):
        for s in sinks:
            await s.add({"type": "text", "content": word})
    await asyncio.sleep(0.2)
    stored = await sync_to_async(
        lambda: [(e.conversation_id, e.seq, e.payload, e.created_at) for e in Event.objects.filter(type="text")]
    )()
    assert sorted([row[:3] for row in stored], key=str) == sorted(
        [(c.pk, 2, {"type": "text", "content": "one "}) for c, _ in pairs]
        + [(c.pk, 3, {"type": "text", "content": "two three "}) for c, _ in pairs],
        key=str,
    )
    coalesced = {row[3] for row in stored if row[1] == 3}
    assert len(coalesced) == 1  # one tick, one transaction (one `now`) for the five runs


async def test_an_event_that_is_not_a_delta_goes_at_once_after_the_deltas_before_it(make_user):
    conversation, run = await _running_conversation("alice", make_user)
    events = sink_module.EventSink(conversation_id=conversation.pk, run_id=run.pk, flush_seconds=5)
    await events.add({"type": "thinking", "content": "hmm"})
    await events.add({"type": "text", "content": "Let me "})
    await events.add({"type": "text", "content": "look."})
    await events.add({"type": "tool_start", "toolName": "calculator", "toolCallId": "c1", "arguments": "{}"})
    stored = await sync_to_async(lambda: [e.payload for e in Event.objects.filter(run=run).order_by("seq")])()
    assert [p["type"] for p in stored] == ["user_message", "thinking", "text", "text", "tool_start"]
    assert [p["content"] for p in stored[2:4]] == ["Let me ", "look."]  # the first delta of a stream at once


async def test_a_tick_that_could_not_store_makes_the_runs_next_event_fail(make_user):
    conversation, run = await _running_conversation("bob", make_user)
    events = sink_module.EventSink(conversation_id=conversation.pk, run_id=run.pk, flush_seconds=0.02)
    await events.add({"type": "text", "content": "stored at once"})
    await sync_to_async(conversation.delete)()
    await events.add({"type": "text", "content": "into the void"})  # waits for the clock
    await asyncio.sleep(0.15)
    with pytest.raises(ConversationGone):
        await events.add({"type": "text", "content": "more"})


async def test_a_discarded_sink_stores_nothing_more(make_user):
    conversation, run = await _running_conversation("carl", make_user)
    events = sink_module.EventSink(conversation_id=conversation.pk, run_id=run.pk, flush_seconds=0.02)
    await events.add({"type": "text", "content": "stored at once"})
    await events.add({"type": "text", "content": "said before the hand-over"})
    events.discard()  # the run was handed to another process before the tick
    await asyncio.sleep(0.15)
    assert await _texts(run) == ["stored at once"]


async def test_the_error_ending_a_failed_attempt_names_the_first_text_it_discards(make_user):
    conversation, run = await _running_conversation("dora", make_user)
    events = sink_module.EventSink(conversation_id=conversation.pk, run_id=run.pk, flush_seconds=5)
    await events.add({"type": "text", "content": "Let me look."})
    await events.add({"type": "tool_start", "toolName": "calculator", "toolCallId": "c1", "arguments": "{}"})
    await events.add(
        {"type": "tool_end", "toolName": "calculator", "toolCallId": "c1", "result": "1", "isError": False}
    )
    await events.add({"type": "text", "content": "The ans"})  # still waiting for the clock
    await events.add({"type": "thinking", "content": "hmm"})
    await events.add({"type": "text", "content": "wer"})
    retry = {"type": "error", "code": "LLM_CALL_FAILED", "message": "retrying (1/3)", "detail": ""}
    await events.add(retry)
    await events.add(dict(retry))  # the next attempt failed before any text
    await events.add({"type": "text", "content": "The answer."})
    await events.add({"type": "error", "code": "CANCELLED", "message": "stop", "detail": ""})
    stored = await sync_to_async(lambda: [(e.seq, e.payload) for e in Event.objects.filter(run=run).order_by("seq")])()
    assert [(seq, p["type"]) for seq, p in stored] == [
        (1, "user_message"),
        (2, "text"),
        (3, "tool_start"),
        (4, "tool_end"),
        (5, "text"),
        (6, "thinking"),
        (7, "text"),
        (8, "error"),
        (9, "error"),
        (10, "text"),
        (11, "error"),
    ]
    errors = [p for _, p in stored if p["type"] == "error"]
    assert errors[0]["discards"] == 5
    assert "discards" not in errors[1] and "discards" not in errors[2]


async def _texts(run):
    return await sync_to_async(
        lambda: [e.payload["content"] for e in Event.objects.filter(run=run, type="text").order_by("seq")]
    )()


async def test_a_streams_first_delta_is_stored_before_add_returns(make_user):
    conversation, run = await _running_conversation("erin", make_user)
    events = sink_module.EventSink(conversation_id=conversation.pk, run_id=run.pk, flush_seconds=5)
    await events.add({"type": "text", "content": "First"})
    assert await _texts(run) == ["First"]  # no window to wait for, however long
    await events.add({"type": "text", "content": " second"})
    assert await _texts(run) == ["First"]  # the rest waits for its window


def test_windows_double_from_the_first_up_to_the_longest():
    windows = [sink_module.window(n, first=0.05, longest=0.5) for n in range(1, 8)]
    assert windows == [0.05, 0.1, 0.2, 0.4, 0.5, 0.5, 0.5]
    assert sink_module.window(40, first=0.05, longest=0.01) == 0.05  # never below the first
    assert sink_module.window(1000, first=0.05, longest=0.5) == 0.5  # no overflow on long streams


async def _stream(events, *, tokens: int, rate: float) -> str:
    loop = asyncio.get_running_loop()
    start, sent = loop.time(), []
    for i in range(tokens):
        await asyncio.sleep(max(0.0, start + (i + 1) / rate - loop.time()))
        word = f"w{i} "
        sent.append(word)
        await events.add({"type": "text", "content": word})
    await events.add({"type": "complete", "status": "succeeded", "durationMs": 0})
    return "".join(sent)


async def test_rows_grow_with_time_and_the_windows_grow_along_the_stream(make_user):
    conversation, run = await _running_conversation("fay", make_user)
    events = sink_module.EventSink(
        conversation_id=conversation.pk, run_id=run.pk, flush_seconds=0.05, max_flush_seconds=0.5
    )
    answer = await _stream(events, tokens=300, rate=100)  # three seconds at 100 tokens/s
    rows = await sync_to_async(
        lambda: [
            (e.payload["content"], e.created_at) for e in Event.objects.filter(run=run, type="text").order_by("seq")
        ]
    )()
    assert "".join(content for content, _ in rows) == answer
    assert rows[0][0] == "w0 "  # the first token alone, at once
    # First, then windows of ~50, 100, 200, 400 and 500 ms: 1 + 4 + ~4 rows in three seconds (200 at
    # fixed 50 ms windows would be ~60). Loose bounds: the machine is shared.
    assert 6 <= len(rows) <= 12
    gaps = [(b - a).total_seconds() for (_, a), (_, b) in zip(rows, rows[1:])]
    assert gaps[1] < 0.35 and max(gaps[-4:-1]) > 0.35  # short windows early, long ones later


async def test_the_longest_window_at_the_first_keeps_windows_fixed(make_user):
    conversation, run = await _running_conversation("gus", make_user)
    events = sink_module.EventSink(conversation_id=conversation.pk, run_id=run.pk, flush_seconds=0.05)
    answer = await _stream(events, tokens=100, rate=100)
    texts = await _texts(run)
    assert "".join(texts) == answer
    assert len(texts) >= 12  # ~one row per 50 ms over a second
