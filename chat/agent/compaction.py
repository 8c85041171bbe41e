"""Compaction: a long conversation's older turns summarized by the run's own model, so that what
each model call is sent stays within the agent's context (docs/protocol.md, "Compaction").

A run starts from its memory (the server builds it): the summary in use, if a compaction holds
for its branch, then its branch's turns after that summary, then its own messages. The server
hands the agent a Layout saying how those messages are made. Before the first attempt of every
model call the loop asks the run's Compactor to fit them:

- the request (messages and tool schemas, estimated as chat.agent.estimate counts) is larger
  than `compact_at` x the context, or the memory holds more than `max_messages` messages, and
  some earlier turns lie beyond the newest `keep_turns` (the run's own counted): those turns and
  the summary in use are summarized by one model call (no tools, not streamed to anyone), a
  CompactionEvent says so, and the request is rebuilt as system prompt, the new summary, the
  kept turns and the run's own messages;
- a compaction that fails (every attempt, or an empty answer) emits a COMPACTION_FAILED error
  that does not end the run, which trims instead: the oldest whole turns are dropped until the
  request fits (never the run's own turn). Trimming is also what a run that may not compact (a
  `/v1` call's, whose client resends the history each time) or that has nothing to compact gets.

Nothing here knows of Django: the server reads the memory and stores the events.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from .estimate import estimate_usage
from .events import AgentEvent, CompactionEvent, ErrorCode, ErrorEvent
from .hooks import AgentState, ModelInterceptor, StopRun, chain_model
from .llm import ChatModel
from .model_errors import ModelCallError
from .trace import CANCELLED, ModelCallObserver, attempt_record, notify
from .turns import ModelRequest, ModelTurn, Usage

logger = logging.getLogger(__name__)

PURPOSE = "compaction"
DEFAULT_PROMPT = (
    "Summarize the conversation so far for your own later use: the user's goals, the facts, decisions, "
    "names, numbers and files that matter, and the questions still open. Write it in the conversation's "
    "language. Answer with the summary alone."
)
# The first message of a compaction call, before the summary in use and the turns to summarize.
INSTRUCTIONS = (
    "You condense the earlier part of a conversation between a user and an AI assistant, so that the "
    "assistant can go on with it without the original messages."
)
# How the summary opens the memory of every request it stands in for.
SUMMARY_HEADING = "[Summary of the earlier conversation]"


def summary_message(text: str) -> dict[str, Any]:
    """The message a summary is sent as, right after the system prompt (the server builds the
    same message when a later run starts from it)."""
    return {"role": "user", "content": f"{SUMMARY_HEADING}\n{text}"}


@dataclass(frozen=True)
class Policy:
    context_tokens: int
    compact_at: float = 0.8  # 0: never compact by itself; trim to the whole context
    keep_turns: int = 4  # the newest turns kept verbatim, the run's own counted (at least 1)
    max_messages: int = 80  # 0: no bound on the messages
    prompt: str = DEFAULT_PROMPT
    may_compact: bool = True  # False: trim only (a `/v1` call's run)
    manual: bool = False  # a compaction run's: compact_now instead of the agent's model calls

    @property
    def limit(self) -> int:
        """The largest request sent without compacting or trimming first."""
        return int(self.context_tokens * self.compact_at) if self.compact_at > 0 else self.context_tokens


@dataclass(frozen=True)
class Summary:
    text: str
    seq: int | None  # its compaction event's seq (None: made by this run, not stored yet)
    turns: int  # the turns it stands for


@dataclass(frozen=True)
class EarlierTurn:
    size: int  # its messages
    through_seq: int | None  # the seq of its run's last event; None: no stored turn (a `/v1` call's history)


@dataclass(frozen=True)
class Layout:
    """How a run's first messages are made: the summary's message when `summary` is set, then
    `pinned` messages never dropped (a `/v1` client's leading system message), then the earlier
    `turns` oldest first, then the run's own `own` messages."""

    summary: Summary | None = None
    pinned: int = 0
    turns: tuple[EarlierTurn, ...] = ()
    own: int = 0


Emit = Callable[[AgentEvent], None]


class Caller(Protocol):
    """What a compaction call needs of the run's agent (chat.agent.loop.Agent)."""

    model: ChatModel
    model_interceptors: list[ModelInterceptor]
    observers: list[ModelCallObserver]
    max_retries: int
    retry_interval: float


class Compactor:
    """Fits one run's requests to its context (module docstring). The loop calls fit() before
    the first attempt of each model call, on the run's history, which it then goes on growing."""

    def __init__(self, policy: Policy, layout: Layout):
        self.policy = policy
        self.layout = layout
        self._own = layout.own
        self._seen: int | None = None
        self._history: list[dict[str, Any]] = []
        self._tools: list[dict[str, Any]] = []
        self._previous: Summary | None = None  # the summary the newest compaction took in
        self._why = ""  # why the newest compaction failed

    def size(self, messages: Sequence[dict[str, Any]] | None = None, tools: Sequence[dict[str, Any]] = ()) -> int:
        return estimate_usage(self._history if messages is None else messages, tools or self._tools, "").prompt_tokens

    def gauge(self) -> dict[str, int]:
        """`complete.context`: what a message following the run starts from, against the context."""
        return {"tokens": self.size(), "limit": self.policy.context_tokens}

    def _over(self, history: list[dict[str, Any]]) -> bool:
        limit = self.policy.max_messages
        messages = sum(1 for m in history if m.get("role") != "system")
        return self.size(history) > self.policy.limit or bool(limit and messages > limit)

    async def fit(
        self,
        history: list[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        state: AgentState,
        agent: Caller,
        emit: Emit,
    ) -> None:
        """Compact or trim `history` in place when it does not fit (module docstring); the
        compaction call is `agent`'s model's, retried and observed as its own calls are."""
        if self._seen is not None:  # what the loop appended since: the run's own
            self._own += len(history) - self._seen
        self._history, self._tools = history, list(tools)
        try:
            if not self._over(history):
                return
            turns = self.layout.turns
            kept = max(self.policy.keep_turns - 1, 0)
            older = turns[: len(turns) - kept] if kept else turns
            if self.policy.may_compact and self.policy.compact_at > 0 and older and older[-1].through_seq is not None:
                before = self.size(history)
                summary = await self._summarize(history, len(older), state, agent)
                if summary is None:
                    emit(
                        ErrorEvent(ErrorCode.COMPACTION_FAILED, "The conversation could not be summarized.", self._why)
                    )
                else:
                    self._replace(history, len(older), summary)
                    emit(self._event(older, summary, before))
            if self._over(history):
                self._trim(history)
        finally:
            self._seen = len(history)

    async def compact_now(
        self,
        history: list[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        state: AgentState,
        agent: Caller,
        emit: Emit,
    ) -> ErrorEvent | None:
        """A compaction run's one step (docs/protocol.md, "Compaction", on demand): the summary in
        use and every earlier turn but the newest `keep_turns` summarized, whatever their size; the
        event's `tokensAfter` is the memory a following message starts from. The error that
        fails the run, or None."""
        self._history, self._tools = history, list(tools)
        turns = self.layout.turns
        keep = max(self.policy.keep_turns, 0)
        older = turns[: len(turns) - keep] if keep else turns
        if not older or older[-1].through_seq is None:
            return ErrorEvent(ErrorCode.COMPACTION_FAILED, "There is nothing to summarize.", "no turn to summarize")
        before = self.size(history)
        try:
            summary = await self._summarize(history, len(older), state, agent)
        except StopRun as stop:  # a budget used up before the compaction call
            return stop.error
        if summary is None:
            return ErrorEvent(ErrorCode.COMPACTION_FAILED, "The conversation could not be summarized.", self._why)
        self._replace(history, len(older), summary)
        emit(replace(self._event(older, summary, before), trigger="manual"))
        return None

    # -- where the parts of the history are ----------------------------------------------
    def _starts(self, history: list[dict[str, Any]]) -> tuple[int, int]:
        """(index of the summary's message or the first pinned or turn message, index of the
        first earlier turn's first message)."""
        turns_at = len(history) - self._own - sum(turn.size for turn in self.layout.turns)
        head = turns_at - self.layout.pinned - (1 if self.layout.summary else 0)
        return head, turns_at

    def _replace(self, history: list[dict[str, Any]], count: int, summary: Summary) -> None:
        head, turns_at = self._starts(history)
        dropped = sum(turn.size for turn in self.layout.turns[:count])
        pinned = history[turns_at - self.layout.pinned : turns_at]
        history[head : turns_at + dropped] = [summary_message(summary.text), *pinned]
        self.layout = replace(self.layout, summary=summary, turns=self.layout.turns[count:])

    def _trim(self, history: list[dict[str, Any]]) -> None:
        """Drop the oldest earlier turns, whole, until the request fits or none is left."""
        while self.layout.turns and self._over(history):
            _, turns_at = self._starts(history)
            first = self.layout.turns[0]
            del history[turns_at : turns_at + first.size]
            self.layout = replace(self.layout, turns=self.layout.turns[1:])

    def _event(self, older: Sequence[EarlierTurn], summary: Summary, before: int) -> CompactionEvent:
        previous = self._previous
        return CompactionEvent(
            summary=summary.text,
            through_seq=older[-1].through_seq or 0,
            previous_seq=None if previous is None else previous.seq,
            turns=summary.turns,
            tokens_before=before,
            tokens_after=self.size(),
        )

    # -- the compaction call ---------------------------------------------------------------
    def request(self, history: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
        """The messages of a call summarizing the summary in use and the oldest `count` turns."""
        head, turns_at = self._starts(history)
        end = turns_at + sum(turn.size for turn in self.layout.turns[:count])
        messages = [{"role": "system", "content": INSTRUCTIONS}]
        if self.layout.summary is not None:
            messages.append(summary_message(self.layout.summary.text))
        transcript = "\n\n".join(_as_text(message) for message in history[turns_at:end])
        messages.append({"role": "user", "content": f"[The conversation to summarize]\n{transcript}"})
        messages.append({"role": "user", "content": self.policy.prompt})
        return messages

    async def _summarize(
        self, history: list[dict[str, Any]], count: int, state: AgentState, agent: Caller
    ) -> Summary | None:
        """The new summary, or None when every attempt failed or answered nothing."""
        options = replace(agent.model.options, tool_choice=None)
        request = ModelRequest(messages=self.request(history, count), options=options)
        self._previous = self.layout.summary
        retries = agent.max_retries
        for attempt in range(1, retries + 2):
            turn, error = await _call(agent, request, state, attempt)
            if turn is not None and turn.content.strip():
                before = self.layout.summary.turns if self.layout.summary else 0
                return Summary(turn.content.strip(), None, before + count)
            self._why = error or "the model answered no summary"
            logger.warning("compaction attempt %s failed: %s", attempt, self._why)
            if attempt <= retries:
                await asyncio.sleep(agent.retry_interval)
        return None


async def _call(agent: Caller, request: ModelRequest, state: AgentState, attempt: int) -> tuple[ModelTurn | None, str]:
    """One attempt, through the agent's model interceptors (a budget check may stop the run
    before it: hooks.StopRun goes up to the loop): its turn or why it failed, recorded for the
    observers; its tokens count in the run's usage (a cancelled attempt's estimated, as the
    loop's calls')."""

    async def call(request: ModelRequest) -> ModelTurn:
        started_at, t0 = time.time(), time.monotonic()
        turn: ModelTurn | None = None
        error = ""
        try:
            async for item in agent.model.stream(request):
                if isinstance(item, ModelTurn):
                    turn = item
        except ModelCallError as exc:
            error = exc.detail
            raise
        except asyncio.CancelledError:
            error = CANCELLED
            raise
        finally:
            record = attempt_record(
                request,
                iteration=state.iteration,
                attempt=attempt,
                started_at=started_at,
                t0=t0,
                turn=turn,
                error=error,
                purpose=PURPOSE,
            )
            state.usage = state.usage + Usage(record.prompt_tokens, record.completion_tokens, record.total_tokens)
            notify(agent.observers, record)
        assert turn is not None  # ChatModel.stream ends with a turn or raises
        return turn

    try:
        return await chain_model(agent.model_interceptors, call)(request), ""
    except ModelCallError as exc:
        return None, exc.detail


def _as_text(message: dict[str, Any]) -> str:
    """One message of a turn to summarize, as text: images named, never sent."""
    role = str(message.get("role", "")).upper()
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    lines = [f"{role}: {content}" if content else f"{role}:"]
    for image in message.get("images") or ():
        lines.append(f"[image: {image.get('path', '')}]")
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        lines.append(f"[calls {function.get('name', '')} with {function.get('arguments', '')}]")
    if message.get("role") == "tool":
        lines[0] = (
            f"TOOL RESULT: {json.dumps(content, ensure_ascii=False) if not isinstance(content, str) else content}"
        )
    return "\n".join(lines)
