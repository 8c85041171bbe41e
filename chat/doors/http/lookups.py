"""The HTTP doors' look-ups before a run starts, grouped across the requests of the moment (one
trip to a request database thread per group, chat.agent.batching.GroupedCalls) as the socket's
run starts are: in a burst, each request's look-up was a trip of its own (issue 55)."""

from __future__ import annotations

from chat.agent.batching import GroupedCalls
from chat.conversations.selectors import conversation_owned
from chat.models import Conversation
from serving.loop_middleware import request_db

# conversation_owned(user=, conversation_id=): the user's conversation, or None.
conversation_owned_grouped: GroupedCalls[Conversation | None] = GroupedCalls(
    conversation_owned, request_db, name="conversation-lookups"
)
