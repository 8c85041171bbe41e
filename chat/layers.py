"""The in-memory channel layer of a one-process deployment, without its per-message scans.

Channels' InMemoryChannelLayer walks every channel and every group membership to
expire old messages on each receive and group_send, and makes one task per member
in group_send. Both grow with the number of open sockets: at 200 streaming
conversations the scan alone took ~9% of the server's CPU (py-spy). Here the scan
runs at most once a second (messages expire after a minute, so nothing observable
changes) and group_send puts the message on each member's queue directly.
"""

from __future__ import annotations

import time

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer as _ChannelsInMemoryLayer

CLEAN_INTERVAL = 1.0


class InMemoryChannelLayer(_ChannelsInMemoryLayer):
    _cleaned_at = 0.0

    def _clean_expired(self):
        now = time.monotonic()
        if now - self._cleaned_at >= CLEAN_INTERVAL:
            self._cleaned_at = now
            super()._clean_expired()

    async def group_send(self, group, message):
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        for channel in list(self.groups.get(group, ())):
            try:
                await self.send(channel, message)
            except ChannelFull:
                pass  # as Channels does: a full member misses it (our sockets refill from the database)
