"""The in-memory channel layer of chat/realtime/layers.py: same behaviour as Channels', less work per message."""

import asyncio

import pytest

from chat.realtime import layers


async def test_group_send_reaches_every_member_and_a_full_one_does_not_stop_the_rest():
    layer = layers.InMemoryChannelLayer(capacity=1)
    names = [await layer.new_channel() for _ in range(3)]
    for name in names:
        await layer.group_add("g", name)
    await layer.send(names[0], {"type": "filler"})  # names[0] is now full
    await layer.group_send("g", {"type": "x", "n": 1})
    assert (await layer.receive(names[0]))["type"] == "filler"
    assert [await layer.receive(n) for n in names[1:]] == [{"type": "x", "n": 1}] * 2
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await layer.receive(names[0])  # the message it had no room for is gone


async def test_members_get_copies_not_the_senders_object():
    layer = layers.InMemoryChannelLayer()
    name = await layer.new_channel()
    await layer.group_add("g", name)
    message = {"type": "x", "events": [{"seq": 1}]}
    await layer.group_send("g", message)
    received = await layer.receive(name)
    assert received == message and received["events"] is not message["events"]


async def test_expired_messages_still_go_and_drop_their_channel_from_groups(monkeypatch):
    layer = layers.InMemoryChannelLayer(expiry=0)
    stale, fresh = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("g", stale)
    await layer.group_add("g", fresh)
    await layer.send(stale, {"type": "old"})
    layer._cleaned_at = 0.0
    monkeypatch.setattr(layers, "CLEAN_INTERVAL", 0.0)
    await layer.group_send("g", {"type": "new"})  # runs the scan first: stale's message expired
    assert list(layer.groups["g"]) == [fresh]


async def test_the_expiry_scan_runs_at_most_once_an_interval(monkeypatch):
    layer = layers.InMemoryChannelLayer()
    scans = []
    monkeypatch.setattr(layers.InMemoryChannelLayer, "_expire", lambda self: scans.append(1))
    name = await layer.new_channel()
    await layer.group_add("g", name)
    for _ in range(50):
        await layer.group_send("g", {"type": "x"})
        await layer.receive(name)
    assert len(scans) == 1


@pytest.mark.parametrize("value", [(1, 2), b"raw", {1: "int key"}, 2**70, float("nan")])
async def test_a_message_json_cannot_hold_arrives_as_it_was_sent(value):
    layer = layers.InMemoryChannelLayer()
    name = await layer.new_channel()
    await layer.send(name, {"type": "x", "value": value})
    received = (await layer.receive(name))["value"]
    assert type(received) is type(value)
    assert received == value or (value != value and received != received)  # NaN is not equal to itself
