"""Queued messages (docs/protocol.md, "Queued messages"), through the front door (chat.runs.engine):
a message sent with whileRunning "queue" while a run works waits, and starts by itself in the
transaction that stores the run's `complete`, first in first out."""

from __future__ import annotations

import asyncio
import io

import pytest
from asgiref.sync import sync_to_async

from chat.conversations import uploads
from chat.conversations.services import conversation_delete
from chat.exceptions import RateLimited
from chat.models import Event, QueuedMessage, Run
from chat.runs import engine, queue
from chat.runs.client_frames import ProtocolError
from chat.runs.queue import Queued
from chat.runs.requests import CancelRun, StartRun, Unqueue
from tests.fakellm import text_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def queue_of(conversation, content: str) -> StartRun:
    return StartRun(conversation, conversation.owner, content, while_running="queue")


@sync_to_async
def events_of(conversation) -> list[dict]:
    return [
        {**payload, "seq": seq, "runId": run_id}
        for seq, run_id, payload in Event.objects.filter(conversation=conversation)
        .order_by("seq")
        .values_list("seq", "run_id", "payload")
    ]


async def settle(registry, conversation, runs: int, timeout: float = 15.0) -> None:
    """Until `runs` runs of the conversation are finished and nothing runs."""
    async with asyncio.timeout(timeout):
        while True:
            await registry.wait_idle()
            done = await Run.objects.filter(conversation=conversation).exclude(status="running").acount()
            running = await Run.objects.filter(conversation=conversation, status="running").aexists()
            if done >= runs and not running:
                return
            await asyncio.sleep(0.05)


async def test_waiting_messages_start_one_after_another_in_order(conversation, registry, llm_settings):
    llm_settings.script(
        text_reply("slow words " * 10, piece=2, delay=0.03), text_reply("two"), text_reply("three"), text_reply("four")
    )
    run, first_seq = await engine.send(queue_of(conversation, "one"))  # nothing runs: it starts at once
    queued = [await engine.send(queue_of(conversation, text)) for text in ("two", "three", "four")]
    assert all(isinstance(q, Queued) for q in queued)
    await settle(registry, conversation, 4)
    events = await events_of(conversation)
    by_seq = {e["seq"]: e for e in events}
    for q, text in zip(queued, ("two", "three", "four"), strict=True):
        assert by_seq[q.seq]["type"] == "queued" and by_seq[q.seq]["queueId"] == q.queue_id
        assert by_seq[q.seq]["runId"] is None and by_seq[q.seq]["content"] == text
    starts = [e for e in events if e["type"] == "user_message"]
    assert [e["content"] for e in starts] == ["one", "two", "three", "four"]
    assert "queueId" not in starts[0]
    assert [e.get("queueId") for e in starts[1:]] == [q.queue_id for q in queued]
    for before, start in zip(starts, starts[1:]):
        assert start["parentSeq"] == before["seq"]  # the turn that just ended
        previous = by_seq[start["seq"] - 1]
        assert previous["type"] == "complete" and previous["runId"] == before["runId"]
    assert [e["status"] for e in events if e["type"] == "complete"] == ["succeeded"] * 4
    assert not await QueuedMessage.objects.aexists()


async def test_queue_full_and_queueing_off(conversation, registry, llm_settings, settings):
    settings.AGENT_MAX_QUEUED = 2
    llm_settings.script(text_reply("slow " * 40, piece=1, delay=0.05))
    await engine.send(queue_of(conversation, "one"))
    await engine.send(queue_of(conversation, "two"))
    await engine.send(queue_of(conversation, "three"))
    with pytest.raises(ProtocolError) as refused:
        await engine.send(queue_of(conversation, "four"))
    assert refused.value.code == "QUEUE_FULL"
    assert await QueuedMessage.objects.acount() == 2
    assert await Event.objects.filter(type="queued").acount() == 2  # the refused one stored nothing
    settings.AGENT_MAX_QUEUED = 0
    await engine.unqueue(Unqueue(conversation.pk, str((await QueuedMessage.objects.afirst()).pk)))
    with pytest.raises(ProtocolError) as refused:
        await engine.send(queue_of(conversation, "five"))
    assert refused.value.code == "QUEUE_FULL"
    await engine.cancel_clearing(CancelRun(conversation.pk, clear_queue=True))
    await settle(registry, conversation, 1)


