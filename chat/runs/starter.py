"""The process's run starts: they wait in a queue that one task drains in groups (the messages
that arrive while a group is being stored form the next group, one trip to the ORM thread
each); each started run is handed to the run registry (chat.runtime.registry), which executes it.

A message that opens a conversation may get a head start (chat.runtime.head_start): its run
begins while its start is stored, and keeps going only if the start is admitted as predicted."""

from __future__ import annotations

import uuid
from dataclasses import replace

from channels.db import database_sync_to_async
from django.conf import settings
from django.utils import timezone

from chat.agent.batching import Batcher
from chat.agent.perloop import PerLoop
from chat.agents import profiles
from chat.agents.profiles import AgentConfig
from chat.eventlog import memory
from chat.eventlog.compacting import compaction_memory
from chat.eventlog.compactions import Memory, first_turn
from chat.eventlog.frames import EventFrame
from chat.eventlog.types import RunStart
from chat.models import Run
from chat.runs.requests import StartRun
from chat.runs.starts import runs_start
from chat.runtime.registry import get_registry


class Starter:
    """The start queue of one event loop."""

    def __init__(self) -> None:
        self._starts: Batcher[RunStart, tuple[Run, int]] = Batcher(self._start_group, name="runs-starter")

    async def start(self, request: StartRun) -> tuple[Run, int]:
        """The run and the seq of its user_message (what the HTTP door answers with, read from the
        start rather than asked of the database). Raises the start's refusal (runs_start)."""
        registry = get_registry()
        await registry.ensure_started()
        run_id, began_at = uuid.uuid4(), timezone.now()
        # Only when no other start is being stored: in a burst the event loop's CPU is the limit,
        # and a run begun ahead of its group's trip to the ORM thread slows that trip (the GIL)
        # for every start in it (C = 200 first text p50 238-270 -> 287-289 ms, measured).
        begun = (
            request.first
            and self._starts.idle
            and request.follows_newest
            and registry.heads.begin(run_id=run_id, message=request, answers=registry.approvals.for_run(run_id))
        )
        model = settings.AGENT_MODEL or ""
        # began_at: its model calls are not older than the run
        start = RunStart(request, model, registry.channel, run_id, began_at if begun else None)
        return await self._starts.submit(start)

    async def _start_group(self, starts: list[RunStart]) -> list[tuple[Run, int] | Exception]:
        registry = get_registry()
        try:
            results = await database_sync_to_async(start_with_memory)(starts)
        except BaseException:
            registry.heads.drop(starts)
            raise
        out: list[tuple[Run, int] | Exception] = []
        for start, result in zip(starts, results, strict=True):
            begun = registry.heads.settle(start, result)
            if isinstance(result, Exception):
                out.append(result)
                continue
            # The run is started: it gets its task even if the caller has gone meanwhile.
            run, frames, messages, config = result
            registry.adopt(run, memory=messages, announce=frames, config=config, begun=begun)
            out.append((run, frames[0]["seq"] if frames else 0))  # a compaction run has no user_message
        return out


def start_with_memory(
    starts: list[RunStart],
) -> list[tuple[Run, list[EventFrame], Memory, AgentConfig] | Exception]:
    """Start the runs, then read each one's memory (chat.eventlog.memory): one trip to the ORM thread for
    the whole group (a first turn, whose parentSeq is null, is its own memory). Each comes with
    the configuration of its agent, from the profile the start read."""
    started = runs_start(starts=starts)
    runs = [result for result in started if not isinstance(result, Exception)]
    older = {run.conversation_id: run.pk for run, frames in runs if frames and frames[0].get("parentSeq") is not None}
    memories = memory.runs_memory(runs=older) if older else {}
    out: list[tuple[Run, list[EventFrame], Memory, AgentConfig] | Exception] = []
    for start, result in zip(starts, started, strict=True):
        if isinstance(result, Exception):
            out.append(result)
            continue
        run, frames = result
        key = run.conversation_id
        config = profiles.start_config(
            run.agent,
            source=start.message.conversation.source,
            options=start.message.options,
            via=start.message.via,
            instructions=profiles.door_instructions(start.message.request),
        )
        if start.message.compact:  # its branch's memory, read as its start checked it
            messages = compaction_memory(conversation_id=key, run_id=run.pk, seq=start.message.parent_seq)
            config = replace(config, compacts=True, compaction_run=True)
        else:
            messages = memories[key] if key in memories else first_turn(frames)
        out.append((run, frames, messages, config))
    return out


_starters: PerLoop[Starter] = PerLoop(Starter)


async def start_run(request: StartRun) -> tuple[Run, int]:
    """Start the run on the running loop's queue; its refusal raised as the domain's exception
    (chat.exceptions). The doors call chat.runs.engine.start, which answers with the protocol's codes."""
    return await _starters.get().start(request)
