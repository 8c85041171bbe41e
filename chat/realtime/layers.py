"""The in-memory channel layer of a one-process deployment, without its per-message scans.

Channels' InMemoryChannelLayer walks every channel and every group membership to
expire old messages on each receive and group_send, and makes one task per member
in group_send. Both grow with the number of open sockets: at 200 streaming
conversations the scan alone took ~9% of the server's CPU (py-spy), and with 10,000 idle
sockets a scan a second of their groups was a twelfth of the idle server's CPU. Here the
scan runs at most once every CLEAN_INTERVAL (messages expire after a minute, memberships
after a day: an expired one goes a few seconds later, nothing observable changes) and
group_send puts the message on each member's queue directly.

Each member gets its own copy, as with Channels, but made by an orjson round
trip (1.1 us for a doorbell) instead of copy.deepcopy (6.5 us); a message that
JSON cannot give back equal (tuples, bytes, non-str keys, big ints, NaN) is
deep-copied as before.

Each channel's queue is a Mailbox (serving/mailbox.py), not an asyncio.Queue: every idle
socket waits on one.
"""

from __future__ import annotations

import asyncio
import time
from copy import deepcopy

import orjson
from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer as _ChannelsInMemoryLayer

from serving.mailbox import Mailbox

CLEAN_INTERVAL = 10.0  # seconds


def _copy(message: dict) -> dict:
    try:
        copied = orjson.loads(orjson.dumps(message))
    except TypeError:
        return deepcopy(message)
    return copied if copied == message else deepcopy(message)


class InMemoryChannelLayer(_ChannelsInMemoryLayer):
    _cleaned_at = 0.0

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Channels' in-memory layer keeps `channel_capacity` as given, and its get_capacity
        # expects the compiled form (channels-redis compiles it): any entry raised.
        self.channel_capacity = self.compile_capacities(self.channel_capacity)

    async def send(self, channel, message):
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        assert "__asgi_channel__" not in message
        try:
            self._mailbox(channel).put_nowait((time.time() + self.expiry, _copy(message)))
        except asyncio.QueueFull:
            raise ChannelFull(channel) from None

    async def receive(self, channel):
        """As Channels': the first message of the channel; the channel's queue goes once empty."""
        self.require_valid_channel_name(channel)
        self._clean_expired()
        queue = self._mailbox(channel)
        try:
            _, message = await queue.get()
        finally:
            if queue.empty():
                self.channels.pop(channel, None)
        return message

    async def discard_channel(self, channel: str) -> None:
        """The end of a channel (as the Redis layer's, chat/realtime/redis_layer.py): its queue goes."""
        self.channels.pop(channel, None)

    def _mailbox(self, channel) -> Mailbox:
        queue = self.channels.get(channel)
        if queue is None:
            queue = self.channels[channel] = Mailbox(maxsize=self.get_capacity(channel))
        return queue

    def _clean_expired(self):
        now = time.monotonic()
        if now - self._cleaned_at >= CLEAN_INTERVAL:
            self._cleaned_at = now
            self._expire()

    def _expire(self) -> None:
        """Channels' scan, on Mailboxes: an expired message goes, and takes its channel out of
        every group; a membership older than group_expiry ends."""
        now = time.time()
        for channel, queue in list(self.channels.items()):
            while not queue.empty() and queue.first()[0] < now:
                queue.get_nowait()
                self._remove_from_groups(channel)
                if queue.empty():
                    self.channels.pop(channel, None)
        joined_before = int(now) - self.group_expiry
        for members in self.groups.values():
            for name, joined in list(members.items()):
                if joined and joined < joined_before:
                    members.pop(name, None)

    async def group_send(self, group, message):
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        for channel in list(self.groups.get(group, ())):
            try:
                await self.send(channel, message)
            except ChannelFull:
                pass  # as Channels does: a full member misses it (our sockets refill from the database)
