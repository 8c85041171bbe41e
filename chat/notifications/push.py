"""What reaches the user's bell sockets (`/ws/notifications/`), on every process: the channel
layer's group of the user's bells, joined by each bell socket (through its process's hub, as the
chat sockets join theirs). Best effort, as every push: a bell that misses one reads
`GET /api/notifications/?unread=1` when it reconnects."""

from __future__ import annotations

import logging
from typing import Any

from channels.layers import get_channel_layer

from chat.accounts.revocation import push

logger = logging.getLogger(__name__)

NEW = "notification.new"
UNREAD = "notification.unread"


def bell_group(user_id) -> str:
    """The user's bells only: a chat socket is not in it (nor counted as watching by it)."""
    return f"notifications.{user_id}"


async def push_new(user_id, notification: dict[str, Any]) -> None:
    group = bell_group(user_id)
    try:
        await get_channel_layer().group_send(group, {"type": NEW, "group": group, "notification": notification})
    except Exception:
        logger.warning("could not push a notification to user %s", user_id, exc_info=True)


def push_unread(user_id, count: int) -> None:
    """The unread count after a mark read, to every bell of the user (from a request's thread)."""
    push(bell_group(user_id), {"type": UNREAD, "count": count})
