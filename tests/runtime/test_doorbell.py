"""chat.runtime.doorbell: a publish rings the conversation's group with its frames; one the layer
refused is kept (the newest frames of each conversation) and rung again when the layer answers,
and after an outage every watching socket is told to catch up."""

from __future__ import annotations

import pytest
from channels.layers import get_channel_layer

from chat.runtime import doorbell
from chat.runtime.doorbell import conversation_group, has_missed, layer_back, publish, unwatch, watch


def _frames(*seqs):
    return [{"type": "text", "content": str(seq), "seq": seq, "runId": "r"} for seq in seqs]


class BrokenLayer:
    async def group_send(self, group, message):
        raise ConnectionError("the layer is down")


@pytest.fixture
def layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    return get_channel_layer()


async def test_a_publish_rings_the_conversations_group_with_its_frames(layer):
    channel = await layer.new_channel()
    await layer.group_add(conversation_group("c1"), channel)
    await publish("c1", _frames(1, 2))
    message = await layer.receive(channel)
    assert message == {"type": "chat.events", "events": _frames(1, 2), "group": "conversation.c1"}
    await publish("c1", [])  # nothing to ring: no message
    assert not has_missed()


async def test_a_refused_publish_is_rung_again_when_the_layer_answers(layer, monkeypatch):
    monkeypatch.setattr(doorbell, "get_channel_layer", lambda: BrokenLayer())
    await publish("c1", _frames(3))
    await publish("c1", _frames(4, 5))
    await publish("c1", _frames(2))  # older than what is kept: the newest frames stay
    assert has_missed()
    told = []

    def catch_up():
        told.append("catch up")

    watch(catch_up)
    monkeypatch.undo()
    channel = await layer.new_channel()
    await layer.group_add(conversation_group("c1"), channel)
    await layer_back(was_down=False)  # a publish failed, the subscriptions held: no catch-up
    assert (await layer.receive(channel))["events"] == _frames(4, 5)
    assert not has_missed() and told == []
    await layer_back(was_down=True)
    assert told == ["catch up"]
    unwatch(catch_up)
    await layer_back(was_down=True)
    assert told == ["catch up"]  # no longer watching