async def test_withdrawn_message_does_not_start_and_is_not_queued_twice(conversation, registry, llm_settings):
    llm_settings.script(text_reply("slow " * 30, piece=1, delay=0.03), text_reply("after"))
    await engine.send(queue_of(conversation, "one"))
    gone = await engine.send(queue_of(conversation, "two"))
    kept = await engine.send(queue_of(conversation, "three"))
    assert isinstance(gone, Queued) and isinstance(kept, Queued)
    await engine.unqueue(Unqueue(conversation.pk, gone.queue_id))
    for wrong in (gone.queue_id, "not-a-uuid", "00000000-0000-0000-0000-000000000000"):
        with pytest.raises(ProtocolError) as refused:
            await engine.unqueue(Unqueue(conversation.pk, wrong))
        assert refused.value.code == "NOT_QUEUED"
    await settle(registry, conversation, 2)
    events = await events_of(conversation)
    unqueued = [e for e in events if e["type"] == "unqueued"]
    assert [(e["queueId"], e["reason"], e["runId"]) for e in unqueued] == [(gone.queue_id, "withdrawn", None)]
    starts = [e for e in events if e["type"] == "user_message"]
    assert [e["content"] for e in starts] == ["one", "three"]
    with pytest.raises(ProtocolError) as refused:  # started: no longer waiting
        await engine.unqueue(Unqueue(conversation.pk, kept.queue_id))
    assert refused.value.code == "NOT_QUEUED"


async def test_cancel_with_clear_queue_withdraws_all_and_nothing_starts(conversation, registry, llm_settings):
    llm_settings.script(text_reply("slow " * 40, piece=1, delay=0.05))
    await engine.send(queue_of(conversation, "one"))
    queued = [await engine.send(queue_of(conversation, t)) for t in ("two", "three")]
    cancelled, cleared = await engine.cancel_clearing(CancelRun(conversation.pk, clear_queue=True))
    assert (cancelled, cleared) == (True, 2)
    await settle(registry, conversation, 1)
    await asyncio.sleep(0.2)
    events = await events_of(conversation)
    assert [(e["queueId"], e["reason"]) for e in events if e["type"] == "unqueued"] == [
        (q.queue_id, "cleared") for q in queued
    ]
    assert [e["content"] for e in events if e["type"] == "user_message"] == ["one"]
    assert await Run.objects.acount() == 1
    assert events[-1]["type"] == "complete" and events[-1]["status"] == "cancelled"


async def test_cancel_without_clear_queue_starts_the_next_after_the_cancelled_complete(
    conversation, registry, llm_settings
):
    llm_settings.script(text_reply("slow " * 40, piece=1, delay=0.05), text_reply("next"))
    await engine.send(queue_of(conversation, "one"))
    queued = await engine.send(queue_of(conversation, "two"))
    assert await engine.cancel_clearing(CancelRun(conversation.pk)) == (True, 0)
    await settle(registry, conversation, 2)
    events = await events_of(conversation)
    completes = [e for e in events if e["type"] == "complete"]
    assert [c["status"] for c in completes] == ["cancelled", "succeeded"]
    start = next(e for e in events if e["type"] == "user_message" and e.get("queueId") == queued.queue_id)
    assert start["seq"] == completes[0]["seq"] + 1


async def test_refused_starts_leave_the_queue_with_their_code(conversation, registry, llm_settings, settings):
    llm_settings.script(text_reply("slow " * 20, piece=1, delay=0.05), text_reply("ok"))
    await engine.send(queue_of(conversation, "one"))
    refused = await engine.send(queue_of(conversation, "two"))
    also = await engine.send(queue_of(conversation, "three"))
    settings.AGENT_MESSAGES_PER_MINUTE = 1  # "one" used the minute's message
    await settle(registry, conversation, 1)
    events = await events_of(conversation)
    unqueued = [e for e in events if e["type"] == "unqueued"]
    assert [(e["queueId"], e["reason"], e["code"], e["runId"]) for e in unqueued] == [
        (refused.queue_id, "refused", "RATE_LIMITED", None),
        (also.queue_id, "refused", "RATE_LIMITED", None),
    ]
    complete = next(e for e in events if e["type"] == "complete")
    assert [e["seq"] for e in unqueued] == [complete["seq"] + 1, complete["seq"] + 2]
    assert await Run.objects.acount() == 1 and not await QueuedMessage.objects.aexists()


