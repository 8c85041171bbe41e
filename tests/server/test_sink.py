"""EventSink and its shared FlushClock: coalescing, one writer round per tick, failures surfacing."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async

from chat import services
from chat.models import Event
from chat.runtime import sink as sink_module

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


async def _running_conversation(owner_name, make_user):
    user = await sync_to_async(make_user)(owner_name)
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    run, _ = await sync_to_async(services.run_start)(
        conversation=conversation, user=user, content="hi", model="m", worker=""
    )
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
        [(c.pk, 2, {"type": "text", "content": "one two three "}) for c, _ in pairs], key=str
    )
    assert len({row[3] for row in stored}) == 1  # one tick, one transaction (one `now`) for the five runs


async def test_an_event_that_is_not_a_delta_goes_at_once_after_the_deltas_before_it(make_user):
    conversation, run = await _running_conversation("alice", make_user)
    events = sink_module.EventSink(conversation_id=conversation.pk, run_id=run.pk, flush_seconds=5)
    await events.add({"type": "thinking", "content": "hmm"})
    await events.add({"type": "text", "content": "Let me "})
    await events.add({"type": "text", "content": "look."})
    await events.add({"type": "tool_start", "toolName": "calculator", "toolCallId": "c1", "arguments": "{}"})
    stored = await sync_to_async(lambda: [e.payload for e in Event.objects.filter(run=run).order_by("seq")])()
    assert [p["type"] for p in stored] == ["user_message", "thinking", "text", "tool_start"]
    assert stored[2]["content"] == "Let me look."


async def test_a_tick_that_could_not_store_makes_the_runs_next_event_fail(make_user):
    conversation, run = await _running_conversation("bob", make_user)
    events = sink_module.EventSink(conversation_id=conversation.pk, run_id=run.pk, flush_seconds=0.02)
    await sync_to_async(conversation.delete)()
    await events.add({"type": "text", "content": "into the void"})
    await asyncio.sleep(0.15)
    with pytest.raises(services.ConversationGone):
        await events.add({"type": "text", "content": "more"})


async def test_a_discarded_sink_stores_nothing_more(make_user):
    conversation, run = await _running_conversation("carl", make_user)
    events = sink_module.EventSink(conversation_id=conversation.pk, run_id=run.pk, flush_seconds=0.02)
    await events.add({"type": "text", "content": "said before the hand-over"})
    events.discard()  # the run was handed to another process before the tick
    await asyncio.sleep(0.15)
    stored = await sync_to_async(lambda: [e.type for e in Event.objects.filter(run=run)])()
    assert stored == ["user_message"]


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
