"""Steering (docs/protocol.md, "Steering"), through the front door (chat.runs.engine): a message
sent with whileRunning "steer" while a run works is a `steer` event of that run; the run takes it
in right before its next model call (`steer_applied`, and the request holds it after the tool
round's results), or, ending first, leaves it as the first waiting message."""

from __future__ import annotations

import asyncio
import io

import pytest
from asgiref.sync import sync_to_async

from chat.conversations import uploads
from chat.eventlog.reads import queue_waiting
from chat.models import QueuedMessage, Run
from chat.runs import engine
from chat.runs.client_frames import ProtocolError
from chat.runs.queue import Queued, Steered, queue_rows
from chat.runs.requests import CancelRun, StartRun, Unqueue, start_request
from tests.fakellm import text_reply, tool_call_reply
from tests.runs.test_queue import events_of, queue_of, settle

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def steer_of(conversation, content: str) -> StartRun:
    return StartRun(conversation, conversation.owner, content, while_running="steer")


async def requested(fake, count: int, timeout: float = 10.0) -> None:
    """Until the fake model has received `count` requests."""
    async with asyncio.timeout(timeout):
        while len(fake.requests) < count:
            await asyncio.sleep(0.01)


async def test_a_steer_reaches_the_next_request_after_the_tool_results(conversation, registry, llm_settings):
    # The first model call is slow: the steer comes while it is in flight, which it never cuts.
    llm_settings.script(tool_call_reply(("calculator", {"expression": "6*7"}), delay=0.3), text_reply("42, hi"))
    run, _ = await engine.send(StartRun(conversation, conversation.owner, "compute 6*7"))
    await requested(llm_settings, 1)
    steered = await engine.send(steer_of(conversation, "and say hi"))
    assert isinstance(steered, Steered) and steered.run_id == str(run.pk)
    await settle(registry, conversation, 1)

    second = llm_settings.requests[1]["messages"]
    assert [m["role"] for m in second[-3:]] == ["assistant", "tool", "user"]
    assert second[-2]["content"] == "42" and second[-1]["content"] == "and say hi"
    assert "and say hi" not in str(llm_settings.requests[0]["messages"])

    events = await events_of(conversation)
    kinds = [(e["type"], e["runId"]) for e in events]
    steer = next(e for e in events if e["type"] == "steer")
    applied = next(e for e in events if e["type"] == "steer_applied")
    assert (steer["seq"], steer["queueId"], steer["content"], steer["runId"]) == (
        steered.seq,
        steered.queue_id,
        "and say hi",
        run.pk,
    )
    assert applied["queueId"] == steered.queue_id and applied["runId"] == run.pk
    tool_end = next(e for e in events if e["type"] == "tool_end")
    second_text = next(e for e in events if e["type"] == "text")
    assert steer["seq"] < tool_end["seq"] < applied["seq"] < second_text["seq"]
    assert ("queued", None) not in kinds and events[-1]["type"] == "complete"
    assert events[-1]["status"] == "succeeded"
    assert not await QueuedMessage.objects.aexists()  # taken in, then gone with the run's end

    # The next turn remembers the steer where the run took it in.
    llm_settings.script(text_reply("ok"))
    await engine.send(StartRun(conversation, conversation.owner, "next"))
    await settle(registry, conversation, 2)
    memory = [(m["role"], m.get("content")) for m in llm_settings.requests[2]["messages"]]
    assert memory.index(("tool", "42")) < memory.index(("user", "and say hi")) < memory.index(("user", "next"))


async def test_a_steer_the_run_ends_without_becomes_the_first_waiting_message(conversation, registry, llm_settings):
    llm_settings.script(text_reply("slow " * 30, piece=1, delay=0.03), text_reply("steered answer"))
    run, _ = await engine.send(StartRun(conversation, conversation.owner, "one"))
    queued = await engine.send(queue_of(conversation, "queued before"))
    await requested(llm_settings, 1)
    steered = await engine.send(steer_of(conversation, "too late"))
    assert isinstance(queued, Queued) and isinstance(steered, Steered)
    waiting, steers = await sync_to_async(queue_waiting)(conversation_id=conversation.pk)
    assert (waiting, steers) == ([queued.queue_id], [steered.queue_id])
    await settle(registry, conversation, 3)

    events = await events_of(conversation)
    completes = [e for e in events if e["type"] == "complete"]
    by_seq = {e["seq"]: e for e in events}
    became = by_seq[completes[0]["seq"] - 1]  # stored before its run's complete
    assert (became["type"], became["queueId"], became["content"], became["steered"], became["runId"]) == (
        "queued",
        steered.queue_id,
        "too late",
        True,
        None,
    )
    assert not any(e["type"] == "steer_applied" for e in events)
    starts = [e for e in events if e["type"] == "user_message"]
    # The steer starts first, then the message queued before it.
    assert [(e["content"], e.get("queueId")) for e in starts] == [
        ("one", None),
        ("too late", steered.queue_id),
        ("queued before", queued.queue_id),
    ]
    assert starts[1]["seq"] == completes[0]["seq"] + 1 and starts[1]["parentSeq"] == starts[0]["seq"]
    assert not await QueuedMessage.objects.aexists()


