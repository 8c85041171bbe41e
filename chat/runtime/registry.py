"""The process's run table: runs belong to the server process, not to a socket.

A run is an asyncio task (execution.py) that goes on when every socket closes
and ends only by finishing, failing, `cancel`, or the process stopping or dying
(then another process continues it: supervision.py). Runs are started by the
front door (chat.runs), which stores each start and hands the run here (`adopt`).
"""

from __future__ import annotations

import asyncio
import logging

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from chat.agent.approval import Decision
from chat.agent.batching import server_task
from chat.agent.perloop import PerLoop
from chat.agents.profiles import AgentConfig
from chat.eventlog import followups
from chat.eventlog.children import lineage
from chat.eventlog.compactions import Memory
from chat.eventlog.families import Waiting
from chat.eventlog.frames import EventFrame
from chat.eventlog.reads import approval_state, running_run
from chat.eventlog.takeover import run_request_cancel, runs_release
from chat.exceptions import ApprovalClosed, UnknownApproval
from chat.models import Run
from chat.runtime import build
from chat.runtime.approvals import APPROVE_MESSAGE, ApprovalDesk
from chat.runtime.delegates import ChildOutcome
from chat.runtime.doorbell import publish, ring_cancel, ring_processes
from chat.runtime.execution import (
    CANCELLED,
    DATABASE_OUTAGES,
    SHUT_DOWN,
    RunHandle,
    StopReason,
    child_outcome,
    execute,
)
from chat.runtime.head_start import HeadStarts
from chat.runtime.supervision import REAP_MESSAGE, Supervisor, install_sigterm_handler
from chat.runtime.writer import close_writer, get_writer

logger = logging.getLogger(__name__)

SHUTDOWN_GRACE_SECONDS = 5.0
# How often a run lost to a database outage tries to release itself while the database is down.
HAND_OVER_RETRY_SECONDS = 0.5


