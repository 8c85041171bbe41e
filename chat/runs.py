"""The per-process run registry: runs belong to the server process, not to a socket.

A run is an asyncio task that drives the agent and writes its events through an
EventSink. It goes on when every socket closes and ends only by finishing,
failing, `cancel`, or the process dying. Each process also:

- heartbeats its running runs, and stops any that was closed or asked to stop
  from elsewhere (a cancel from a socket on another process arrives by its
  channel, with the database flag as the fallback);
- reaps runs of dead processes: a running run whose heartbeat is older than
  AGENT_HEARTBEAT_TIMEOUT is closed as `interrupted` by whichever process sees
  it first (a conditional UPDATE lets only one win, and a live process's
  heartbeat keeps its runs out of reach);
- on SIGTERM closes its own runs as `interrupted` before the server stops.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from dataclasses import dataclass, field
from datetime import timedelta

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.utils import timezone

from chat.agent import AgentRun, CompleteEvent
from chat.agent.events import ErrorCode, RunStatus

from . import assistant, selectors, services
from .history import messages_from_events
from .loops import PerLoop
from .models import Run
from .sink import EventSink, publish

logger = logging.getLogger(__name__)

SHUTDOWN_GRACE_SECONDS = 5.0
INTERRUPTED_MESSAGE = "The server running this run stopped before it finished."


@dataclass
class RunHandle:
    run_id: object
    conversation_id: object
    agent_run: AgentRun | None = None
    task: asyncio.Task | None = None
    cancel_reason: tuple[str, str, str] | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def stop(self, *, status: str, code: str, message: str) -> None:
        if self.agent_run is not None:
            self.agent_run.cancel(status=status, code=code, message=message)
        else:  # still loading its memory: remember, and stop as soon as the agent exists
            self.cancel_reason = (status, code, message)


class RunRegistry:
    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.handles: dict[str, RunHandle] = {}
        self.channel: str | None = None
        self._background: list[asyncio.Task] = []
        self._started = asyncio.Lock()
        self._ready = False
        self._starts: list[tuple[services.RunStart, asyncio.Future]] = []
        self._starter: asyncio.Task | None = None

    async def ensure_started(self) -> None:
        async with self._started:
            if self._ready:
                return
            self.channel = await get_channel_layer().new_channel("runs.")
            self._background = [
                asyncio.create_task(self._listen(), name="runs-listen"),
                asyncio.create_task(self._heartbeat(), name="runs-heartbeat"),
                asyncio.create_task(self._reap(), name="runs-reaper"),
            ]
            _install_sigterm_handler()
            self._ready = True

    async def close(self) -> None:
        """Stop the background loops (tests, and loops that end); runs are left to finish."""
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        self._background = []
        self._ready = False

    async def wait_idle(self, timeout: float = 10.0) -> None:
        """Wait until this process runs nothing (tests)."""
        tasks = [h.task for h in self.handles.values() if h.task]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    # -- starting and stopping runs ----------------------------------------------
    async def start(self, *, conversation, user, content: str) -> Run:
        """Start a run for a user message. Raises services.RunInProgress / RateLimited.

        Starts wait in a queue that one task drains in groups (services.runs_start_many):
        the messages that arrive while a group is being stored form the next group."""
        await self.ensure_started()
        future = self.loop.create_future()
        self._starts.append((services.RunStart(conversation, user, content, settings.AGENT_MODEL or "", self.channel),
                             future))
        if self._starter is None:
            self._starter = asyncio.create_task(self._start_waiting(), name="runs-starter")
        return await future

    async def _start_waiting(self) -> None:
        try:
            while self._starts:
                group, self._starts = self._starts, []
                try:
                    results = await sync_to_async(_start_with_memory)([start for start, _ in group])
                except Exception as exc:
                    results = [exc] * len(group)
                for (start, future), result in zip(group, results):
                    if isinstance(result, Exception):
                        if not future.done():
                            future.set_exception(result)
                        continue
                    # The run is started: it gets its task even if the caller has gone meanwhile.
                    run, frames, earlier = result
                    handle = RunHandle(run_id=run.pk, conversation_id=start.conversation.pk)
                    self.handles[str(run.pk)] = handle
                    handle.task = asyncio.create_task(
                        self._execute(handle, user_id=start.user.pk, content=start.content, frames=frames,
                                      earlier=earlier),
                        name=f"run-{run.pk}",
                    )
                    if not future.done():
                        future.set_result(run)
        finally:
            self._starter = None

    async def cancel(self, *, conversation_id) -> bool:
        """Cancel the conversation's running run wherever it runs; False when none is running."""
        await self.ensure_started()
        run = await sync_to_async(selectors.running_run)(conversation_id=conversation_id)
        if run is None:
            return False
        local = self.handles.get(str(run.pk))
        if local is not None:
            local.stop(status=RunStatus.CANCELLED, code=ErrorCode.CANCELLED, message="The run was cancelled.")
            return True
        # Flag first (the owner's heartbeat sees it even if the message is lost), then ring.
        await sync_to_async(services.run_request_cancel)(run_id=run.pk)
        if run.worker:
            try:
                await get_channel_layer().send(run.worker, {"type": "run.cancel", "run_id": str(run.pk)})
            except Exception:
                logger.warning("could not reach the process of run %s; its heartbeat will see the flag", run.pk)
        return True

    async def shutdown(self) -> None:
        """Close this process's runs as interrupted (SIGTERM)."""
        for handle in list(self.handles.values()):
            handle.stop(status=RunStatus.INTERRUPTED, code=ErrorCode.INTERRUPTED, message=INTERRUPTED_MESSAGE)
        tasks = [h.task for h in self.handles.values() if h.task]
        if tasks:
            await asyncio.wait(tasks, timeout=SHUTDOWN_GRACE_SECONDS)

    # -- the run itself --------------------------------------------------------------
    async def _execute(self, handle: RunHandle, *, user_id, content: str, frames: list[dict],
                       earlier: list[dict]) -> None:
        run_id, conversation_id = handle.run_id, handle.conversation_id
        sink = EventSink(
            conversation_id=conversation_id, run_id=run_id, flush_seconds=settings.AGENT_STREAM_FLUSH_MS / 1000
        )
        await publish(conversation_id, frames)  # the user_message, before anything the run says
        try:
            messages = messages_from_events(earlier) + [{"role": "user", "content": content}]
            context = assistant.tool_context(
                conversation_id=str(conversation_id), user_id=str(user_id), run_id=str(run_id)
            )
            handle.agent_run = assistant.build_agent().stream(messages, context=context)
            if handle.cancel_reason:
                status, code, message = handle.cancel_reason
                handle.agent_run.cancel(status=status, code=code, message=message)
            async for event in handle.agent_run:
                outcome = None
                if isinstance(event, CompleteEvent):
                    result = handle.agent_run.result
                    error = result.error
                    outcome = services.RunOutcome(
                        status=event.status,
                        iterations=result.iterations,
                        prompt_tokens=result.usage.prompt_tokens,
                        completion_tokens=result.usage.completion_tokens,
                        total_tokens=result.usage.total_tokens,
                        error=f"{error.code}: {error.message}" if error else "",
                    )
                await sink.add(event.to_dict(), outcome=outcome)
        except services.ConversationGone:
            logger.info("conversation %s was deleted during run %s", conversation_id, run_id)
            if handle.agent_run is not None:
                await handle.agent_run.aclose()
        except Exception:
            logger.exception("run %s failed outside the agent", run_id)
            # Whatever broke, the run must not stay `running` forever.
            frames = await sync_to_async(services.run_interrupt)(
                run_id=run_id, message="The run stopped because of a server error."
            )
            await publish(conversation_id, frames)
        finally:
            self.handles.pop(str(run_id), None)
            handle.done.set()

    # -- background loops ------------------------------------------------------------
    async def _listen(self) -> None:
        layer = get_channel_layer()
        while True:
            try:
                message = await layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("run channel receive failed", exc_info=True)
                await asyncio.sleep(1)
                continue
            if message.get("type") == "run.cancel":
                handle = self.handles.get(message.get("run_id", ""))
                if handle is not None:
                    handle.stop(status=RunStatus.CANCELLED, code=ErrorCode.CANCELLED, message="The run was cancelled.")

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(settings.AGENT_HEARTBEAT_SECONDS)
            if not self.handles:
                continue
            try:
                to_stop = await sync_to_async(services.runs_heartbeat)(run_ids=list(self.handles))
            except Exception:
                logger.warning("heartbeat failed", exc_info=True)
                continue
            for run_id in to_stop:
                handle = self.handles.get(str(run_id))
                if handle is not None:
                    handle.stop(status=RunStatus.CANCELLED, code=ErrorCode.CANCELLED, message="The run was cancelled.")

    async def _reap(self) -> None:
        while True:
            try:
                await self.reap_once()
            except Exception:
                logger.warning("reaper pass failed", exc_info=True)
            await asyncio.sleep(settings.AGENT_HEARTBEAT_SECONDS)

    async def reap_once(self) -> int:
        cutoff = timezone.now() - timedelta(seconds=settings.AGENT_HEARTBEAT_TIMEOUT)
        closed = 0
        for run in await sync_to_async(selectors.stale_runs)(older_than=cutoff):
            if str(run.pk) in self.handles:
                continue  # ours and alive: the heartbeat will catch up
            frames = await sync_to_async(services.run_interrupt)(
                run_id=run.pk, stale_before=cutoff, message=INTERRUPTED_MESSAGE
            )
            if frames:
                closed += 1
                logger.info("closed run %s of a dead process as interrupted", run.pk)
                await publish(run.conversation_id, frames)
        return closed


