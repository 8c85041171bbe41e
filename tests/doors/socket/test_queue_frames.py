"""Queued messages and steers over the WebSocket (docs/protocol.md, "Queued messages" and
"Steering"): the `message` frame's whileRunning, `unqueue`, `cancel` with clearQueue, and
`sync.queue` and `sync.pendingSteers` after a reconnect."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from chat.conversations.services import conversation_create
from chat.models import Event, QueuedMessage, Run
from tests.fakellm import text_reply, tool_call_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


async def _socket(conversation, after: int | None = None):
    from tests.asgi_socket import Socket

    socket = Socket(conversation.owner, conversation.pk, after=after)
    await socket.connect()
    sync = (await socket.history())[-1]
    return socket, sync


async def test_queue_frames_withdraw_and_sync(conversation, registry, llm_settings):
    llm_settings.script(text_reply("slow " * 60, piece=1, delay=0.05), text_reply("second"))
    socket, sync = await _socket(conversation)
    assert sync["queue"] == [] and sync["pendingSteers"] == []
    await socket.send({"type": "message", "content": "one"})
    await socket.until(lambda f: f["type"] == "text")
    await socket.send({"type": "message", "content": "two", "whileRunning": "queue"})
    queued_two = (await socket.until(lambda f: f["type"] == "queued"))[-1]
    await socket.send({"type": "message", "content": "three", "whileRunning": "queue"})
    queued_three = (await socket.until(lambda f: f["type"] == "queued"))[-1]
    assert queued_two["runId"] is None and queued_two["content"] == "two"
    # A reconnect learns what waits.
    other, other_sync = await _socket(conversation)
    assert other_sync["queue"] == [queued_two["queueId"], queued_three["queueId"]]
    assert other_sync["running"] is True
    await other.close()
    await socket.send({"type": "unqueue", "queueId": queued_three["queueId"]})
    unqueued = (await socket.until(lambda f: f["type"] == "unqueued"))[-1]
    assert (unqueued["queueId"], unqueued["reason"], unqueued["runId"]) == (queued_three["queueId"], "withdrawn", None)
    await socket.send({"type": "unqueue", "queueId": queued_three["queueId"]})
    error = (await socket.until(lambda f: f["type"] == "error"))[-1]
    assert error["code"] == "NOT_QUEUED"
    first = await socket.run_to_end()
    complete = first[-1]
    start = await socket.recv()
    assert start["type"] == "user_message" and start["queueId"] == queued_two["queueId"]
    assert start["seq"] == complete["seq"] + 1
    second = await socket.run_to_end()
    assert second[-1]["status"] == "succeeded"
    assert await socket.silent(0.3)
    await registry.wait_idle()
    last, last_sync = await _socket(conversation, after=second[-1]["seq"])
    assert last_sync["queue"] == [] and last_sync["running"] is False
    await last.close()
    await socket.close()


@pytest.mark.parametrize(
    ("frame", "detail"),
    [
        ({"type": "message", "content": "x", "whileRunning": "later"}, "wrong field: whileRunning"),
        ({"type": "message", "content": "x", "whileRunning": 1}, "wrong field: whileRunning"),
        ({"type": "message", "content": "x", "whileRunning": "steer", "parentSeq": 1}, "whileRunning with parentSeq"),
        ({"type": "message", "content": "x", "whileRunning": "queue", "parentSeq": 1}, "whileRunning with parentSeq"),
        ({"type": "unqueue"}, "missing or wrong field: queueId"),
        ({"type": "unqueue", "queueId": 5}, "missing or wrong field: queueId"),
        ({"type": "cancel", "clearQueue": "yes"}, "wrong type: clearQueue"),
    ],
)
async def test_bad_queue_frames_are_refused_and_store_nothing(conversation, registry, frame, detail):
    socket, _ = await _socket(conversation)
    await socket.send(frame)
    error = await socket.recv()
    assert (error["type"], error["code"], error["detail"]) == ("error", "BAD_REQUEST", detail)
    assert not await Event.objects.aexists() and not await QueuedMessage.objects.aexists()
    await socket.close()


async def test_unknown_and_other_conversations_ids_are_not_queued(conversation, registry, llm_settings, make_user):
    llm_settings.script(text_reply("slow " * 40, piece=1, delay=0.05))
    other = await sync_to_async(conversation_create)(owner=conversation.owner, title="other")
    socket, _ = await _socket(other)
    await socket.send({"type": "message", "content": "one"})
    await socket.until(lambda f: f["type"] == "text")
    await socket.send({"type": "message", "content": "waits", "whileRunning": "queue"})
    queued = (await socket.until(lambda f: f["type"] == "queued"))[-1]
    mine, _ = await _socket(conversation)
    for queue_id in (queued["queueId"], "nope", "00000000-0000-0000-0000-000000000000"):
        await mine.send({"type": "unqueue", "queueId": queue_id})
        error = await mine.recv()
        assert error["code"] == "NOT_QUEUED"
    assert await QueuedMessage.objects.acount() == 1
    await socket.send({"type": "cancel", "clearQueue": True})
    frames = await socket.run_to_end()
    assert [(f["type"], f.get("reason")) for f in frames if f["type"] == "unqueued"] == [("unqueued", "cleared")]
    assert await socket.silent(0.3)
    await registry.wait_idle()
    assert await Run.objects.acount() == 1
    for s in (socket, mine):
        await s.close()


async def test_steer_frame_is_pending_in_sync_then_applied(conversation, registry, llm_settings):
    llm_settings.script(tool_call_reply(("calculator", {"expression": "1+2"}), delay=0.4), text_reply("3, shorter"))
    socket, _ = await _socket(conversation)
    await socket.send({"type": "message", "content": "add"})
    start = (await socket.until(lambda f: f["type"] == "user_message"))[-1]
    await socket.send({"type": "message", "content": "be brief", "whileRunning": "steer"})
    steer = (await socket.until(lambda f: f["type"] == "steer"))[-1]
    assert (steer["runId"], steer["content"]) == (start["runId"], "be brief")
    other, other_sync = await _socket(conversation)
    assert other_sync["pendingSteers"] == [steer["queueId"]] and other_sync["queue"] == []
    await other.close()
    frames = await socket.run_to_end()
    applied = next(f for f in frames if f["type"] == "steer_applied")
    tool_end = next(f for f in frames if f["type"] == "tool_end")
    assert applied["queueId"] == steer["queueId"] and applied["runId"] == start["runId"]
    assert tool_end["seq"] < applied["seq"] and frames[-1]["status"] == "succeeded"
    await registry.wait_idle()
    last, last_sync = await _socket(conversation, after=frames[-1]["seq"])
    assert last_sync["pendingSteers"] == [] and last_sync["queue"] == []
    await last.close()
    await socket.close()
