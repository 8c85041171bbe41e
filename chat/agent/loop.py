"""The ReAct loop: model call -> tool calls -> model call ... -> answer, as a stream of events.

    agent = Agent(model, tools=registry, system_prompt="...")
    run = agent.stream("what is 6*7?")
    async for event in run:      # ThinkingEvent, ToolStartEvent, ..., CompleteEvent
        ...
    run.result                    # AgentResult: status, text, messages, tool records, usage

A `steering` source (chat.agent.steering) is asked right before every model call for what a
person sent the run meanwhile: a model call or a tool round under way is never cut for it. Then a
`compactor` (chat.agent.compaction) fits the request to the agent's context.

The loop runs in a task of its own that feeds a queue, so `run.cancel()` can stop it at any
await (closing the model stream, cancelling running tools) and still emit the closing events: a
`tool_end` for every started tool, `error` CANCELLED, then `complete` (hooks.StopRun: likewise).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .answer import Answer
from .approval import ApprovalPolicy
from .compaction import Compactor
from .events import (
    AgentEvent,
    CompleteEvent,
    ErrorCode,
    ErrorEvent,
    RunStatus,
    SteerAppliedEvent,
    TextEvent,
)
from .hooks import (
    AgentHook,
    AgentState,
    ModelInterceptor,
    StopRun,
    ToolInterceptor,
    chain_model,
)
from .llm import ChatModel, ModelCallError
from .steering import SteeringSource, steers_now
from .structured import response_format_of, validate_structured
from .tool_round import ToolRound
from .tools import (
    Tool,
    ToolContext,
    ToolRecord,
    ToolRegistry,
    ToolSource,
)
from .trace import CANCELLED, ModelCallObserver, attempt_record, notify
from .turns import ModelRequest, ModelTurn, Usage, with_system

logger = logging.getLogger(__name__)

_END = object()


@dataclass
class AgentResult:
    status: str
    text: str
    # Messages the run added after its input: assistant turns and tool results.
    messages: list[dict[str, Any]] = field(default_factory=list)
    tool_records: list[ToolRecord] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    iterations: int = 0
    error: ErrorEvent | None = None
    structured: Any = None
    # The answer's finish_reason when not "stop" ("length": cut off at the token limit).
    finish_reason: str = ""


class AgentRunError(Exception):
    def __init__(self, result: AgentResult):
        reason = result.error.message if result.error else result.status
        super().__init__(f"agent run {result.status}: {reason}")
        self.result = result


class Agent:
    def __init__(
        self,
        model: ChatModel,
        *,
        tools: ToolRegistry | None = None,
        tool_sources: Sequence[ToolSource] = (),
        system_prompt: str | None = None,
        instructions: str | None = None,
        max_iterations: int = 10,
        max_retries: int = 3,
        retry_interval: float = 10.0,
        max_retry_after: float = 60.0,
        tool_timeout: float = 30.0,
        tool_concurrency: int = 4,
        max_tool_calls: int | None = None,
        max_tool_result_chars: int = 20_000,
        hooks: Sequence[AgentHook] = (),
        model_interceptors: Sequence[ModelInterceptor] = (),
        tool_interceptors: Sequence[ToolInterceptor] = (),
        response_format: Any = None,
        observers: Sequence[ModelCallObserver] = (),
        trace_requests: bool = False,
        approval: ApprovalPolicy | None = None,
        steering: SteeringSource | None = None,
        compactor: Compactor | None = None,
    ):
        self.model = model
        self.tools = tools or ToolRegistry()
        self.tool_sources = list(tool_sources)
        self.system_prompt = system_prompt
        # A system message of this run alone, right after the system prompt (never instead of it).
        self.instructions = instructions
        self.max_iterations = max_iterations
        self.max_retries = max_retries
        self.retry_interval = retry_interval
        # The longest wait an endpoint's Retry-After may impose before a retry.
        self.max_retry_after = max_retry_after
        self.tool_timeout = tool_timeout
        self.tool_concurrency = max(1, tool_concurrency)
        self.max_tool_calls = max_tool_calls
        self.max_tool_result_chars = max_tool_result_chars
        self.hooks = list(hooks)
        self.model_interceptors = list(model_interceptors)
        self.tool_interceptors = list(tool_interceptors)
        self.response_format = response_format
        self._response_format = response_format_of(response_format)
        # Called with a ModelCallRecord after every model call attempt (chat.agent.trace).
        self.observers = list(observers)
        self.trace_requests = trace_requests  # records carry the messages sent (large: off by default)
        # Tools whose calls wait for a person's approval (chat.agent.approval); None: none do.
        self.approval = approval
        self.steering = steering
        # Keeps this run's requests within its context (chat.agent.compaction): one run's, not reused.
        self.compactor = compactor

    def stream(self, messages: str | list[dict[str, Any]], *, context: ToolContext | None = None) -> AgentRun:
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        return AgentRun(self, list(messages), context or ToolContext())

    async def invoke(self, messages: str | list[dict[str, Any]], *, context: ToolContext | None = None) -> AgentResult:
        run = self.stream(messages, context=context)
        async for _ in run:
            pass
        return run.result

    async def call(self, messages: str | list[dict[str, Any]], *, context: ToolContext | None = None) -> str:
        """The final answer's text; AgentRunError when the run did not succeed."""
        result = await self.invoke(messages, context=context)
        if result.status != RunStatus.SUCCEEDED:
            raise AgentRunError(result)
        return result.text


