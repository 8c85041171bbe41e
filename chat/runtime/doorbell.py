"""The channel layer as a doorbell: group names, and publishing stored frames.

Delivery is at most once; a socket that sees a seq gap reads the database.
"""

from __future__ import annotations

import logging

from channels.layers import get_channel_layer

from chat.frames import EventFrame

logger = logging.getLogger(__name__)

# Every server process's run channel belongs to it: a process that stops rings it so that
# the others take over its runs at once (supervision).
PROCESSES_GROUP = "runs.processes"


def conversation_group(conversation_id) -> str:
    return f"conversation.{conversation_id}"


async def publish(conversation_id, frames: list[EventFrame]) -> None:
    """Ring the doorbell of every socket of the conversation; the frames ride along so that
    a socket that has seen everything before them needs no query."""
    if not frames:
        return
    try:
        await get_channel_layer().group_send(
            conversation_group(conversation_id), {"type": "chat.events", "events": frames}
        )
    except Exception:  # the layer is best effort; sockets fill gaps from the database
        logger.warning("group_send failed for conversation %s", conversation_id, exc_info=True)


async def ring_processes(message: dict) -> None:
    try:
        await get_channel_layer().group_send(PROCESSES_GROUP, message)
    except Exception:  # the others' reapers find the runs at their next pass anyway
        logger.warning("could not ring the other server processes", exc_info=True)