async def test_after_a_refused_start_the_next_message_is_tried(conversation, registry, llm_settings, monkeypatch):
    real = queue.start_with_memory

    def refusing(starts):  # the start's rules refuse "two" only (as a rate limit would)
        if starts[0].message.content == "two":
            return [RateLimited("test")]
        return real(starts)

    monkeypatch.setattr(queue, "start_with_memory", refusing)
    llm_settings.script(text_reply("slow " * 20, piece=1, delay=0.05), text_reply("ok"))
    await engine.send(queue_of(conversation, "one"))
    refused = await engine.send(queue_of(conversation, "two"))
    kept = await engine.send(queue_of(conversation, "three"))
    await settle(registry, conversation, 2)
    events = await events_of(conversation)
    complete = next(e for e in events if e["type"] == "complete")
    after = [e for e in events if e["seq"] > complete["seq"]][:2]
    assert (after[0]["type"], after[0]["queueId"], after[0]["code"]) == ("unqueued", refused.queue_id, "RATE_LIMITED")
    assert (after[1]["type"], after[1]["queueId"], after[1]["content"]) == ("user_message", kept.queue_id, "three")
    assert after[1]["seq"] == complete["seq"] + 2


async def test_a_queue_message_with_nothing_running_starts_at_once(conversation, registry, llm_settings):
    llm_settings.script(text_reply("hi"))
    run, seq = await engine.send(queue_of(conversation, "hello"))
    assert seq == 1 and run.conversation_id == conversation.pk
    await settle(registry, conversation, 1)
    assert not await Event.objects.filter(type="queued").aexists()


async def test_a_waiting_message_whose_file_was_deleted_is_refused(
    conversation, registry, llm_settings, settings, tmp_path
):
    settings.AGENT_WORKSPACE_ROOT = tmp_path
    await sync_to_async(uploads.file_store)(
        conversation_id=conversation.pk, path="notes.txt", chunks=[b"hi"], size=2, source=io.BytesIO(b"hi")
    )
    llm_settings.script(text_reply("slow " * 20, piece=1, delay=0.05), text_reply("ok"))
    await engine.send(queue_of(conversation, "one"))
    files = tuple(
        await sync_to_async(uploads.attachments_resolve)(conversation_id=conversation.pk, paths=["notes.txt"])
    )
    with_file = await engine.send(
        StartRun(conversation, conversation.owner, "", attachments=files, while_running="queue")
    )
    plain = await engine.send(queue_of(conversation, "plain"))
    queued = await Event.objects.aget(type="queued", payload__queueId=with_file.queue_id)
    assert queued.payload["attachments"] == [{"path": "notes.txt", "size": 2}]
    await sync_to_async(uploads.file_remove)(conversation_id=conversation.pk, path="notes.txt")
    await settle(registry, conversation, 2)
    events = await events_of(conversation)
    refused = next(e for e in events if e["type"] == "unqueued")
    assert (refused["queueId"], refused["reason"], refused["code"]) == (with_file.queue_id, "refused", "BAD_REQUEST")
    start = events[[e["seq"] for e in events].index(refused["seq"]) + 1]
    assert (start["type"], start["queueId"]) == ("user_message", plain.queue_id)


async def test_a_conversation_deleted_while_messages_wait_takes_them_along(conversation, registry, llm_settings):
    llm_settings.script(text_reply("slow " * 40, piece=1, delay=0.05), text_reply("never"))
    run, _ = await engine.send(queue_of(conversation, "one"))
    waiting = await engine.send(queue_of(conversation, "two"))
    assert isinstance(waiting, Queued) and await QueuedMessage.objects.acount() == 1
    await sync_to_async(conversation_delete)(conversation=conversation)
    await registry.wait_idle()
    assert not await QueuedMessage.objects.aexists()
    assert not await Run.objects.filter(conversation_id=conversation.pk).aexists()  # none started after it
    with pytest.raises(ProtocolError) as gone:
        await engine.unqueue(Unqueue(conversation.pk, waiting.queue_id))
    assert gone.value.code == "NOT_QUEUED"
