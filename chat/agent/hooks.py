"""Extension points of the loop, after Spring AI Alibaba's ReactAgent.

- Hooks observe or adjust the run at fixed points: before/after the agent,
  before/after each model call.
- Interceptors wrap a model call or a tool call as a chain: each gets the
  request and `call_next`, and may change the request, skip the call, or
  change the result.

The classes at the bottom are the shipped examples.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .events import ErrorEvent
from .tools import ToolContext, ToolError, ToolRecord, error_result
from .turns import ModelRequest, ModelTurn, ToolCall, Usage


@dataclass
class AgentState:
    """What hooks see. `messages` is what the next model call will be sent: a
    before_model hook may edit it without touching the run's own history."""

    messages: list[dict[str, Any]]
    context: ToolContext
    iteration: int = 0
    usage: Usage = field(default_factory=Usage)
    tool_records: list[ToolRecord] = field(default_factory=list)


class StopRun(Exception):  # noqa: N818 - a stop, not an error of the interceptor
    """Raised by a model interceptor before it calls the model (each attempt, retries included):
    the run makes no further model call and ends `failed` with `error`, its text so far kept as
    its answer (a budget used up, for one)."""

    def __init__(self, error: ErrorEvent):
        super().__init__(error.message)
        self.error = error


class AgentHook:
    async def before_agent(self, state: AgentState) -> None:
        return None

    async def after_agent(self, state: AgentState) -> None:
        return None

    async def before_model(self, state: AgentState) -> None:
        return None

    async def after_model(self, state: AgentState, turn: ModelTurn) -> None:
        return None


ModelHandler = Callable[[ModelRequest], Awaitable[ModelTurn]]


@dataclass
class ToolCallRequest:
    call: ToolCall
    context: ToolContext


@dataclass(frozen=True)
class ToolOutcome:
    result: str
    is_error: bool = False


ToolHandler = Callable[[ToolCallRequest], Awaitable[ToolOutcome]]


class ModelInterceptor:
    async def intercept_model(self, request: ModelRequest, call_next: ModelHandler) -> ModelTurn:
        return await call_next(request)


class ToolInterceptor:
    async def intercept_tool(self, request: ToolCallRequest, call_next: ToolHandler) -> ToolOutcome:
        return await call_next(request)


def chain_model(interceptors: Sequence[ModelInterceptor], innermost: ModelHandler) -> ModelHandler:
    handler = innermost
    for interceptor in reversed(interceptors):
        handler = _bind_model(interceptor, handler)
    return handler


def _bind_model(interceptor: ModelInterceptor, call_next: ModelHandler) -> ModelHandler:
    async def handler(request: ModelRequest) -> ModelTurn:
        return await interceptor.intercept_model(request, call_next)

    return handler


def chain_tool(interceptors: Sequence[ToolInterceptor], innermost: ToolHandler) -> ToolHandler:
    handler = innermost
    for interceptor in reversed(interceptors):
        handler = _bind_tool(interceptor, handler)
    return handler


def _bind_tool(interceptor: ToolInterceptor, call_next: ToolHandler) -> ToolHandler:
    async def handler(request: ToolCallRequest) -> ToolOutcome:
        return await interceptor.intercept_tool(request, call_next)

    return handler


# --- Shipped examples -----------------------------------------------------------


class MessageTrimmingHook(AgentHook):
    """Keep the model's input within a budget: system messages plus the newest turns.

    The cut always lands on a user message, so a tool result is never sent
    without the assistant message that asked for it.
    """

    def __init__(self, *, max_messages: int = 50, max_chars: int | None = None):
        self.max_messages = max_messages
        self.max_chars = max_chars

    async def before_model(self, state: AgentState) -> None:
        system = [m for m in state.messages if m.get("role") == "system"]
        rest = [m for m in state.messages if m.get("role") != "system"]
        keep_from = max(0, len(rest) - self.max_messages)
        if self.max_chars is not None:
            size = 0
            for index in range(len(rest) - 1, -1, -1):
                size += len(json.dumps(rest[index], ensure_ascii=False))
                if size > self.max_chars:
                    keep_from = max(keep_from, index + 1)
                    break
        # Walk forward to a user message; never drop the newest user message.
        users = [i for i, m in enumerate(rest) if m.get("role") == "user"]
        starts = [i for i in users if i >= keep_from]
        start = starts[0] if starts else (users[-1] if users else keep_from)
        state.messages[:] = system + rest[start:]


class DynamicSystemPrompt(ModelInterceptor):
    """Rebuild the system prompt for every model call (date, user, enabled skills...)."""

    def __init__(self, build: Callable[[ModelRequest], str]):
        self.build = build

    async def intercept_model(self, request: ModelRequest, call_next: ModelHandler) -> ModelTurn:
        prompt = self.build(request)
        others = [m for m in request.messages if m.get("role") != "system"]
        request.messages = [{"role": "system", "content": prompt}, *others]
        return await call_next(request)


class KeywordGuardrail(ModelInterceptor):
    """Refuse, without calling the model, when the user's latest message matches a pattern."""

    def __init__(self, patterns: Iterable[str], reply: str = "I can't help with that request."):
        self.patterns = [re.compile(p, re.IGNORECASE) for p in patterns]
        self.reply = reply

    async def intercept_model(self, request: ModelRequest, call_next: ModelHandler) -> ModelTurn:
        latest = next((m for m in reversed(request.messages) if m.get("role") == "user"), None)
        text = latest.get("content") if latest else None
        if isinstance(text, str) and any(p.search(text) for p in self.patterns):
            return ModelTurn(content=self.reply, streamed=False)
        return await call_next(request)


class ToolErrorPolicy(ToolInterceptor):
    """Retry transient tool failures, and tell the model what to do with the rest.

    Only connection failures are retried by default: a timed-out tool may have done
    its work (written a file, run a command), and running it twice is not safe.
    """

    def __init__(
        self,
        *,
        retries: int = 1,
        retry_on: tuple[type[BaseException], ...] = (ConnectionError,),
        delay: float = 0.5,
        hint: str = "Check the arguments and try again, or answer without this tool.",
    ):
        self.retries = retries
        self.retry_on = retry_on
        self.delay = delay
        self.hint = hint

    async def intercept_tool(self, request: ToolCallRequest, call_next: ToolHandler) -> ToolOutcome:
        for attempt in range(self.retries + 1):
            try:
                outcome = await call_next(request)
                break
            except ToolError as exc:
                # Tool errors (bad arguments, unknown tool, the tool's own refusal) arrive
                # raised, not as error outcomes: without this they would never get the hint.
                outcome = ToolOutcome(error_result(str(exc)), is_error=True)
                break
            except self.retry_on:
                if attempt == self.retries:
                    raise
                await asyncio.sleep(self.delay)
        if not outcome.is_error:
            return outcome
        try:
            body = json.loads(outcome.result)
        except ValueError:
            body = {"error": outcome.result}
        if isinstance(body, dict):
            body.setdefault("hint", self.hint)
        return ToolOutcome(json.dumps(body, ensure_ascii=False), is_error=True)
