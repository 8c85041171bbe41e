"""The HTTP doors' look-ups before a run starts, grouped across the requests of the moment as the
socket's run starts are: those asked while a group is read form the next, one trip to a request
database thread per group (issue 55). In a burst, each request's look-up was a trip of its own."""

from __future__ import annotations

from chat.agent.batching import Batcher
from chat.agent.perloop import PerLoop
from chat.conversations.selectors import conversations_owned
from chat.models import Conversation
from serving.loop_middleware import request_db

_owned: PerLoop[Batcher[tuple, Conversation | None]] = PerLoop(
    lambda: Batcher(request_db(conversations_owned), name="conversation-lookups")
)


async def conversation_owned_grouped(*, user, conversation_id) -> Conversation | None:
    """conversation_owned(user=, conversation_id=): the user's conversation, or None; one query
    for the group (conversations_owned)."""
    return await _owned.get().submit((user, conversation_id))
