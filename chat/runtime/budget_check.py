"""The check before every model call of a run, each attempt (docs/protocol.md, "Budgets"): a
model interceptor injected into the core (chat.agent.hooks) that ends the run with
BUDGET_EXHAUSTED, between two model calls, once a budget it is held to is used up. What the run
said so far stays its answer."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from django.utils import timezone

from chat.accounts.budgets import budget_stop
from chat.agent.events import ErrorEvent
from chat.agent.hooks import AgentHook, AgentState, ModelHandler, ModelInterceptor, StopRun
from chat.agent.turns import ModelRequest, ModelTurn, Usage
from chat.ops.metrics import budget_counted

BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"


class BudgetCheck(AgentHook, ModelInterceptor):
    """A model interceptor (it sees every attempt, retries included) and a hook (after_model: the
    usage of the run's calls in this process, which the sink may not have stored yet)."""

    def __init__(self, *, run_id: Any, user_id: Any, agent_id: int | None, model: str):
        self.run_id, self.user_id, self.agent_id, self.model = run_id, user_id, agent_id, model
        # When this process took the run up: its calls from before (a resumed run's) are stored.
        self.since = timezone.now()
        self.usage = Usage()

    async def after_model(self, state: AgentState, turn: ModelTurn) -> None:
        self.usage = state.usage

    async def intercept_model(self, request: ModelRequest, call_next: ModelHandler) -> ModelTurn:
        usage = self.usage
        own = (self.model, usage.prompt_tokens, usage.completion_tokens, usage.total_tokens)
        check = database_sync_to_async(budget_stop, thread_sensitive=False)
        stop = await check(run_id=self.run_id, user_id=self.user_id, agent_id=self.agent_id, own=own, since=self.since)
        if stop is not None:
            budget = stop["budget"]
            await database_sync_to_async(budget_counted, thread_sensitive=False)(kind="stops", scope=budget["scope"])
            message = (
                f"A budget is used up ({budget['scope']}, {budget['period']}, {budget['unit']}): the run stops here."
            )
            detail = f"{budget['used']} of {budget['limit']} {budget['unit']} used"
            raise StopRun(ErrorEvent(BUDGET_EXHAUSTED, message, detail, extra=stop))
        return await call_next(request)
