"""Where a run finds the steers its user sent it (docs/protocol.md, "Steering"): the agent core
asks before each model call (chat.agent.loop), and the run claims them from the database, where
any process may have stored them (chat.eventlog.steers)."""

from __future__ import annotations

from collections.abc import Sequence

from channels.db import database_sync_to_async

from chat.agent import Steer, SteeringSource
from chat.eventlog.steers import steers_take


def steering(*, conversation_id, run_id) -> SteeringSource:
    take = database_sync_to_async(steers_take)

    async def steers() -> Sequence[Steer]:
        return await take(conversation_id=conversation_id, run_id=run_id)

    return steers
