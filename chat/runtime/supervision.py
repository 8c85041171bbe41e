"""Keeping the process's runs honest, and taking over those of dead processes.

- The heartbeat marks this process's runs alive, cancels those cancelled from
  elsewhere (the database flag, the fallback of the cancel message), and drops
  without a word those it no longer holds (finished by someone else, or resumed
  by another process that took this one for dead).
- The reaper finds running runs whose heartbeat is older than
  AGENT_HEARTBEAT_TIMEOUT: their process died. A conditional UPDATE lets only one
  process take each; it closes the interrupted attempt and continues the run here
  from its event log (docs/protocol.md, "Run lifecycle"), or, with no resume left, completes it
  `interrupted`. A live process's heartbeat keeps its runs out of reach.
- The listener takes cancel messages and approval answers for this process's runs, and
  the ring of a stopping process, which makes the reaper pass at once.
- The layer probe sends a message through the channel layer to this process's
  own run channel every LAYER_PROBE_SECONDS: when it comes back after failing
  (Redis restarted, or was down), the doorbell rings what it missed and every
  socket of the process catches up from the database at once (doorbell.layer_back).
- SIGTERM (a deploy): the process stops its runs and releases them (stale
  heartbeat, no worker), then rings the other processes, whose reapers take them
  over at once; with no other process, the next one to start takes them.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import Protocol

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chat.agent.approval import Decision
from chat.agent.batching import server_task
from chat.agents import profiles
from chat.agents.profiles import AgentConfig
from chat.eventlog import followups, memory
from chat.eventlog.compactions import Memory, first_turn
from chat.eventlog.families import Waiting, family_interrupt
from chat.eventlog.frames import EventFrame
from chat.eventlog.reads import run_door, stale_runs
from chat.eventlog.takeover import run_interrupt, runs_heartbeat
from chat.eventlog.types import Interruption
from chat.models import Conversation, Run
from chat.ops.metrics import publish_process_gauges_forever
from chat.runtime import doorbell
from chat.runtime.approvals import APPROVE_MESSAGE, REFUSED_MESSAGE, ApprovalDesk
from chat.runtime.doorbell import CANCEL_MESSAGE, PROCESSES_GROUP, publish
from chat.runtime.execution import CANCELLED, SHUT_DOWN, StopReason

logger = logging.getLogger(__name__)

REAP_MESSAGE = "runs.reap"
PROBE_MESSAGE = "runs.probe"

# How often the layer is probed, and how long a probe may take before the layer counts as
# down: what a socket waits for the frames an outage of the layer kept from it, once it is back.
LAYER_PROBE_SECONDS = 1.0
LAYER_PROBE_TIMEOUT = 2.0


class SupervisedRegistry(Protocol):
    """What supervision uses of the process's run table (chat.runtime.registry.RunRegistry,
    which owns a Supervisor: the shape is named here so that the two modules do not import
    each other)."""

    channel: str
    stopping: bool
    approvals: ApprovalDesk

    def run_ids(self) -> list[str]: ...

    def holds(self, run_id) -> bool: ...

    def stop(self, run_id, reason: StopReason) -> None: ...

    def abandon(self, run_id) -> None: ...

    def adopt(
        self, run: Run, *, memory: Memory, announce: list[EventFrame], config: AgentConfig, waits: list[Waiting]
    ) -> None: ...

    def follow(self, started: list[followups.FollowUp]) -> None: ...

    async def shutdown(self) -> None: ...


class Supervisor:
    def __init__(self, registry: SupervisedRegistry) -> None:
        self.registry = registry
        self._tasks: list[asyncio.Task] = []
        self._reaping = asyncio.Lock()
        self._rung: set[asyncio.Task] = set()
        self._probes: dict[str, asyncio.Future] = {}

    async def start(self) -> None:
        await get_channel_layer().group_add(PROCESSES_GROUP, self.registry.channel)
        self._tasks = [
            server_task(self._listen(), name="runs-listen"),
            server_task(self._heartbeat(), name="runs-heartbeat"),
            server_task(self._reap(), name="runs-reaper"),
            server_task(publish_process_gauges_forever(), name="process-gauges"),
            server_task(self._probe_layer(), name="layer-probe"),
        ]

    async def stop(self) -> None:
        if not self._tasks:
            return
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        try:
            await get_channel_layer().group_discard(PROCESSES_GROUP, self.registry.channel)
        except Exception:
            logger.warning("could not leave the processes group", exc_info=True)

    async def _listen(self) -> None:
        layer = get_channel_layer()
        while True:
            try:
                message = await layer.receive(self.registry.channel)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("run channel receive failed", exc_info=True)
                await asyncio.sleep(1)
                continue
            kind = message.get("type")
            if kind == CANCEL_MESSAGE:
                self.registry.stop(message.get("run_id", ""), CANCELLED)
            elif kind == APPROVE_MESSAGE:
                await self._take_answer(message)
            elif kind == REAP_MESSAGE:  # a process is stopping: take its runs now
                self.reap_soon()
            elif kind == PROBE_MESSAGE:
                probe = self._probes.pop(str(message.get("probe", "")), None)
                if probe is not None and not probe.done():
                    probe.set_result(None)

    def reap_soon(self) -> None:
        """A reaper pass now, in the background (a process stopping, or a run of ours lost)."""
        task = server_task(self._reap_logged(), name="runs-reap-now")
        self._rung.add(task)
        task.add_done_callback(self._rung.discard)

    async def _probe_layer(self) -> None:
        was_down = False
        while True:
            await asyncio.sleep(LAYER_PROBE_SECONDS)
            paid = await self._pay_owed_subscriptions()
            up = await self._layer_answers()
            if up and (was_down or paid or doorbell.has_missed()):
                if was_down or paid:
                    logger.warning("the channel layer answers again: sockets catch up")
                await doorbell.layer_back(was_down=was_down or paid > 0)
            elif not up and not was_down:
                logger.warning("the channel layer does not answer")
            was_down = not up

    async def _pay_owed_subscriptions(self) -> int:
        """The Redis layer (chat.realtime.redis_layer) owes the subscriptions it could not make
        while Redis was away (sockets that connected meanwhile, this process's own channels):
        made before the probe, so that the sockets told to catch up are joined before they read."""
        layer = get_channel_layer()
        if not getattr(layer, "owes", lambda: False)():
            return 0
        try:
            return await layer.pay_owed()
        except Exception:
            logger.warning("owed subscriptions not made", exc_info=True)
            return 0

    async def _layer_answers(self) -> bool:
        """A message to our own run channel came back through the layer (with Redis: our
        subscriptions are live again, not only the publishing connection)."""
        key = uuid.uuid4().hex
        probe = self._probes[key] = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(LAYER_PROBE_TIMEOUT):
                await get_channel_layer().send(self.registry.channel, {"type": PROBE_MESSAGE, "probe": key})
                await probe
        except asyncio.CancelledError:
            raise
        except Exception:
            return False
        finally:
            self._probes.pop(key, None)
        return True

    async def _take_answer(self, message: dict) -> None:
        """An approval answered on another process's socket (RunRegistry.approve)."""
        decision = Decision(str(message.get("decision", "")), str(message.get("reason", "")))
        tool_call_id = str(message.get("tool_call_id", ""))
        if self.registry.approvals.answer(
            run_id=message.get("run_id", ""), tool_call_id=tool_call_id, decision=decision
        ):
            return
        if not message.get("reply_to"):
            return  # answered over HTTP: nobody is left to tell
        try:
            # The socket's process's channel and the socket's number there (chat.realtime.hub).
            channel, socket = message["reply_to"]
            await get_channel_layer().send(
                str(channel), {"type": REFUSED_MESSAGE, "tool_call_id": tool_call_id, "socket": socket}
            )
        except Exception:  # that socket is gone; nobody is left to tell
            logger.info("could not tell a socket that its approval came too late", exc_info=True)

    async def _heartbeat(self) -> None:
        registry = self.registry
        while True:
            await asyncio.sleep(settings.AGENT_HEARTBEAT_SECONDS)
            run_ids = registry.run_ids()
            if not run_ids:
                continue
            try:
                to_cancel, lost = await database_sync_to_async(runs_heartbeat)(run_ids=run_ids, worker=registry.channel)
            except Exception:
                logger.warning("heartbeat failed", exc_info=True)
                continue
            for run_id in to_cancel:
                registry.stop(run_id, CANCELLED)
            for run_id in lost:
                logger.warning("run %s is no longer this process's: dropped", run_id)
                registry.abandon(run_id)

    async def _reap(self) -> None:
        while True:
            await self._reap_logged()
            await asyncio.sleep(settings.AGENT_HEARTBEAT_SECONDS)

    async def _reap_logged(self) -> None:
        try:
            await self.reap_once()
        except Exception:
            logger.warning("reaper pass failed", exc_info=True)

    async def reap_once(self) -> int:
        """Take over the runs of dead processes; returns how many this pass took."""
        registry = self.registry
        async with self._reaping:
            if registry.stopping:
                return 0
            cutoff = timezone.now() - timedelta(seconds=settings.AGENT_HEARTBEAT_TIMEOUT)
            taken = 0
            for run in await database_sync_to_async(stale_runs)(older_than=cutoff):
                if registry.holds(run.pk):
                    continue  # ours and alive: the heartbeat will catch up
                family, started = await database_sync_to_async(_interrupt_with_memory)(
                    run=run, stale_before=cutoff, worker=registry.channel
                )
                # The deepest child runs first: a resumed parent waits for their outcomes.
                for interruption, messages, config, waits in family:
                    taken += 1
                    if interruption.resumed:
                        logger.info("resuming run %s of a dead process", interruption.run.pk)
                        # A resumed interruption comes with its memory and its agent's configuration.
                        assert config is not None and messages is not None
                        registry.adopt(
                            interruption.run, memory=messages, announce=interruption.frames, config=config, waits=waits
                        )
                    else:
                        logger.info("closed run %s of a dead process as interrupted", interruption.run.pk)
                        await publish(interruption.run.conversation_id, interruption.frames)
                if started:  # the waiting message a closed run held back starts here
                    registry.follow(started)
            # Messages left waiting with no run in progress (a stopping process stored their
            # run's `complete` and started nothing): started here.
            stranded = await database_sync_to_async(followups.start_stranded)(worker=registry.channel)
            if stranded and not registry.stopping:
                registry.follow(stranded)
            return taken


Resumable = tuple[Interruption, Memory | None, AgentConfig | None, list[Waiting]]


def _interrupt_with_memory(*, run: Run, stale_before, worker: str) -> tuple[list[Resumable], list[followups.FollowUp]]:
    """_take_over, with the runs its `complete` started for `worker` (a closed run's waiting
    message: chat.eventlog.followups)."""
    with followups.collecting(worker) as started:
        mark = followups.mark()
        try:
            family = _take_over(run=run, stale_before=stale_before, worker=worker)
        except BaseException:
            followups.rollback(mark)
            raise
        return family, list(started)


def _take_over(*, run: Run, stale_before, worker: str) -> list[Resumable]:
    """Take a dead process's run (a top-level run with its running child runs: chat.eventlog.families),
    and for each resume read its memory and its agent's configuration (the profile it started
    with, read again): one trip to the ORM thread, and one transaction, so that a read failing
    after the take-over (a connection that broke) undoes it: a resume is counted only for a run
    this process then adopts, never spent on one it could not. A child run is taken with its
    top-level run; one whose parent has ended is closed `interrupted`."""
    with transaction.atomic():
        if run.parent_id is not None:
            if Run.objects.filter(pk=run.parent_id, status=Run.Status.RUNNING).exists():
                return []  # taken with its top-level run
            alone = run_interrupt(run_id=run.pk, stale_before=stale_before, message=SHUT_DOWN.message, worker=worker)
            return [] if alone is None else [(alone, None, None, [])]
        family = family_interrupt(
            run_id=run.pk,
            stale_before=stale_before,
            message=SHUT_DOWN.message,
            worker=worker,
            max_resumes=settings.AGENT_MAX_RESUMES,
        )
        out: list[Resumable] = []
        for taken in family:
            interruption = taken.interruption
            if not interruption.resumed:
                out.append((interruption, None, None, []))
                continue
            resumed = interruption.run
            if resumed.parent_id is None:
                messages = memory.runs_memory(runs={resumed.conversation_id: resumed.pk})[resumed.conversation_id]
            else:  # its system prompt and the task, then what it did
                messages = first_turn(memory.events_of([resumed.pk])[resumed.pk][1])
            source = Conversation.objects.filter(pk=resumed.conversation_id).values_list("source", flat=True)
            door = run_door(run_id=resumed.pk)  # a Responses run resumes unattended, with its instructions
            config = profiles.start_config(
                resumed.agent,
                source=source.first() or "",
                options=None,
                via=door["via"],
                instructions=profiles.door_instructions(door["request"]),
            )
            out.append((interruption, messages, config, taken.waits))
        return out


_sigterm_installed = False


def install_sigterm_handler(registries: Mapping[asyncio.AbstractEventLoop, SupervisedRegistry]) -> None:
    """Chain a handler in front of the server's own (Twisted's under daphne), installed
    after it, so that the process's runs are handed over before the server stops."""
    global _sigterm_installed
    if _sigterm_installed or threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum, frame):
        async def shut_down_then_exit():
            await asyncio.gather(*(r.shutdown() for r in list(registries.values())), return_exceptions=True)
            if callable(previous):
                previous(signum, frame)
            else:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.raise_signal(signal.SIGTERM)

        for loop in list(registries):
            if loop.is_running():
                loop.call_soon_threadsafe(lambda loop=loop: loop.create_task(shut_down_then_exit()))
                return
        if callable(previous):
            previous(signum, frame)

    signal.signal(signal.SIGTERM, on_sigterm)
    _sigterm_installed = True
