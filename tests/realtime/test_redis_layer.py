"""chat/realtime/redis_layer.py on a real redis-server the test owns, stopped and started:
channels and group memberships made while Redis is away are owed, then made when it answers."""

from __future__ import annotations

import asyncio

import pytest
from redis.exceptions import RedisError

from chat.realtime.redis_layer import RedisPubSubChannelLayer
from tests.e2e.owned import OwnedRedis

pytestmark = [pytest.mark.services, pytest.mark.timeout(120)]


@pytest.fixture
def redis_server():
    server = OwnedRedis()
    server.start()
    yield server
    server.destroy()


async def _send_again(send, *args):
    """The sender's connection from before the restart fails once (closed by the server), as the
    doorbell's publish would: it rings again (chat/runtime/doorbell.py)."""
    for _ in range(3):
        try:
            return await send(*args)
        except RedisError:
            await asyncio.sleep(0.1)
    raise AssertionError("the sender never reached the restarted Redis")


async def _receive(layer, channel, timeout=5.0):
    async with asyncio.timeout(timeout):
        return await layer.receive(channel)


async def test_subscriptions_made_while_redis_is_away_are_owed_and_made_when_it_answers(redis_server):
    sender, layer = (RedisPubSubChannelLayer(hosts=[redis_server.url]) for _ in range(2))
    try:
        await sender.group_send("warm", {"type": "x"})  # both connected once, as a running server is
        redis_server.stop()
        # What Channels' consumer and our socket do at a handshake: no error.
        channel = await layer.new_channel()
        await layer.group_add("conversation.c1", channel)
        await layer.group_add("user.7", channel)
        assert layer.owes()
        assert await layer.pay_owed() == 0 and layer.owes()  # still away: still owed
        redis_server.start()
        assert await layer.pay_owed() == 3 and not layer.owes()
        await _send_again(sender.group_send, "conversation.c1", {"type": "chat.events", "n": 1})
        assert await _receive(layer, channel) == {"type": "chat.events", "n": 1}
        await sender.send(channel, {"type": "direct"})
        assert await _receive(layer, channel) == {"type": "direct"}
    finally:
        await sender.flush()
        await layer.flush()


async def test_a_member_that_leaves_before_redis_answers_is_not_subscribed(redis_server):
    layer = RedisPubSubChannelLayer(hosts=[redis_server.url])
    try:
        redis_server.stop()
        channel = await layer.new_channel()
        await layer.group_add("conversation.gone", channel)
        await layer.group_discard("conversation.gone", channel)  # the socket closed meanwhile
        redis_server.start()
        assert await layer.pay_owed() == 1  # its channel only: the group has no member left
        assert "conversation.gone" not in str(layer.groups)
    finally:
        await layer.flush()


async def test_group_add_of_a_channel_of_another_process_still_raises(redis_server):
    layer = RedisPubSubChannelLayer(hosts=[redis_server.url])
    try:
        with pytest.raises(RuntimeError, match="in-process"):
            await layer.group_add("g", "specific.elsewhere")
    finally:
        await layer.flush()
