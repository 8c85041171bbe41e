"""The server's half of approvals (docs/protocol.md, "Approvals"): where a run's open requests wait.

A run of this process registers each request at its process's desk before the request is
stored (chat.agent.approval asks, `RunAnswers` is its `Answers`). An `approve` frame from
any socket of the owner reaches the desk of the process that runs the run: directly when
that is the socket's own process, else as a message on that process's run channel, the
way `cancel` travels (the supervisor's listener hands it to the desk). The first answer
resolves the request; a later one finds it gone and is refused, and the socket that sent
it is told (on another process, through its own channel: REFUSED_MESSAGE).

Nothing here is stored: the run emits `approval_result` itself, so the log says what the
run did. A request whose process dies is closed by the process that takes the run over
(services.run_interrupt).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from chat.agent.approval import Decision

APPROVE_MESSAGE = "run.approve"
# Sent back to the socket whose answer came too late (its consumer's `approval_refused`).
REFUSED_MESSAGE = "approval.refused"


class ApprovalDesk:
    """The open requests of this process's runs, keyed by (run id, tool call id)."""

    def __init__(self) -> None:
        self._open: dict[tuple[str, str], asyncio.Future[Decision]] = {}

    def for_run(self, run_id) -> RunAnswers:
        return RunAnswers(self, str(run_id))

    def answer(self, *, run_id, tool_call_id: str, decision: Decision) -> bool:
        """Resolve an open request; False when there is none (answered, expired, stopped)."""
        future = self._open.pop((str(run_id), tool_call_id), None)
        if future is None or future.done():
            return False
        future.set_result(decision)
        return True

    def register(self, run_id: str, tool_call_ids: Sequence[str]) -> dict[str, asyncio.Future[Decision]]:
        loop = asyncio.get_running_loop()
        futures = {call_id: loop.create_future() for call_id in tool_call_ids}
        for call_id, future in futures.items():
            self._open[(run_id, call_id)] = future
        return futures

    def close(self, run_id: str, tool_call_ids: Sequence[str]) -> None:
        for call_id in tool_call_ids:
            self._open.pop((run_id, call_id), None)


class RunAnswers:
    """One run's `Answers` (chat.agent.approval)."""

    def __init__(self, desk: ApprovalDesk, run_id: str) -> None:
        self.desk = desk
        self.run_id = run_id

    def expect(self, tool_call_ids: Sequence[str]) -> dict[str, asyncio.Future[Decision]]:
        return self.desk.register(self.run_id, tool_call_ids)

    def forget(self, tool_call_ids: Sequence[str]) -> None:
        self.desk.close(self.run_id, tool_call_ids)
