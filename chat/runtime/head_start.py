"""Head starts: a run whose memory and agent are known before its start is stored begins at once.

A message in a conversation that has no event yet (its socket or HTTP door saw none) starts a
run whose memory is that message alone (with an OpenAI-compatible request's history) and, when
the conversation names no agent profile, whose agent is the environment's: both are known before
the start's transaction. Such a run's agent is begun while the start is stored (the registry's
group trip to the ORM thread), so its model request goes out at once and the model's time to
first token overlaps the writes (issue 30: a burst's first text).

Its model reads nothing of the answer, nor its failure, until the start is stored and its memory
and agent are the ones predicted (ChatModel's hold): no delta, tool call, retry or approval comes
before the run exists, and the first delta is stored and published after the user_message as for
any run. A start that is refused (rate, quota, a run in progress, ...) or predicted wrong (a tab
that had not seen the conversation's events, an agent chosen meanwhile) cancels its head start
before a byte of the answer is read, and the run, if any, starts as any other. A user refused
here gets no head start for a minute: the limits bound the model requests a user causes, and
refused messages must not become a stream of model requests.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from chat.accounts.budgets import budgets_may_apply
from chat.agents import profiles
from chat.eventlog.compactions import Memory, first_turn
from chat.eventlog.turns import user_message_payload
from chat.eventlog.types import Message, RunStart
from chat.runtime.approvals import RunAnswers
from chat.runtime.execution import RunHandle, begin

logger = logging.getLogger(__name__)

# How long a refused start keeps its user from head starts in this process.
REFUSAL_MEMORY_SECONDS = 60.0


@dataclass
class HeadStart:
    handle: RunHandle
    memory: Memory  # predicted
    hold: asyncio.Event = field(default_factory=asyncio.Event)

    def cancel(self) -> None:
        self.handle.sink.discard()
        if self.handle.agent_run is not None:
            self.handle.agent_run.cancel()


class HeadStarts:
    """The head starts of one registry, from their begin to their start's outcome."""

    def __init__(self) -> None:
        self._pending: dict[uuid.UUID, HeadStart] = {}
        self._refused: dict[Any, float] = {}  # user pk -> loop time of their last refused start

    def begin(
        self,
        *,
        run_id: uuid.UUID,
        message: Message,
        answers: RunAnswers,
    ) -> bool:
        """Begin the run of a message that starts a conversation (the caller saw no event in it);
        False when it gets no head start."""
        now = asyncio.get_running_loop().time()
        conversation, user = message.conversation, message.user
        if now - self._refused.get(user.pk, -REFUSAL_MEMORY_SECONDS) < REFUSAL_MEMORY_SECONDS:
            return False
        if conversation.agent_id is not None:  # its profile is read, and checked, with the start
            return False
        if budgets_may_apply():  # a budget's refusal calls no model, not even ahead of the decision
            return False
        config = profiles.start_config(
            None,
            source=conversation.source,
            options=message.options,
            via=message.via,
            instructions=profiles.door_instructions(message.request),
        )
        turn = user_message_payload(
            message.content, parent_seq=None, attachments=message.attachments, history=message.history
        )
        memory = first_turn([turn])
        handle = RunHandle(
            run_id=run_id, conversation_id=conversation.pk, user_id=user.pk, resumes=0, config=config, answers=answers
        )
        head = HeadStart(handle, memory)
        try:
            begin(handle, memory=memory, hold=head.hold)
        except Exception:  # the run starts as any other, and fails there as it would have
            logger.exception("a head start could not begin run %s", run_id)
            return False
        self._pending[run_id] = head
        return True

    def settle(self, start: RunStart, result: Any) -> RunHandle | None:
        """The start's outcome: its begun run's handle, now reading its model's answer, when the
        start was stored with the memory and agent predicted; else None (its head start, if it
        had one, cancelled). `result`: the start's (run, frames, memory, config) or exception."""
        head = self._take(start)
        if isinstance(result, Exception):
            self._refuse(start.message.user.pk)
            if head is not None:
                head.cancel()
            return None
        if head is None:
            return None
        _run, _frames, memory, config = result
        if memory != head.memory or config != head.handle.config:
            head.cancel()
            return None
        head.hold.set()
        return head.handle

    def drop(self, starts: list[RunStart]) -> None:
        """Cancel the head starts of starts that got no outcome (their group's trip failed)."""
        for start in starts:
            head = self._take(start)
            if head is not None:
                head.cancel()

    def _take(self, start: RunStart) -> HeadStart | None:
        return self._pending.pop(start.run_id, None) if start.run_id is not None else None

    def _refuse(self, user_pk) -> None:
        now = asyncio.get_running_loop().time()
        self._refused = {pk: at for pk, at in self._refused.items() if now - at < REFUSAL_MEMORY_SECONDS}
        self._refused[user_pk] = now
