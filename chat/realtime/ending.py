"""A request's cleanup run to the end: a channel that is no consumer's ended (a health
probe's), a stream's groups left.

A request's channel (a health probe's) or its memberships (an SSE stream's, a streamed
completion's: chat.realtime.follow) are ended in the request's own cleanup, and Django cancels a
request when its client goes. A client that closes as its stream ends (the usual way: it read
`complete`) cancelled that cleanup at its first await, and the channel stayed joined and
subscribed for the life of the process (the soak: 19 channels of ended streams on Redis after 7
minutes). The cleanup runs as a task of its own: a cancelled request stops waiting for it, not
the cleanup.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

logger = logging.getLogger(__name__)

# The endings under way (a task nobody holds may be collected before it ends).
_ending: set[asyncio.Task] = set()


async def to_the_end(cleanup: Coroutine[Any, Any, None]) -> None:
    """Await `cleanup`; cancelled meanwhile, the caller stops waiting and the cleanup goes on."""
    task = asyncio.ensure_future(cleanup)
    _ending.add(task)
    task.add_done_callback(_ending.discard)
    await asyncio.shield(task)


async def end_channel(layer, channel: str) -> None:
    await to_the_end(_end(layer, channel))


async def _end(layer, channel: str) -> None:
    try:
        await layer.discard_channel(channel)
    except Exception:
        logger.info("could not end channel %s", channel, exc_info=True)
