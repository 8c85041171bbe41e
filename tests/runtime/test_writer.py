"""chat.runtime.writer: the batches of many runs submitted together are stored in one round,
each answered with its own frames; a batch for a conversation deleted meanwhile is answered with
ConversationGone and costs the others nothing."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async

from chat.conversations.services import conversation_create
from chat.eventlog.types import EventBatch
from chat.exceptions import ConversationGone
from chat.models import Conversation, Event
from chat.runs.starts import run_start
from chat.runtime.writer import close_writer, get_writer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def _running(owner, n):
    runs = []
    for _ in range(n):
        conversation = conversation_create(owner=owner)
        run, _ = run_start(conversation=conversation, user=owner, content="hi", model="m", worker="w")
        runs.append(run)
    return runs


async def test_batches_of_many_runs_share_a_round_and_each_gets_its_frames(make_user):
    owner = await sync_to_async(make_user)("alice")
    runs = await sync_to_async(_running)(owner, 3)
    writer = get_writer()
    try:
        futures = [
            writer.submit(EventBatch(run.conversation_id, run.pk, [{"type": "text", "content": f"t{i}"}]))
            for i, run in enumerate(runs)
        ]
        stored = await asyncio.gather(*futures)
    finally:
        await close_writer()
    assert [[(f["type"], f["content"], f["seq"]) for f in frames] for frames in stored] == [
        [("text", "t0", 2)],
        [("text", "t1", 2)],
        [("text", "t2", 2)],
    ]
    # one round: one transaction, so every event of it carries the round's time
    times = await sync_to_async(lambda: set(Event.objects.filter(seq=2).values_list("created_at", flat=True)))()
    assert len(times) == 1


async def test_a_deleted_conversations_batch_fails_alone(make_user):
    owner = await sync_to_async(make_user)("bob")
    kept, gone = await sync_to_async(_running)(owner, 2)
    await sync_to_async(Conversation.objects.filter(pk=gone.conversation_id).delete)()
    writer = get_writer()
    try:
        ok = writer.submit(EventBatch(kept.conversation_id, kept.pk, [{"type": "text", "content": "stays"}]))
        lost = writer.submit(EventBatch(gone.conversation_id, gone.pk, [{"type": "text", "content": "lost"}]))
        assert [f["content"] for f in await ok] == ["stays"]
        with pytest.raises(ConversationGone):
            await lost
    finally:
        await close_writer()