def _start_with_memory(starts: list[services.RunStart]) -> list[tuple[Run, list[dict], list[dict]] | Exception]:
    """Start the runs, then read the events each one's memory is made of: one trip to the ORM
    thread for the whole group (the first message of a conversation, seq 1, has nothing earlier)."""
    started = services.runs_start_many(starts=starts)
    runs = [result for result in started if not isinstance(result, Exception)]
    older = {run.conversation_id: run.pk for run, frames in runs if frames[0]["seq"] > 1}
    history = selectors.runs_history_events(runs=older) if older else {}
    return [
        result if isinstance(result, Exception) else (*result, history.get(result[0].conversation_id, []))
        for result in started
    ]


_registries: PerLoop[RunRegistry] = PerLoop(RunRegistry)
# The registry of the running event loop.
get_registry = _registries.get


_sigterm_installed = False


def _install_sigterm_handler() -> None:
    """Chain a handler in front of the server's own (Twisted's under daphne), installed
    after it, so our runs are closed as `interrupted` before the process stops."""
    global _sigterm_installed
    if _sigterm_installed or threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum, frame):
        async def close_then_exit():
            await asyncio.gather(*(r.shutdown() for r in list(_registries.instances.values())), return_exceptions=True)
            if callable(previous):
                previous(signum, frame)
            else:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.raise_signal(signal.SIGTERM)

        for loop in list(_registries.instances):
            if loop.is_running():
                loop.call_soon_threadsafe(lambda: loop.create_task(close_then_exit()))
                return
        if callable(previous):
            previous(signum, frame)

    signal.signal(signal.SIGTERM, on_sigterm)
    _sigterm_installed = True