class RunRegistry:
    def __init__(self) -> None:
        self.channel = ""  # this process's run channel, also the `worker` of its runs (set at start)
        self.stopping = False
        self._handles: dict[str, RunHandle] = {}
        self.approvals = ApprovalDesk()
        self.heads = HeadStarts()  # begun by the front door's starts (chat.runs.starter)
        self._supervisor = Supervisor(self)
        self._started = asyncio.Lock()
        self._ready = False
        self._handing_over: set[asyncio.Task] = set()

    async def ensure_started(self) -> None:
        async with self._started:
            if self._ready:
                return
            self.channel = await get_channel_layer().new_channel("runs.")
            await self._supervisor.start()
            writer = get_writer()
            writer.worker, writer.follow = self.channel, self.follow
            install_sigterm_handler(_registries.instances)
            self._ready = True

    async def close(self) -> None:
        """Stop the background loops (tests, and loops that end); runs are left to finish."""
        await self._supervisor.stop()
        await close_writer()
        self._ready = False

    async def wait_idle(self, timeout: float = 10.0) -> None:
        """Wait until this process runs nothing (tests)."""
        tasks = [h.task for h in self._handles.values() if h.task]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    async def reap_once(self) -> int:
        """One reaper pass now (tests)."""
        await self.ensure_started()
        return await self._supervisor.reap_once()

    # -- the table ---------------------------------------------------------------------
    def run_ids(self) -> list[str]:
        return list(self._handles)

    def holds(self, run_id) -> bool:
        return str(run_id) in self._handles

    def stop(self, run_id, reason: StopReason) -> None:
        handle = self._handles.get(str(run_id))
        if handle is not None:
            handle.stop(reason)

    def abandon(self, run_id) -> None:
        handle = self._handles.get(str(run_id))
        if handle is not None:
            handle.abandon()

    def adopt(
        self,
        run: Run,
        *,
        memory: Memory,
        announce: list[EventFrame],
        config: AgentConfig,
        begun: RunHandle | None = None,
        waits: list[Waiting] | None = None,
    ) -> None:
        """Execute the run here: a new one, or one resumed from a dead process's, with the agent
        configuration read when it started (or was taken over); `begun`: its head start's handle;
        `waits`: the delegate calls a resumed run left open for its child runs, adopted before it."""
        key = str(run.pk)
        handle = begun or RunHandle(
            run_id=run.pk,
            conversation_id=run.conversation_id,
            user_id=run.user_id,
            resumes=run.resumes,
            config=config,
            answers=self.approvals.for_run(run.pk),
            depth=run.depth,
            lineage=lineage(run),
        )
        handle.worker, handle.follow, handle.run_child = self.channel, self.follow, self.run_child
        handle.waiting = [(wait, self._handles.get(wait.child_run_id)) for wait in waits or []]
        self._handles[key] = handle
        handle.task = server_task(execute(handle, memory=memory, announce=announce), name=f"run-{key}")
        handle.task.add_done_callback(lambda _: self._ended(handle))

    async def run_child(
        self, run: Run, *, memory: Memory, announce: list[EventFrame], config: AgentConfig
    ) -> ChildOutcome:
        """Execute a child run stored just now (chat.runtime.delegates) and wait for its end. Its
        parent stopped meanwhile (cancel, SIGTERM): the child is stopped the same way first, and
        its `complete` stored, before the parent's call ends (docs/protocol.md, "Sub-agents")."""
        self.adopt(run, memory=memory, announce=announce, config=config)
        handle = self._handles[str(run.pk)]
        task = handle.task
        assert task is not None  # adopted
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                handle.stop(CANCELLED if not self.stopping else SHUT_DOWN)
                await asyncio.wait([task])
            raise
        return child_outcome(handle)

    def follow(self, started: list[followups.FollowUp]) -> None:
        """What stored `complete`s set off (chat.eventlog.followups), committed: each started run
        executed here, its frames (the `unqueued` of refused messages first) published by it;
        the frames of a conversation where nothing started published as they are."""
        for follow_up in started:
            run, memory, config = follow_up.run, follow_up.memory, follow_up.config
            if run is not None and memory is not None and config is not None and not self.stopping:
                self.adopt(run, memory=memory, announce=follow_up.frames, config=config)
            elif follow_up.frames:
                server_task(publish(follow_up.conversation_id, follow_up.frames), name="queue-publish")

    def _ended(self, handle: RunHandle) -> None:
        self._handles.pop(str(handle.run_id), None)
        if handle.lost:
            task = server_task(self._hand_over(handle), name=f"run-hand-over-{handle.run_id}")
            self._handing_over.add(task)
            task.add_done_callback(self._handing_over.discard)

    async def _hand_over(self, handle: RunHandle) -> None:
        """A run whose writes failed on the database: released (as a stopping process releases
        its runs) as soon as the database answers, then taken by this process's reaper at once,
        which resumes it from its event log or closes it `interrupted` (supervision). Only the
        attempt that was lost: when the database came back, this process's reaper may have been
        quicker (the run's heartbeat went stale during the outage) and resumed it here already."""
        while not self.stopping:
            try:
                released = await database_sync_to_async(runs_release)(
                    run_ids=[handle.run_id], worker=self.channel, resumes=handle.resumes
                )
            except DATABASE_OUTAGES:
                await asyncio.sleep(HAND_OVER_RETRY_SECONDS)
                continue
            if released:  # 0: a reaper took it meanwhile (its heartbeat had gone stale), ours or another's
                self._supervisor.reap_soon()
            return

    # -- stopping and answering runs ----------------------------------------------------
    async def cancel(self, *, conversation_id) -> bool:
        """Cancel the conversation's running run wherever it runs; False when none is running."""
        await self.ensure_started()
        run = await database_sync_to_async(running_run)(conversation_id=conversation_id)
        if run is None:
            return False
        if self.holds(run.pk):
            self.stop(run.pk, CANCELLED)
            return True
        # Flag first (the owner's heartbeat, or the process that resumes it, sees it even if
        # the message is lost), then ring.
        await database_sync_to_async(run_request_cancel)(run_id=run.pk)
        if run.worker:
            await ring_cancel(run_id=run.pk, worker=run.worker)
        return True

    async def approve(
        self, *, conversation_id, tool_call_id: str, decision: Decision, reply_to: tuple[str, int] | None
    ) -> None:
        """Hand the owner's answer to the run that asked, wherever it runs. Raises
        UnknownApproval (no such request in the conversation) or ApprovalClosed
        (answered already, expired, or its run ended); an answer that reaches another process
        too late is refused there, and `reply_to` (the socket's address, chat.realtime.hub) is told."""
        await self.ensure_started()
        state, run = await database_sync_to_async(approval_state)(
            conversation_id=conversation_id, tool_call_id=tool_call_id
        )
        if run is None:
            raise (UnknownApproval(tool_call_id) if state == "unknown" else ApprovalClosed(tool_call_id))
        if self.holds(run.pk):
            if not self.approvals.answer(run_id=run.pk, tool_call_id=tool_call_id, decision=decision):
                raise ApprovalClosed(tool_call_id)
            return
        if not run.worker:
            return  # released by a stopping process: the one that takes it over closes the request
        message = {
            "type": APPROVE_MESSAGE,
            "run_id": str(run.pk),
            "tool_call_id": tool_call_id,
            "decision": decision.decision,
            "reason": decision.reason,
            "reply_to": reply_to,
        }
        try:
            await get_channel_layer().send(run.worker, message)
        except Exception:
            logger.warning("could not reach the process of run %s with an approval", run.pk)

    async def shutdown(self) -> None:
        """SIGTERM: hand the runs that may resume over to the other processes at once; close the
        others as interrupted. Then the model clients' connections, which an exiting process
        would otherwise leave to the garbage collector ("Unclosed client session" on every stop)."""
        try:
            await self._hand_over_all()
        finally:
            await build.close_client()

    async def _hand_over_all(self) -> None:
        self.stopping = True
        # A `complete` stored from here on starts no waiting message: no run could be begun here.
        # The next reaper pass of a process that goes on starts it (followups.start_stranded).
        get_writer().follow = None
        await self._supervisor.stop()
        handles = list(self._handles.values())
        for handle in handles:
            handle.follow = None
        released = [h.run_id for h in handles if h.resumes < settings.AGENT_MAX_RESUMES and not h.ending]
        for handle in handles:
            if handle.run_id in released:
                handle.abandon()
            else:
                handle.stop(SHUT_DOWN)
        tasks = [h.task for h in handles if h.task]
        if tasks:
            await asyncio.wait(tasks, timeout=SHUTDOWN_GRACE_SECONDS)
        if not released:
            return
        # Only once nothing of them is left to write may another process take them.
        await get_writer().wait_idle()
        count = await database_sync_to_async(runs_release)(run_ids=released, worker=self.channel)
        logger.info("released %d run(s) for another process to continue", count)
        await ring_processes({"type": REAP_MESSAGE})


_registries: PerLoop[RunRegistry] = PerLoop(RunRegistry)
# The registry of the running event loop.
get_registry = _registries.get
