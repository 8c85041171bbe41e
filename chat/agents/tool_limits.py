"""Per-user rate limit on tool calls, as a tool interceptor.

A user may start at most AGENT_TOOL_RATE_LIMIT tool calls per minute, across
all their conversations and all server processes. The count is the user's
ToolRecord rows of the last 60 s (written by whichever process ran them, at
each tool_end) plus the calls this process is running for the user right now
(not yet written). A call over the limit is not run; the model reads an error
telling it to slow down.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from channels.db import database_sync_to_async
from django.utils import timezone

from chat.agent.hooks import ToolCallRequest, ToolHandler, ToolInterceptor, ToolOutcome
from chat.agent.tools import error_result
from chat.models import ToolRecord

WINDOW = timedelta(seconds=60)


def _recorded_calls(user_id: str) -> int:
    # An imported conversation's calls are history, whatever times its file gives them.
    return ToolRecord.objects.filter(
        run__user_id=user_id, run__imported=False, started_at__gte=timezone.now() - WINDOW
    ).count()


class ToolRateLimit(ToolInterceptor):
    def __init__(self, per_minute: int):
        self.per_minute = per_minute
        self._running: Counter[str] = Counter()

    async def intercept_tool(self, request: ToolCallRequest, call_next: ToolHandler) -> ToolOutcome:
        user_id = request.context.user_id
        if not self.per_minute or not user_id:
            return await call_next(request)
        # Count and claim without an await in between, so that parallel calls of one round see each other.
        running = self._running[user_id]
        self._running[user_id] += 1
        try:
            recorded = await database_sync_to_async(_recorded_calls)(user_id)
            if recorded + running >= self.per_minute:
                return ToolOutcome(
                    error_result(
                        f"tool rate limit reached: at most {self.per_minute} tool calls per minute per user. "
                        "Wait before calling tools again, or answer with what you have."
                    ),
                    True,
                )
            return await call_next(request)
        finally:
            self._running[user_id] -= 1
            if self._running[user_id] <= 0:
                del self._running[user_id]


# One per process: the in-flight counts must be shared by every run of the process.
_shared: dict[int, ToolRateLimit] = {}


def rate_limit(per_minute: int) -> ToolRateLimit:
    if per_minute not in _shared:
        _shared[per_minute] = ToolRateLimit(per_minute)
    return _shared[per_minute]
