"""One streamed chat completion over the official `openai` SDK.

The SDK's own retries are off (the agent loop retries, visibly); a call either
yields its thinking/text deltas and ends with a ModelTurn, or raises
ModelCallError. A stream that ends without a finish_reason, or that carries an
error mid-way, is a failed call: half an answer is not an answer.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import openai

from .events import TextEvent, ThinkingEvent
from .thinking import DEFAULT_TAGS, TEXT, ThinkTagParser


class ModelCallError(Exception):
    """A model call that failed; `detail` is the technical reason shown in the error event."""

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail


@dataclass(frozen=True)
class ModelOptions:
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    # Provider-specific body fields, e.g. {"enable_thinking": True} for DashScope.
    extra_body: dict[str, Any] = field(default_factory=dict)

    def to_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        for name in ("temperature", "max_tokens", "top_p"):
            value = getattr(self, name)
            if value is not None:
                kwargs[name] = value
        if self.extra_body:
            kwargs["extra_body"] = dict(self.extra_body)
        return kwargs


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str

    def to_message(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
        )


@dataclass
class ModelRequest:
    """What one model call is asked; interceptors may rewrite any of it.

    The loop fills `options` from the model's defaults, so an interceptor can
    change, say, the temperature of one call.
    """

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    options: ModelOptions = field(default_factory=ModelOptions)
    response_format: dict[str, Any] | None = None


@dataclass(frozen=True)
class ModelTurn:
    """The settled result of one model call."""

    content: str
    thinking: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = "stop"
    usage: Usage | None = None
    # False when an interceptor made this turn up without streaming it; the loop
    # then emits its content as one text event.
    streamed: bool = True

    def assistant_message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.tool_calls:
            message["tool_calls"] = [call.to_message() for call in self.tool_calls]
        return message


class _ToolCallAccumulator:
    """Tool-call deltas merged by index, tolerant of providers' variations.

    OpenAI sends id and name in the first piece only and the arguments in pieces;
    some providers resend the name with each piece, omit ids, omit the index, or
    repeat the whole arguments at the end.
    """

    def __init__(self) -> None:
        self._calls: dict[int, dict[str, str]] = {}

    def __bool__(self) -> bool:
        return bool(self._calls)

    def add(self, delta: Any) -> None:
        call_id = delta.id or ""
        index = delta.index
        if index is None:
            index = next((i for i, c in self._calls.items() if call_id and c["id"] == call_id), None)
            if index is None:
                index = len(self._calls) if (call_id or not self._calls) else max(self._calls)
        entry = self._calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
        if call_id and not entry["id"]:
            entry["id"] = call_id
        function = delta.function
        if function is None:
            return
        if function.name and function.name != entry["name"]:
            entry["name"] += function.name
        if function.arguments:
            if function.arguments == entry["arguments"] and _is_json(entry["arguments"]):
                return  # the whole arguments resent after the pieces
            entry["arguments"] += function.arguments

    def calls(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(entry["id"] or f"call_{uuid.uuid4().hex[:24]}", entry["name"], entry["arguments"])
            for _, entry in sorted(self._calls.items())
        )


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _reasoning_of(delta: Any) -> str | None:
    # DeepSeek and Qwen say reasoning_content, OpenRouter and vLLM say reasoning;
    # neither is in the SDK's types, so they arrive as pydantic extras.
    extra = delta.model_extra or {}
    value = extra.get("reasoning_content") or extra.get("reasoning")
    return value if isinstance(value, str) and value else None


class ChatModel:
    """A model behind an OpenAI-compatible endpoint."""

    def __init__(
        self,
        *,
        client: openai.AsyncOpenAI,
        model: str,
        options: ModelOptions | None = None,
        think_tags: Sequence[tuple[str, str]] = DEFAULT_TAGS,
        start_in_thinking: bool = False,
        timeout: float | None = None,
    ):
        # Every retry must be a visible error event, so the SDK must not retry on its own.
        self.client = client.with_options(max_retries=0)
        self.model = model
        self.options = options or ModelOptions()
        self.think_tags = tuple(think_tags)
        self.start_in_thinking = start_in_thinking
        self.timeout = timeout
        self._usage_supported = True

    async def stream(self, request: ModelRequest) -> AsyncIterator[ThinkingEvent | TextEvent | ModelTurn]:
        """Yield thinking/text deltas, then exactly one ModelTurn; or raise ModelCallError."""
        try:
            async with asyncio.timeout(self.timeout):
                stream = await self._open(request)
                async with stream:
                    async for item in self._read(stream):
                        yield item
        except ModelCallError:
            raise
        except TimeoutError:
            raise ModelCallError(f"the model did not finish within {self.timeout:g} s") from None
        except openai.APIStatusError as exc:
            raise ModelCallError(f"HTTP {exc.status_code}: {_error_message(exc)}") from None
        except openai.APIError as exc:
            raise ModelCallError(f"{type(exc).__name__}: {_error_message(exc)}") from None
        except Exception as exc:  # transport errors surface as several exception types
            raise ModelCallError(f"{type(exc).__name__}: {exc}") from None

    async def _open(self, request: ModelRequest):
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,
            "stream": True,
            **request.options.to_kwargs(),
        }
        if request.tools:
            kwargs["tools"] = request.tools
        if request.response_format:
            kwargs["response_format"] = request.response_format
        if self._usage_supported:
            try:
                return await self.client.chat.completions.create(
                    **kwargs, stream_options={"include_usage": True}
                )
            except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
                # Some compatible servers reject stream_options; usage is then unknown.
                if "stream_options" not in str(exc) and "include_usage" not in str(exc):
                    raise
                self._usage_supported = False
        return await self.client.chat.completions.create(**kwargs)

    async def _read(self, stream: Any) -> AsyncIterator[ThinkingEvent | TextEvent | ModelTurn]:
        parser = ThinkTagParser(self.think_tags, start_in_thinking=self.start_in_thinking)
        tool_calls = _ToolCallAccumulator()
        content: list[str] = []
        thinking: list[str] = []
        finish_reason: str | None = None
        usage: Usage | None = None

        def pieces_to_events(pieces):
            for kind, text in pieces:
                if kind == TEXT:
                    content.append(text)
                    yield TextEvent(text)
                else:
                    thinking.append(text)
                    yield ThinkingEvent(text)

        async for chunk in stream:
            if getattr(chunk, "usage", None):
                u = chunk.usage
                usage = Usage(u.prompt_tokens or 0, u.completion_tokens or 0, u.total_tokens or 0)
            for choice in (chunk.choices or [])[:1]:  # some servers send choices: null with usage
                delta = choice.delta
                if delta is not None:
                    reasoning = _reasoning_of(delta)
                    if reasoning:
                        thinking.append(reasoning)
                        yield ThinkingEvent(reasoning)
                    if delta.tool_calls and not tool_calls:
                        # A tail held back as a possible tag was answer text after all.
                        for event in pieces_to_events(parser.flush()):
                            yield event
                    for call_delta in delta.tool_calls or ():
                        tool_calls.add(call_delta)
                    # Once the model calls tools, trailing content is filler, not an answer.
                    if delta.content and not tool_calls:
                        for event in pieces_to_events(parser.feed(delta.content)):
                            yield event
                if choice.finish_reason:
                    finish_reason = choice.finish_reason
        if finish_reason is None:
            raise ModelCallError("the stream ended before the model finished (truncated response)")
        if not tool_calls:
            for event in pieces_to_events(parser.flush()):
                yield event
        yield ModelTurn(
            content="".join(content),
            thinking="".join(thinking),
            tool_calls=tool_calls.calls(),
            finish_reason=finish_reason,
            usage=usage,
        )


def _error_message(exc: openai.APIError) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(getattr(exc, "message", None) or exc)
