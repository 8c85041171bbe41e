"""One run, from its memory to its outcome: memory -> agent -> sink -> stored outcome.

A run is new (its memory ends with the user message just stored) or resumed
from the event log after its process died (its memory ends with the tool calls
and results of the interrupted attempt). Either way the agent's events go
through an EventSink, and the batch holding `complete` carries the run's outcome.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import InterfaceError, OperationalError

from chat.agent import AgentRun, CompleteEvent
from chat.agent.approval import Answers
from chat.agent.events import ErrorCode, RunStatus, ToolEndEvent
from chat.agents.profiles import AgentConfig
from chat.eventlog import followups
from chat.eventlog.children import ChildOutcome, call_result
from chat.eventlog.compactions import Memory
from chat.eventlog.families import Waiting
from chat.eventlog.frames import EventFrame
from chat.eventlog.takeover import run_interrupt
from chat.eventlog.types import Interruption, RunOutcome
from chat.exceptions import ConversationGone
from chat.ops import tracing
from chat.ops.metrics import compaction_counted
from chat.runtime import build, delegates, titles
from chat.runtime.budget_check import BudgetCheck
from chat.runtime.doorbell import publish
from chat.runtime.sink import EventSink
from chat.runtime.steering import steering

logger = logging.getLogger(__name__)

# What a write fails with when the database went away under it (restarted, down, a dropped
# connection) even after the writer's retry on a new connection: the run is not at fault.
DATABASE_OUTAGES = (OperationalError, InterfaceError)


@dataclass(frozen=True)
class StopReason:
    status: str
    code: str
    message: str


CANCELLED = StopReason(RunStatus.CANCELLED, ErrorCode.CANCELLED, "The run was cancelled.")
SHUT_DOWN = StopReason(
    RunStatus.INTERRUPTED, ErrorCode.INTERRUPTED, "The server running this run stopped before it finished."
)


@dataclass
class RunHandle:
    """A run this process executes."""

    run_id: object
    conversation_id: object
    user_id: object
    resumes: int  # times the run was resumed before this process took it
    config: AgentConfig  # its agent: the conversation's profile, or the environment's
    answers: Answers | None = None  # where its approval requests wait (runtime/approvals)
    agent_run: AgentRun | None = None
    task: asyncio.Task | None = None
    stop_reason: StopReason | None = None
    lost: bool = False  # its writes failed on the database: its process hands it over (registry)
    # Its process's channel and what runs the messages its `complete` starts (the registry's).
    worker: str = ""
    follow: Callable[[list[followups.FollowUp]], None] | None = None
    # A child run (docs/protocol.md, "Sub-agents"): how deep it nests, and the fields every one of
    # its events carries (parentRunId, parentToolCallId); what runs the child runs it starts.
    depth: int = 0
    lineage: dict[str, str] = field(default_factory=dict)
    run_child: delegates.RunChild | None = None
    # Resumed with delegate calls left open (chat.eventlog.families): each, with the handle of
    # its resumed child run, ended with that child's outcome before the agent begins.
    waiting: list[tuple[Waiting, RunHandle | None]] = field(default_factory=list)
    sink: EventSink = field(init=False)  # where the agent's events go to be stored and published

    def __post_init__(self) -> None:
        self.sink = EventSink(
            conversation_id=self.conversation_id,
            run_id=self.run_id,
            flush_seconds=settings.AGENT_STREAM_FLUSH_MS / 1000,
            max_flush_seconds=settings.AGENT_STREAM_FLUSH_MAX_MS / 1000,
            extra=self.lineage,
        )

    def stop(self, reason: StopReason) -> None:
        """End the run with its closing events (a tool_end for each open call, the error, complete)."""
        if self.agent_run is not None:
            self.agent_run.cancel(status=reason.status, code=reason.code, message=reason.message)
        else:  # still loading (or waiting for its children): remember, and stop as soon as the agent exists
            self.stop_reason = reason
            for _, child in self.waiting:
                if child is not None:
                    child.stop(reason)

    @property
    def ending(self) -> bool:
        """The agent has ended: only its outcome is left to store."""
        return self.agent_run is not None and self.agent_run.result.status != "running"

    def abandon(self) -> None:
        """Drop the run without a word: another process continues it from the event log."""
        if self.task is not None and not self.ending:  # an outcome being stored is let be
            self.task.cancel()


def begin(handle: RunHandle, *, memory: Memory, hold: asyncio.Event | None = None) -> None:
    """Build the run's agent and start it on `memory` (chat.eventlog.memory: the chat messages it
    starts from, laid out for its compactor); its events wait in the agent run until execute reads
    them. `hold`: its model reads no answer until it is set (a run started while its start is being
    stored: registry)."""
    context = build.tool_context(
        conversation_id=str(handle.conversation_id),
        user_id=str(handle.user_id),
        run_id=str(handle.run_id),
        config=handle.config,
    )
    delegation = delegates.Delegation(
        run_id=handle.run_id,
        user_id=handle.user_id,
        depth=handle.depth,
        profile_id=handle.config.profile_id,
        worker=lambda: handle.worker,
        run_child=lambda: handle.run_child,
        started=handle.sink.tool_started,
        unattended=handle.config.unattended,
    )
    agent = build.build_agent(
        config=handle.config,
        observers=[handle.sink.add_model_call],
        answers=handle.answers,
        hold=hold,
        # A steer goes to the top-level run (docs/protocol.md, "Steering"), never to a child.
        steering=None if handle.depth else steering(conversation_id=handle.conversation_id, run_id=handle.run_id),
        compactor=build.compactor(handle.config, memory.layout),
        delegation=delegation,
        budget=BudgetCheck(
            run_id=handle.run_id, user_id=handle.user_id, agent_id=handle.config.profile_id, model=handle.config.model
        ),
    )
    handle.agent_run = agent_run = agent.stream(memory.messages, context=context)
    handle.sink.offers = agent_run.offers
    agent_run.start()


async def execute(handle: RunHandle, *, memory: Memory, announce: list[EventFrame]) -> None:
    """Run the agent on `memory` (begun already, or now), after publishing `announce` (the frames
    that started or resumed the run, stored before anything the agent says)."""
    run_id, conversation_id, sink = handle.run_id, handle.conversation_id, handle.sink
    await publish(conversation_id, announce)
    trace = tracing.run_trace(run_id=run_id, conversation_id=conversation_id, resumes=handle.resumes)
    try:
        if handle.waiting:
            await _children_ended(handle, memory.messages)
        if handle.agent_run is None:
            begin(handle, memory=memory)
        if handle.stop_reason is not None:
            handle.stop(handle.stop_reason)
        agent_run = handle.agent_run
        assert agent_run is not None  # begun
        async for event in agent_run:
            data, outcome = event.to_dict(), _outcome(agent_run) if isinstance(event, CompleteEvent) else None
            if outcome is not None and agent_run.agent.compactor is not None:
                data["context"] = agent_run.agent.compactor.gauge()  # what the next message starts from
            if data["type"] == "compaction" or data.get("code") == ErrorCode.COMPACTION_FAILED:
                await _compaction_counted(data, manual=handle.config.compaction_run)
            if trace is not None:
                trace.observe(data, outcome, usage=agent_run.result.usage if outcome is not None else None)
            await sink.add(data, outcome=outcome)
        # The outcome is stored and published: the title, if the conversation waits for one, comes after.
        if not handle.depth:
            titles.after_run(run_id=run_id, conversation_id=conversation_id, config=handle.config, agent_run=agent_run)
    except asyncio.CancelledError:  # abandoned
        sink.discard()
        if handle.agent_run is not None:
            await handle.agent_run.aclose()
        raise
    except DATABASE_OUTAGES as exc:
        if refused_for_good(exc):
            logger.exception("run %s was refused by the database", run_id)
            await _interrupt(handle)
            return
        # Closed or resumed by this process as soon as the database answers (registry's hand
        # over), never left `running` for another process's heartbeat timeout. What the sink
        # held was never stored, so no client saw it.
        logger.warning("run %s lost its database: handed over", run_id, exc_info=True)
        sink.discard()
        handle.lost = True
        if handle.agent_run is not None:
            await handle.agent_run.aclose()
    except ConversationGone:
        logger.info("conversation %s was deleted during run %s", conversation_id, run_id)
        if handle.agent_run is not None:
            await handle.agent_run.aclose()
    except Exception:
        logger.exception("run %s failed outside the agent", run_id)
        await _interrupt(handle)
    finally:
        if trace is not None:
            trace.close()


async def _children_ended(handle: RunHandle, memory: list[dict]) -> None:
    """A resumed run's delegate calls left open for its resumed child runs: each ended (its
    tool_end, and the result in the memory in place of the unfinished call's) with its child's
    outcome, once that child has ended (docs/protocol.md, "Sub-agents")."""
    for wait, child in handle.waiting:
        if child is not None and child.task is not None:
            await asyncio.wait([child.task])
        outcome = child_outcome(child) if child is not None else ChildOutcome(RunStatus.INTERRUPTED)
        result, is_error = call_result(wait.slug, outcome)
        await handle.sink.add(ToolEndEvent(wait.tool_name, wait.tool_call_id, result, is_error, 0).to_dict())
        for message in memory:
            if message.get("role") == "tool" and message.get("tool_call_id") == wait.tool_call_id:
                message["content"] = result
    handle.waiting = []


async def _compaction_counted(data: dict, *, manual: bool) -> None:
    """agentsite_compactions_total{trigger, outcome} (docs/protocol.md, "Health and metrics")."""
    outcome = "ok" if data["type"] == "compaction" else "failed"
    count = database_sync_to_async(compaction_counted, thread_sensitive=False)
    await count(trigger="manual" if manual else "auto", outcome=outcome)


def refused_for_good(exc: BaseException) -> bool:
    """An OperationalError the database answered with, that storing the same again would meet
    again: PostgreSQL's class 54, program limit exceeded (a value past what a type or an index
    holds). Handed over, such a run was resumed to fail the same way, again and again."""
    return str(getattr(exc.__cause__, "sqlstate", None) or "").startswith("54")


async def _interrupt(handle: RunHandle) -> None:
    """Whatever broke, the run must not stay `running` forever (nor be resumed to break again)."""
    if handle.agent_run is not None:
        await handle.agent_run.aclose()
    message = "The run stopped because of a server error."
    if handle.follow is None:  # its process is stopping: what waits is started elsewhere
        interruption, started = await database_sync_to_async(run_interrupt)(run_id=handle.run_id, message=message), []
    else:
        interruption, started = await database_sync_to_async(interrupt_following)(
            run_id=handle.run_id, message=message, worker=handle.worker
        )
    if interruption is not None:
        await publish(handle.conversation_id, interruption.frames)
    if started and handle.follow is not None:
        handle.follow(started)


def interrupt_following(*, worker: str, **kwargs) -> tuple[Interruption | None, list[followups.FollowUp]]:
    """run_interrupt, with the runs a `complete` it stored started (chat.eventlog.followups) for `worker`."""
    with followups.collecting(worker) as started:
        mark = followups.mark()
        try:
            interruption = run_interrupt(worker=worker, **kwargs)
        except BaseException:
            followups.rollback(mark)
            raise
        return interruption, list(started)


def child_outcome(handle: RunHandle) -> ChildOutcome:
    """How a child run this process executed ended (its task done)."""
    agent_run = handle.agent_run
    if agent_run is None or handle.lost or agent_run.result.status == "running":
        return ChildOutcome(RunStatus.INTERRUPTED, message=SHUT_DOWN.message)
    result = agent_run.result
    return ChildOutcome(result.status, answer=result.text, message=result.error.message if result.error else "")


def _outcome(agent_run: AgentRun) -> RunOutcome:
    result = agent_run.result
    error = result.error
    return RunOutcome(
        status=result.status,
        iterations=result.iterations,
        error=f"{error.code}: {error.message}" if error else "",
    )
