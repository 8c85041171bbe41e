"""The title of a conversation, generated after its first answer (docs/protocol.md, "Titles, pinning, archiving").

Off the run's path: asked once the run's `complete` is stored and published, in a task of its
own, so the title never delays nor fails a run. The call is one of the conversation's agent
(chat.agent.titles), recorded as a model call of the run with purpose "title"; the title is
stored when the conversation still has none of its own (chat.conversations.titles) and sent as
a `title` frame, not persisted, to the conversation's sockets and streams. A failed call leaves
the title the first message gave, and says why in the log.
"""

from __future__ import annotations

import asyncio
import logging

from channels.db import database_sync_to_async
from django.conf import settings

from chat.agent import AgentRun
from chat.agent.batching import server_task
from chat.agent.events import RunStatus
from chat.agent.titles import ask_title
from chat.agents.profiles import AgentConfig
from chat.conversations.titles import title_store, title_wanted
from chat.runtime import build
from chat.runtime.doorbell import publish_title
from chat.runtime.sink import model_call_data

logger = logging.getLogger(__name__)

# The title tasks under way: held, so that none is collected before it ends.
_asking: set[asyncio.Task] = set()


def after_run(*, run_id, conversation_id, config: AgentConfig, agent_run: AgentRun) -> None:
    """A run ended and its outcome is stored: ask for its conversation's title when it ended
    with an answer (AGENT_TITLES on); whether the conversation waits for one is read first."""
    result = agent_run.result
    if not settings.AGENT_TITLES or result.status != RunStatus.SUCCEEDED or not result.text.strip():
        return
    task = server_task(_title(run_id, conversation_id, config, result.text), name=f"title-{run_id}")
    _asking.add(task)
    task.add_done_callback(_asking.discard)


async def _title(run_id, conversation_id, config: AgentConfig, answer: str) -> None:
    try:
        question = await database_sync_to_async(title_wanted)(conversation_id=conversation_id, run_id=run_id)
        if question is None:
            return
        attempt = await ask_title(
            build.build_chat_model(config),
            question=question,
            answer=answer,
            keep_messages=settings.AGENT_TRACE_REQUESTS,
        )
        if attempt.error:
            logger.warning("no title for conversation %s (run %s): %s", conversation_id, run_id, attempt.error)
        stored = await database_sync_to_async(title_store)(
            conversation_id=conversation_id, run_id=run_id, call=model_call_data(attempt.record), title=attempt.title
        )
        if stored:
            await publish_title(conversation_id, attempt.title)
    except Exception:  # the run is over and fine: its title stays the one its first message gave
        logger.exception("the title of conversation %s (run %s) could not be made", conversation_id, run_id)
