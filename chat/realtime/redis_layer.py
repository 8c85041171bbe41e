"""channels-redis's pub/sub layer, able to subscribe while Redis is away.

Every socket subscribes at its handshake: Channels' consumer makes its channel (a SUBSCRIBE)
before the consumer's own code runs, and the socket joins its groups (more SUBSCRIBEs). With
Redis down each of those raised, so no page could connect until Redis was back, and a process
started meanwhile could not start its runtime. Here a subscription that fails is owed instead:
the channel and the group membership exist in the process at once (as the parent class makes
them before it subscribes), the socket is served from the database, and the subscriptions are
made when the layer answers again (`pay_owed`, called by the runtime's layer probe before it
tells every socket to catch up: joined first, then read, so nothing is missed between).
A group_add that fails for another reason (a channel not of this process) still raises.
"""

from __future__ import annotations

import asyncio
import logging

from channels_redis.pubsub import RedisPubSubChannelLayer as _PubSubLayer
from channels_redis.pubsub import RedisPubSubLoopLayer
from channels_redis.utils import _wrap_close

from chat.redis_errors import REDIS_AWAY
from serving.mailbox import Mailbox

logger = logging.getLogger(__name__)


class RedisPubSubChannelLayer(_PubSubLayer):
    """The layer named in settings: channels-redis's, with our loop layer under it (it keeps
    one per event loop; owes() and pay_owed() reach the running loop's through __getattr__)."""

    def _get_layer(self):
        loop = asyncio.get_running_loop()
        layer = self._layers.get(loop)
        if layer is None:
            layer = self._layers[loop] = _OwingLoopLayer(*self._args, **self._kwargs, channel_layer=self)
            _wrap_close(self, loop)
        return layer


class _OwingLoopLayer(RedisPubSubLoopLayer):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._owed: set[str] = set()

    async def _subscribe(self, name: str) -> None:
        try:
            await self._get_shard(name).subscribe(name)
        except REDIS_AWAY:
            if not self._owed:
                logger.warning("Redis does not answer: subscriptions are made when it does")
            self._owed.add(name)

    async def _subscribe_to_channel(self, channel):
        self.channels[channel] = Mailbox()  # not an asyncio.Queue: every idle socket holds one
        await self._subscribe(channel)

    async def group_add(self, group, channel):
        if channel not in self.channels:
            await super().group_add(group, channel)  # raises: not a channel of this process
            return
        group_channel = self._get_group_channel_name(group)
        self.groups.setdefault(group_channel, set()).add(channel)
        await self._subscribe(group_channel)

    async def group_discard(self, group, channel):
        group_channel = self._get_group_channel_name(group)
        members = self.groups.get(group_channel, set())
        if channel not in members:
            return
        members.remove(channel)
        if members:
            return
        del self.groups[group_channel]
        await self._unsubscribe(group_channel)

    async def discard_channel(self, channel: str) -> None:
        """The end of a channel of this process: its queue and its subscription go. Channels'
        consumers end theirs by cancelling a receive, which is the only place channels-redis
        unsubscribes; a stream or a probe whose last receive returned left both behind, one
        SUBSCRIBE and one queue for every SSE stream, completion and /healthz, for good."""
        if self.channels.pop(channel, None) is not None:
            await self._unsubscribe(channel)

    async def _unsubscribe(self, name: str) -> None:
        if name in self._owed:
            self._owed.discard(name)  # never subscribed: nothing to undo
            return
        try:
            await self._get_shard(name).unsubscribe(name)
        except REDIS_AWAY:
            # Left while Redis is away: the subscription comes back with the connection and
            # delivers to no member (a group without one, a channel without its queue): dropped.
            logger.info("Redis does not answer: %s stays subscribed", name)

    def owes(self) -> bool:
        return bool(self._owed)

    async def pay_owed(self) -> int:
        """Make the subscriptions that failed, those still wanted (a channel still open, a group
        with members); returns how many were made. One that fails again stays owed."""
        made = 0
        for name in list(self._owed):
            self._owed.discard(name)
            if name not in self.channels and not self.groups.get(name):
                continue
            await self._subscribe(name)
            made += name not in self._owed
        return made
