"""One streamed chat completion over the official `openai` SDK.

The SDK's own retries are off (the agent loop retries, visibly); a call either
yields its thinking/text deltas and ends with a ModelTurn, or raises
ModelCallError. A stream that ends with neither a finish_reason nor `[DONE]`, or
that carries an error mid-way, is a failed call: half an answer is not an answer.
A body with no event at all is a failure the server did not explain (llama-cpp-python
answers so when a request fails once its stream has begun).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx2
import openai
import orjson

from .chunks import TurnReader, sse_batches
from .events import TextEvent, ThinkingEvent
from .model_errors import ModelCallError, from_exception, timed_out
from .text import clean_value
from .thinking import DEFAULT_TAGS, ThinkTagParser
from .turns import ModelOptions, ModelRequest, ModelTurn


def _wire_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as sent: an assistant message's null or missing content as "".

    llama-cpp-python's server refuses both with HTTP 500 (its schema wants a string), so one
    tool round in a conversation's memory would fail every later call; OpenAI and the other
    servers take "". Done here, on the way out, because memories stored before (and messages
    that hooks or interceptors make) still say null.
    """
    if all(m.get("role") != "assistant" or isinstance(m.get("content"), str | list) for m in messages):
        return messages
    return [
        {**m, "content": ""} if m.get("role") == "assistant" and not isinstance(m.get("content"), str | list) else m
        for m in messages
    ]


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
        hold: asyncio.Event | None = None,
    ):
        # Every retry must be a visible error event, so the SDK must not retry on its own
        # (a client made that way is used as it is: with_options copies the client per run).
        self.client = client if client.max_retries == 0 else client.with_options(max_retries=0)
        self.model = model
        self.options = options or ModelOptions()
        self.think_tags = tuple(think_tags)
        self.start_in_thinking = start_in_thinking
        self.timeout = timeout
        self._usage_supported = True
        # A run whose start is still being stored sends its request at once, then reads nothing
        # of the answer (nor its failure) until this is set: the model's time to first token
        # overlaps the start's writes, and no delta, tool call or retry of a run that may yet be
        # refused comes before. A refused run is cancelled while it waits here.
        self.hold = hold

    async def stream(self, request: ModelRequest) -> AsyncIterator[ThinkingEvent | TextEvent | ModelTurn]:
        """Yield thinking/text deltas, then exactly one ModelTurn; or raise ModelCallError."""
        responded = False
        try:
            async with asyncio.timeout(self.timeout):
                async with self._open(request) as response:
                    responded = True
                    await self._held()
                    async for item in self._read(sse_batches(response)):
                        yield item
        except ModelCallError as exc:
            exc.redact_secrets([self.client.api_key])
            raise
        except TimeoutError:
            await self._held()
            raise timed_out(base_url=self.client.base_url, timeout=self.timeout, responded=responded) from None
        except Exception as exc:  # HTTP statuses, and transport errors of several exception types
            await self._held()
            raise from_exception(
                exc,
                model=self.model,
                base_url=self.client.base_url,
                secrets=[self.client.api_key],
                responded=responded,
            ) from None

    async def _held(self) -> None:
        if self.hold is not None:
            await self.hold.wait()

    @contextlib.asynccontextmanager
    async def _open(self, request: ModelRequest):
        body: dict[str, Any] = {"model": self.model, "messages": _wire_messages(request.messages), "stream": True}
        options = request.options.to_kwargs()
        body.update(options.pop("extra_body", {}))
        body.update(options)
        if request.tools:
            body["tools"] = request.tools
        else:
            body.pop("tool_choice", None)  # OpenAI refuses a tool_choice without tools
        if request.response_format:
            body["response_format"] = request.response_format
        if self._usage_supported:
            try:
                response = await self._post({**body, "stream_options": {"include_usage": True}})
            except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
                # Some compatible servers reject stream_options; usage is then unknown.
                if "stream_options" not in str(exc) and "include_usage" not in str(exc):
                    raise
                self._usage_supported = False
                response = await self._post(body)
        else:
            response = await self._post(body)
        try:
            yield response
        finally:
            await response.aclose()

    async def _post(self, body: dict[str, Any]) -> httpx2.Response:
        # The SDK's documented way to a raw response ("undocumented endpoints"): its auth,
        # base URL, timeouts and error mapping, without create()'s per-call transform of
        # the typed parameters (half of a request's CPU, measured) or the typed chunks.
        # The body goes as bytes made by orjson: the SDK's own JSON encoding of it was 6% of the
        # CPU of a burst of run starts (py-spy), for a body that is plain JSON data anyway.
        try:
            content = orjson.dumps(body)
        except TypeError:  # a lone surrogate in the messages (a tool's output, an old event)
            content = orjson.dumps(clean_value(body))
        return await self.client.post("/chat/completions", cast_to=httpx2.Response, content=content, stream=True)

    async def _read(self, batches: AsyncIterator[list[Any]]) -> AsyncIterator[ThinkingEvent | TextEvent | ModelTurn]:
        turn = TurnReader(ThinkTagParser(self.think_tags, start_in_thinking=self.start_in_thinking))
        # The deltas of one network read leave as one event per change of kind: under load a
        # read carries several chunks, and each event costs a trip through the loop and sink.
        async for batch in batches:
            try:
                for chunk in batch:
                    turn.feed(chunk)
            except ModelCallError:
                for event in turn.take_events():  # what came before the error, as before it
                    yield event
                raise
            for event in turn.take_events():
                yield event
        for last in turn.finish():
            yield last