async def test_a_pending_steer_can_be_withdrawn_and_a_taken_one_cannot(conversation, registry, llm_settings):
    llm_settings.script(
        tool_call_reply(("calculator", {"expression": "1+1"}), delay=0.3),
        tool_call_reply(("calculator", {"expression": "2+2"}), delay=0.3),
        text_reply("done"),
    )
    await engine.send(StartRun(conversation, conversation.owner, "go"))
    await requested(llm_settings, 1)
    withdrawn = await engine.send(steer_of(conversation, "never mind"))
    taken = await engine.send(steer_of(conversation, "keep this"))
    waiting, steers = await sync_to_async(queue_rows)(conversation_id=conversation.pk)
    assert waiting == [] and [str(r.pk) for r in steers] == [withdrawn.queue_id, taken.queue_id]
    await engine.unqueue(Unqueue(conversation.pk, withdrawn.queue_id))
    await requested(llm_settings, 2)
    with pytest.raises(ProtocolError) as refused:  # taken in before the second call
        await engine.unqueue(Unqueue(conversation.pk, taken.queue_id))
    assert refused.value.code == "NOT_QUEUED"
    await settle(registry, conversation, 1)
    events = await events_of(conversation)
    assert [(e["queueId"], e["reason"], e["runId"]) for e in events if e["type"] == "unqueued"] == [
        (withdrawn.queue_id, "withdrawn", None)
    ]
    assert [e["queueId"] for e in events if e["type"] == "steer_applied"] == [taken.queue_id]
    assert "never mind" not in str(llm_settings.requests)
    assert [m["content"] for m in llm_settings.requests[1]["messages"] if m["role"] == "user"] == ["go", "keep this"]


async def test_cancel_leaves_pending_steers_waiting_and_clear_queue_withdraws_them(
    conversation, registry, llm_settings
):
    llm_settings.script(text_reply("slow " * 40, piece=1, delay=0.05), text_reply("after"))
    await engine.send(StartRun(conversation, conversation.owner, "one"))
    await requested(llm_settings, 1)
    steered = await engine.send(steer_of(conversation, "steer"))
    assert await engine.cancel_clearing(CancelRun(conversation.pk)) == (True, 0)
    await settle(registry, conversation, 2)
    events = await events_of(conversation)
    assert [e["status"] for e in events if e["type"] == "complete"] == ["cancelled", "succeeded"]
    start = [e for e in events if e["type"] == "user_message"][1]
    assert (start["content"], start["queueId"]) == ("steer", steered.queue_id)

    llm_settings.script(text_reply("slow " * 40, piece=1, delay=0.05))
    await engine.send(StartRun(conversation, conversation.owner, "two"))
    await requested(llm_settings, 3)
    steer = await engine.send(steer_of(conversation, "dropped"))
    queued = await engine.send(queue_of(conversation, "dropped too"))
    assert await engine.cancel_clearing(CancelRun(conversation.pk, clear_queue=True)) == (True, 2)
    await settle(registry, conversation, 3)
    events = await events_of(conversation)
    assert [(e["queueId"], e["reason"]) for e in events if e["type"] == "unqueued"] == [
        (steer.queue_id, "cleared"),
        (queued.queue_id, "cleared"),
    ]
    assert await Run.objects.acount() == 3 and not await QueuedMessage.objects.aexists()


async def test_steer_with_nothing_running_starts_and_the_limits_count_steers(
    conversation, registry, llm_settings, settings
):
    llm_settings.script(text_reply("hi"))
    run, seq = await engine.send(steer_of(conversation, "hello"))  # nothing runs: a plain start
    assert seq == 1
    await settle(registry, conversation, 1)

    settings.AGENT_MAX_QUEUED = 2
    llm_settings.script(text_reply("slow " * 40, piece=1, delay=0.05))
    await engine.send(StartRun(conversation, conversation.owner, "two"))
    await requested(llm_settings, 2)  # its one model call under way: the steer waits for none
    await engine.send(steer_of(conversation, "a"))
    await engine.send(queue_of(conversation, "b"))
    for refused_one in (steer_of(conversation, "c"), queue_of(conversation, "c")):
        with pytest.raises(ProtocolError) as refused:
            await engine.send(refused_one)
        assert refused.value.code == "QUEUE_FULL"
    assert await QueuedMessage.objects.acount() == 2
    await engine.cancel_clearing(CancelRun(conversation.pk, clear_queue=True))
    await settle(registry, conversation, 2)


async def test_steer_frames_are_checked(conversation, settings, tmp_path):
    settings.AGENT_WORKSPACE_ROOT = tmp_path
    await sync_to_async(uploads.file_store)(
        conversation_id=conversation.pk, path="a.txt", chunks=[b"hi"], size=2, source=io.BytesIO(b"hi")
    )
    for frame, detail in (
        ({"content": "x", "whileRunning": "steer", "attachments": ["a.txt"]}, "steer with attachments"),
        ({"content": "x", "whileRunning": "steer", "parentSeq": 1}, "whileRunning with parentSeq"),
        ({"content": "x", "whileRunning": "push"}, "wrong field: whileRunning"),
    ):
        with pytest.raises(ProtocolError) as refused:
            await start_request("message", frame, conversation=conversation, user=conversation.owner, first=False)
        assert (refused.value.code, refused.value.detail) == ("BAD_REQUEST", detail)
