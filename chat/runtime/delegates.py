"""A run's delegates as tools (docs/protocol.md, "Sub-agents"): one function `agent__<slug>` per
delegate of its profile that its user may use, when it is not at AGENT_MAX_DELEGATION_DEPTH. A
call starts a child run of the delegate's profile (chat.eventlog.children) and ends with its
outcome. The agent core sees only a tool source and a tool interceptor: it knows nothing of runs.

The interceptor runs the call outside the loop's tool timeout (AGENT_TOOL_TIMEOUT does not bound
a child run: its own limits do) and before the tool error policy, so that a failed child's result
is exactly `{"error": "agent <slug> <status>: <message>"}`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model

from chat.agent.hooks import ToolCallRequest, ToolHandler, ToolInterceptor, ToolOutcome
from chat.agent.tools import Tool, ToolError, json_object, schema_tool
from chat.agents.delegation import tool_name, usable_delegates
from chat.agents.profiles import AgentConfig, profile_config
from chat.eventlog.children import ChildOutcome, child_run_start, failure
from chat.eventlog.compactions import first_turn
from chat.models import AgentProfile

PARAMETERS = {
    "type": "object",
    "properties": {
        "task": {
            "type": "string",
            "description": "The task for this agent, with everything it needs to know: it sees nothing else "
            "of the conversation.",
        }
    },
    "required": ["task"],
}


# What runs a stored child run to its end in this process (the registry's run_child).
RunChild = Callable[..., Awaitable[ChildOutcome]]


class Delegation(ToolInterceptor):
    """The delegate tools of one run: `source` finds them when the run starts, `intercept_tool`
    turns their calls into child runs. `run_child` is read at each call (the registry sets it)."""

    def __init__(
        self,
        *,
        run_id,
        user_id,
        depth: int,
        profile_id: int | None,
        worker: Callable[[], str],
        run_child: Callable[[], RunChild | None],
        started: Callable[[str], Awaitable[None]],
        unattended: bool = False,
    ) -> None:
        self.run_id, self.user_id, self.depth, self.profile_id = run_id, user_id, depth, profile_id
        self._worker, self._run_child, self._started = worker, run_child, started
        self.unattended = unattended  # a run nobody watches: nor do its children (approvals denied at once)
        self.offered: dict[str, AgentProfile] = {}  # tool name ->

    async def source(self) -> list[Tool]:
        if self.profile_id is None or self.depth >= settings.AGENT_MAX_DELEGATION_DEPTH:
            return []
        profiles = await database_sync_to_async(_usable)(profile_id=self.profile_id, user_id=self.user_id)
        self.offered = {tool_name(p.slug): p for p in profiles}
        return [
            schema_tool(name, p.description or p.name, PARAMETERS, _never_called) for name, p in self.offered.items()
        ]

    async def intercept_tool(self, request: ToolCallRequest, call_next: ToolHandler) -> ToolOutcome:
        profile = self.offered.get(request.call.name)
        if profile is None:
            return await call_next(request)  # an agent__ tool not offered: unknown, a tool error
        task = task_of(request.call.arguments)
        run_child = self._run_child()
        if run_child is None:
            raise ToolError(f"agent {profile.slug} could not be started")
        await self._started(request.call.id)  # the child's events come after the call's tool_start
        run, frames = await database_sync_to_async(child_run_start)(
            parent_id=self.run_id, tool_call_id=request.call.id, profile=profile, task=task, worker=self._worker()
        )
        # Its memory is the task alone (with its system prompt): nothing of its parent's.
        outcome = await run_child(run, memory=first_turn(frames), announce=frames, config=self.child_config(profile))
        if outcome.status == "succeeded":
            return ToolOutcome(outcome.answer)
        raise ToolError(failure(profile.slug, outcome))

    def child_config(self, profile: AgentProfile) -> AgentConfig:
        return replace(profile_config(profile), unattended=self.unattended)


def task_of(arguments: str) -> str:
    """The call's `task`, or ToolError: missing, not a string, empty or too long."""
    task = json_object(arguments).get("task")
    if not isinstance(task, str):
        raise ToolError("task must be a string: the task for the agent")
    if not task.strip():
        raise ToolError("task must not be empty")
    if len(task) > settings.AGENT_MAX_MESSAGE_CHARS:
        raise ToolError(f"task is longer than {settings.AGENT_MAX_MESSAGE_CHARS} characters")
    return task


def _usable(*, profile_id: int, user_id: Any) -> list[AgentProfile]:
    profile = AgentProfile.objects.filter(pk=profile_id).first()
    user = get_user_model().objects.filter(pk=user_id).first()
    if profile is None or user is None:
        return []
    return usable_delegates(profile, user=user)


async def _never_called(arguments: dict[str, Any], context: Any) -> str:
    raise ToolError("a delegate is called through its run's Delegation")
