"""A run's first model request goes out before its user_message is published (issue 30), so
that the model's time to its first token overlaps the publishing; what the model says is still
stored and published only after the user_message, on every socket and in the database."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from chat.exceptions import RunInProgress
from chat.models import Event
from chat.runtime import execution
from chat.runtime.doorbell import conversation_group
from tests.fakellm import text_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def _stored(conversation_id) -> list[tuple[int, str]]:
    return list(Event.objects.filter(conversation_id=conversation_id).order_by("seq").values_list("seq", "type"))


async def _until(condition, timeout: float = 5.0) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def _published(channel: str) -> list[dict]:
    """The frames the conversation's sockets were sent, in order, up to `complete`."""
    layer, frames = get_channel_layer(), []
    async with asyncio.timeout(5):
        while not frames or frames[-1]["type"] != "complete":
            frames += (await layer.receive(channel))["events"]
    return frames


@pytest.fixture
async def listener(conversation):
    """A channel in the conversation's group: what every socket of it is sent."""
    layer = get_channel_layer()
    channel = await layer.new_channel("test.")
    await layer.group_add(conversation_group(conversation.pk), channel)
    yield channel
    await layer.group_discard(conversation_group(conversation.pk), channel)


async def test_the_model_answers_before_the_user_message_is_published_yet_its_text_follows_it(
    conversation, registry, llm_settings, listener, monkeypatch
):
    llm_settings.script(text_reply("Hello there", piece=3))
    publish, seen = execution.publish, {}

    async def publish_once_the_model_answered(conversation_id, frames):
        # The model's whole answer is in before the announce goes out: the request overlapped it.
        seen["answered first"] = await _until(lambda: llm_settings.stream_endings == ["done"])
        await publish(conversation_id, frames)

    monkeypatch.setattr(execution, "publish", publish_once_the_model_answered)
    run, seq = await registry.start(conversation=conversation, user=conversation.owner, content="hi")
    await registry.wait_idle()
    assert seen == {"answered first": True}
    frames = await _published(listener)
    kinds = [frame["type"] for frame in frames]
    assert kinds[0] == "user_message" and frames[0]["seq"] == seq
    assert kinds[1:] == ["text"] * (len(kinds) - 2) + ["complete"]
    assert "".join(frame["content"] for frame in frames if frame["type"] == "text") == "Hello there"
    assert [frame["seq"] for frame in frames] == list(range(seq, seq + len(frames)))
    stored = await sync_to_async(_stored)(conversation.pk)
    assert stored == [(frame["seq"], frame["type"]) for frame in frames]


async def test_a_run_cancelled_before_its_user_message_is_published_stops_its_model_call(
    conversation, registry, llm_settings, listener, monkeypatch
):
    llm_settings.script(text_reply("slow words " * 40, piece=2, delay=0.05))
    publish = execution.publish

    async def cancel_then_publish(conversation_id, frames):
        assert await _until(lambda: len(llm_settings.requests) == 1)  # the model call is under way
        assert await registry.cancel(conversation_id=conversation_id)
        await publish(conversation_id, frames)

    monkeypatch.setattr(execution, "publish", cancel_then_publish)
    run, seq = await registry.start(conversation=conversation, user=conversation.owner, content="go")
    await registry.wait_idle()
    frames = await _published(listener)
    assert frames[0]["type"] == "user_message" and frames[0]["seq"] == seq
    assert frames[-2]["code"] == "CANCELLED" and frames[-1]["status"] == "cancelled"
    assert not [frame for frame in frames if frame["type"] == "text"]  # cut before its first word was stored
    assert await llm_settings.endings() == ["aborted"]  # the stream was closed, not read to its end
    stored = await sync_to_async(_stored)(conversation.pk)
    assert stored == [(frame["seq"], frame["type"]) for frame in frames]


async def test_a_refused_start_sends_no_model_request(conversation, registry, llm_settings):
    llm_settings.script(text_reply("slow words " * 20, piece=2, delay=0.05))
    await registry.start(conversation=conversation, user=conversation.owner, content="first")
    with pytest.raises(RunInProgress):
        await registry.start(conversation=conversation, user=conversation.owner, content="second")
    await registry.wait_idle()
    assert [body["messages"][-1]["content"] for body in llm_settings.requests] == ["first"]