class AgentRun:
    """One execution of an agent: an async iterator of its events."""

    def __init__(self, agent: Agent, messages: list[dict[str, Any]], context: ToolContext):
        self.agent = agent
        self._input = messages
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._context = replace(context, emit=self._emit_async)
        self._answer = Answer()
        self._tools = agent.tools  # with the tool sources' tools once the run starts
        self._tool_round = ToolRound(agent, emit=self._emit, context=self._context)
        self._cancel_reason = (RunStatus.CANCELLED, ErrorEvent(ErrorCode.CANCELLED, "The run was cancelled.", ""))
        self._ended = False
        self._first_delta_at: float | None = None  # of the model call under way (monotonic)
        self._received: list[str] = []  # the text and thinking the model call under way streamed
        self.result = AgentResult(status="running", text="")

    def offers(self, name: str) -> bool:
        """Whether the run offered a tool of this name (a model may call one it invented)."""
        return name in self._tools

    # -- consumer side --------------------------------------------------------
    def __aiter__(self) -> AsyncIterator[AgentEvent]:
        self.start()
        return self

    async def __anext__(self) -> AgentEvent:
        self.start()  # anext(run) calls __anext__ without __aiter__
        item = await self._queue.get()
        if item is _END:
            self._queue.put_nowait(_END)  # later calls also end
            raise StopAsyncIteration
        return item

    def cancel(
        self,
        *,
        status: str = RunStatus.CANCELLED,
        code: str = ErrorCode.CANCELLED,
        message: str = "The run was cancelled.",
    ) -> None:
        """Stop the run; its remaining events (tool_end, the error, complete) still arrive.

        A server shutting down passes status/code `interrupted`/`INTERRUPTED`.
        """
        self.start()
        assert self._task is not None  # start() made it
        if not self._task.done():
            self._cancel_reason = (status, ErrorEvent(code, message, ""))
            self._task.cancel()

    async def aclose(self) -> None:
        if self._task and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def start(self) -> None:
        """Begin now rather than at the first read of its events (which starts it too)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._drive(), name="agent-run")
            self._task.add_done_callback(self._on_task_done)

    def _on_task_done(self, task: asyncio.Task[None]) -> None:
        # A task cancelled before its first step never enters _drive (the coroutine
        # is thrown CancelledError before its body runs): close the run here, or
        # its consumer would wait for events that never come.
        if not self._ended:
            self._ended = True
            self._finish(*self._cancel_reason)
            self._queue.put_nowait(_END)

    # -- producer side --------------------------------------------------------
    def _emit(self, event: AgentEvent) -> None:
        self._answer.add(event.to_dict())
        self._queue.put_nowait(event)

    async def _emit_async(self, event: AgentEvent) -> None:
        self._emit(event)

    def _finish(self, status: str, error: ErrorEvent | None = None) -> None:
        if error is not None:
            self._emit(error)
            self.result.error = error
        self.result.status = status
        self.result.text = self._answer.text
        self._emit(CompleteEvent(status, self.result.finish_reason if status == RunStatus.SUCCEEDED else ""))

    async def _drive(self) -> None:
        try:
            status, error = await self._loop()
            self._finish(status, error)
        except asyncio.CancelledError:
            self._finish(*self._cancel_reason)
        except Exception as exc:  # a bug in a hook or interceptor must still close the run
            logger.exception("agent run failed")
            self._finish(
                RunStatus.FAILED, ErrorEvent("AGENT_ERROR", "The agent failed.", f"{type(exc).__name__}: {exc}")
            )
        finally:
            self._ended = True
            self._queue.put_nowait(_END)

    async def _loop(self) -> tuple[str, ErrorEvent | None]:
        agent = self.agent
        history = with_system(self._input, agent.system_prompt, agent.instructions)
        state = AgentState(messages=list(history), context=self._context, tool_records=self.result.tool_records)
        if agent.tool_sources:
            self._tools = self._tool_round.tools = agent.tools.extended(await self._source_tools())
        for hook in agent.hooks:
            await hook.before_agent(state)
        try:
            return await self._rounds(history, state)
        finally:
            self.result.usage = state.usage
            for hook in agent.hooks:
                await hook.after_agent(state)

    async def _source_tools(self) -> list[Tool]:
        tools: list[Tool] = []
        for source in self.agent.tool_sources:
            try:
                tools.extend(await source())
            except Exception:  # a source that fails takes its tools away, not the run
                logger.exception("a tool source failed; its tools are not offered to this run")
        return tools

    async def _rounds(self, history: list[dict[str, Any]], state: AgentState) -> tuple[str, ErrorEvent | None]:
        agent = self.agent
        call_model = chain_model(agent.model_interceptors, self._stream_model)
        tool_specs = self._tools.specs()
        if agent.compactor is not None and agent.compactor.policy.manual:  # a compaction run
            error = await agent.compactor.compact_now(history, tool_specs, state, agent, self._emit)
            return (RunStatus.SUCCEEDED, None) if error is None else (RunStatus.FAILED, error)
        for iteration in range(1, agent.max_iterations + 1):
            state.iteration = self.result.iterations = iteration
            for steer in await steers_now(agent.steering):
                history.append(message := {"role": "user", "content": steer.content})
                self.result.messages.append(message)
                self._emit(SteerAppliedEvent(steer.queue_id))
            try:
                if agent.compactor is not None:
                    await agent.compactor.fit(history, tool_specs, state, agent, self._emit)
            except StopRun as stop:  # a budget used up before the compaction call
                return RunStatus.FAILED, stop.error
            state.messages = list(history)
            for hook in agent.hooks:
                await hook.before_model(state)
            turn = await self._call_with_retries(call_model, state, tool_specs)
            if isinstance(turn, ErrorEvent):
                return RunStatus.FAILED, turn  # retries exhausted
            if turn.usage:
                state.usage = state.usage + turn.usage
            for hook in agent.hooks:
                await hook.after_model(state, turn)
            if not turn.streamed and turn.content:
                self._emit(TextEvent(turn.content))
            message = turn.assistant_message()
            history.append(message)
            self.result.messages.append(message)
            if not turn.tool_calls:
                return self._settle_answer(turn)
            for tool_message in await self._tool_round.run(turn.tool_calls, state):
                history.append(tool_message)
                self.result.messages.append(tool_message)
        error = ErrorEvent(
            ErrorCode.MAX_ITERATIONS,
            f"Stopped after {agent.max_iterations} model calls without a final answer.",
            f"AGENT_MAX_ITERATIONS={agent.max_iterations}",
        )
        return RunStatus.FAILED, error

    def _settle_answer(self, turn: ModelTurn) -> tuple[str, ErrorEvent | None]:
        if turn.finish_reason not in (None, "stop"):
            self.result.finish_reason = turn.finish_reason
        spec = self.agent._response_format
        if spec is None:
            return RunStatus.SUCCEEDED, None
        try:
            self.result.structured = validate_structured(self.agent.response_format, turn.content)
        except ValueError as exc:
            return RunStatus.FAILED, ErrorEvent(
                ErrorCode.INVALID_OUTPUT, "The answer does not match the requested format.", str(exc)
            )
        return RunStatus.SUCCEEDED, None

    async def _call_with_retries(self, call_model, state: AgentState, tool_specs) -> ModelTurn | ErrorEvent:
        """The model's turn, or the final error once every retry failed."""
        agent = self.agent
        failures = 0
        while True:
            options = agent.model.options
            request = ModelRequest(
                messages=list(state.messages),
                tools=list(tool_specs),
                options=options if state.iteration == 1 else options.after_tool_round(),
                response_format=agent._response_format,
            )
            attempt = failures + 1
            started_at, t0 = time.time(), time.monotonic()
            self._first_delta_at, self._received = None, []
            try:
                turn = await call_model(request)
            except StopRun as stop:  # an interceptor ended the run before this attempt (a budget)
                return stop.error
            except ModelCallError as exc:
                self._observe(request, state.iteration, attempt, started_at, t0, error=exc.detail)
                # The error emitted below ends the attempt: its partial text leaves the answer (Answer).
                failures += 1
                if not exc.retryable:
                    self._log_failure(exc, "not retried")
                    # One error naming the cause: a wrong key or a missing model fails the same way again.
                    return ErrorEvent(ErrorCode.LLM_CALL_FAILED, exc.detail, exc.hint)
                if failures > agent.max_retries:
                    self._log_failure(exc, f"gave up after {agent.max_retries} retries")
                    message = f"The model call failed; gave up after {agent.max_retries} retries."
                    return ErrorEvent(ErrorCode.LLM_CALL_FAILED, message, exc.detail)
                delay = agent.retry_interval
                if exc.retry_after is not None:  # the endpoint said when; never longer than the cap
                    delay = max(delay, min(exc.retry_after, agent.max_retry_after))
                self._log_failure(exc, f"retrying in {delay:g} s ({failures}/{agent.max_retries})")
                self._emit(
                    ErrorEvent(
                        ErrorCode.LLM_CALL_FAILED,
                        f"The model call failed, retrying in {delay:g} s ({failures}/{agent.max_retries})",
                        exc.detail,
                    )
                )
                await asyncio.sleep(delay)
            except asyncio.CancelledError:
                # Cut by a Stop: its tokens were spent all the same, and count (chat.agent.estimate).
                self._observe(request, state.iteration, attempt, started_at, t0, error=CANCELLED)
                raise
            else:
                self._observe(request, state.iteration, attempt, started_at, t0, turn=turn)
                return turn

    def _observe(
        self,
        request: ModelRequest,
        iteration: int,
        attempt: int,
        started_at: float,
        t0: float,
        *,
        turn: ModelTurn | None = None,
        error: str = "",
    ) -> None:
        """Tell the observers how one model call attempt went."""
        if self.agent.observers:
            record = attempt_record(
                request,
                iteration=iteration,
                attempt=attempt,
                started_at=started_at,
                t0=t0,
                first_delta_at=self._first_delta_at,
                received="".join(self._received),
                turn=turn,
                error=error,
                keep_messages=self.agent.trace_requests,
            )
            notify(self.agent.observers, record)

    def _log_failure(self, exc: ModelCallError, outcome: str) -> None:
        """One line per failed model call, for operators: which run and model, and why."""
        logger.warning(
            "model call failed: run %s, model %s, status %s, %s: %s",
            self._context.run_id or "-",
            self.agent.model.model,
            exc.status if exc.status is not None else "-",
            outcome,
            exc.log_detail,
        )

    async def _stream_model(self, request: ModelRequest) -> ModelTurn:
        turn: ModelTurn | None = None
        async for item in self.agent.model.stream(request):
            if isinstance(item, ModelTurn):
                turn = item
            else:
                if self._first_delta_at is None:
                    self._first_delta_at = time.monotonic()
                self._received.append(item.content)
                self._emit(item)
        assert turn is not None  # ChatModel.stream always ends with a turn or raises
        return turn
