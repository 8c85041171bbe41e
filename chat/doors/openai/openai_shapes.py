"""The OpenAI-compatible endpoint's wire shapes (docs/protocol.md, "OpenAI-compatible endpoint"):
a chat completion request read into what a run start needs, and the answers an OpenAI client
expects: the model list, the `chat.completion`, its `chat.completion.chunk`s and the errors
`{"error": {"message", "type", "code"}}`. No I/O here: chat.doors.openai.openai_api does that."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.http import JsonResponse

from chat.agent.answer import Answer
from chat.agent.events import ErrorCode
from chat.agent.turns import ModelOptions
from chat.agents.profiles import RANGES

# The roles an earlier message may have; a `tool` message (or an assistant's tool_calls) answers
# tools the client offered, which this endpoint refuses.
HISTORY_ROLES = ("system", "developer", "user", "assistant")

# OpenAI's error types, by HTTP status.
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    502: "api_error",
    503: "api_error",
}

# The error code of a run a budget stopped between model calls (docs/protocol.md, "Budgets").
BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"

# The run start's refusal codes (chat.runs.engine) as (HTTP status, OpenAI code).
START_REFUSALS = {
    "BAD_REQUEST": (400, "invalid_request"),
    "TOO_LARGE": (400, "context_length_exceeded"),
    "RATE_LIMITED": (429, "rate_limit_exceeded"),
    "QUOTA_EXCEEDED": (429, "insufficient_quota"),
    "AGENT_UNAVAILABLE": (404, "model_not_found"),
    "RUN_IN_PROGRESS": (409, "run_in_progress"),
    "NOT_FOUND": (404, "not_found"),
    "UNAVAILABLE": (503, "service_unavailable"),
}


def openai_error(status: int, code: str, message: str, *, param: str | None = None) -> JsonResponse:
    # A budget's refusal has OpenAI's own type for it (the SDKs raise RateLimitError either way).
    kind = "insufficient_quota" if code == "insufficient_quota" else ERROR_TYPES.get(status, "api_error")
    error = {"message": message, "type": kind, "param": param, "code": code}
    return JsonResponse({"error": error}, status=status)


def quota_refusal(message: str, retry_after: int) -> JsonResponse:
    """A start refused, or a run stopped, by a budget: 429 insufficient_quota that the official
    SDKs do not retry (x-should-retry: false), with Retry-After."""
    response = openai_error(429, "insufficient_quota", message)
    response["Retry-After"] = str(retry_after)
    response["x-should-retry"] = "false"
    return response


class BadRequest(Exception):
    """A request the endpoint refuses with 400 (its `param` named)."""

    def __init__(self, message: str, *, param: str | None = None, code: str = "invalid_request"):
        super().__init__(message)
        self.message, self.param, self.code = message, param, code

    def response(self) -> JsonResponse:
        return openai_error(400, self.code, self.message, param=self.param)


@dataclass(frozen=True)
class ImageURL:
    """An `image_url` part's URL, read by chat.doors.openai.openai_images; `param` says where it was."""

    url: str
    param: str


@dataclass(frozen=True)
class RequestMessage:
    role: str  # system (developer read as it), user or assistant
    content: str  # its text parts joined
    images: tuple[ImageURL, ...] = ()  # a user's only


@dataclass(frozen=True)
class CompletionRequest:
    model: str
    content: str  # the last user message: the run's user_message
    history: tuple[RequestMessage, ...]  # the messages before it: the run's memory
    stream: bool = False
    include_usage: bool = False
    # temperature and max_tokens, applied to the run's model calls (chat.agents.profiles.with_request_options)
    options: ModelOptions = field(default_factory=ModelOptions)
    images: tuple[ImageURL, ...] = ()  # the last user message's

    def image_urls(self) -> tuple[ImageURL, ...]:
        """Every image of the request, in the order of its messages."""
        return (*(image for message in self.history for image in message.images), *self.images)


def _message(message: Mapping[str, Any], index: int) -> RequestMessage:
    """A message's text parts joined, and its `image_url` parts (OpenAI's shape: `{"type":
    "image_url", "image_url": {"url", "detail"?}}`; `detail` is not read, every image is
    scaled into AGENT_IMAGE_MAX_PIXELS), which only a user's message may carry."""
    role = "system" if message["role"] == "developer" else message["role"]
    content = message.get("content")
    where = f"messages[{index}].content"
    if isinstance(content, str):
        return RequestMessage(role, content)
    if not isinstance(content, list):
        raise BadRequest("content must be a string or a list of parts.", param=where, code="invalid_content")
    texts: list[str] = []
    images: list[ImageURL] = []
    for number, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            texts.append(str(part.get("text", "")))
        elif kind == "image_url" and role == "user":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else None
            if not isinstance(url, str):
                raise BadRequest(
                    'An image_url part needs "image_url": {"url": "data:image/png;base64,..."}.',
                    param=f"{where}[{number}].image_url",
                    code="invalid_content",
                )
            images.append(ImageURL(url, f"{where}[{number}].image_url.url"))
        elif kind == "image_url":
            raise BadRequest(
                "Only a user message may carry images.", param=f"{where}[{number}]", code="invalid_content"
            )
        else:
            raise BadRequest(
                "content must be a string or a list of text and image_url parts.",
                param=f"{where}[{number}]",
                code="invalid_content",
            )
    return RequestMessage(role, "".join(texts), tuple(images))


def _number(body: Mapping[str, Any], name: str) -> float | int | None:
    value = body.get(name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise BadRequest(f"{name} must be a number.", param=name)
    return value


def _run_options(body: Mapping[str, Any]) -> ModelOptions:
    """The request's `temperature` and `max_tokens` (or its newer name `max_completion_tokens`),
    within the bounds an agent profile's own options take (0 to 2, as OpenAI's; 1 to 1,000,000):
    refused with 400 outside them."""
    low, high = RANGES["temperature"]
    temperature = _number(body, "temperature")
    if temperature is not None and not low <= temperature <= high:
        raise BadRequest(f"temperature must be between {low:g} and {high:g}.", param="temperature")
    fewest, most = RANGES["max_tokens"]
    max_tokens = None
    for name in ("max_tokens", "max_completion_tokens"):
        value = _number(body, name)
        if value is None:
            continue
        if not isinstance(value, int) or not fewest <= value <= most:
            raise BadRequest(f"{name} must be an integer from {fewest:g} to {most:g}.", param=name)
        max_tokens = value if max_tokens is None else min(max_tokens, value)
    return ModelOptions(temperature=None if temperature is None else float(temperature), max_tokens=max_tokens)


def completion_request(body: Any) -> CompletionRequest:
    """The request of POST /v1/chat/completions, checked; raises BadRequest."""
    if not isinstance(body, dict):
        raise BadRequest("The body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("model must be an agent's slug (GET /v1/models).", param="model")
    for name in ("tools", "functions", "tool_choice", "function_call"):
        if body.get(name):
            raise BadRequest(
                "Client tools are not supported: the agent runs its own tools.", param=name, code="tools_not_supported"
            )
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list.", param="messages")
    history: list[RequestMessage] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in HISTORY_ROLES or message.get("tool_calls"):
            raise BadRequest(
                "Each message must be a system, developer, user or assistant message without tool calls.",
                param=f"messages[{index}]",
            )
        history.append(_message(message, index))
    last = history.pop()
    if last.role != "user":
        raise BadRequest("The last message must be the user's.", param=f"messages[{len(messages) - 1}]")
    if last.images and not last.content.strip():
        # As on the chat page, files come with a message: the text says what to do with them.
        raise BadRequest(
            "The last user message needs text with its images: say what to do with them.",
            param=f"messages[{len(messages) - 1}].content",
            code="invalid_content",
        )
    options = _run_options(body)
    stream_options = body.get("stream_options") or {}
    if not isinstance(stream_options, dict):
        raise BadRequest("stream_options must be an object.", param="stream_options")
    return CompletionRequest(
        model=model,
        content=last.content,
        history=tuple(history),
        images=last.images,
        stream=body.get("stream") is True,
        include_usage=stream_options.get("include_usage") is True,
        options=options,
    )


def model_list(slugs: list[str], *, created: int) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [{"id": slug, "object": "model", "created": created, "owned_by": "agentsite"} for slug in slugs],
    }


def usage_of(complete: Mapping[str, Any] | None) -> dict[str, int]:
    u = (complete or {}).get("usage") or {}
    return {
        "prompt_tokens": u.get("promptTokens", 0),
        "completion_tokens": u.get("completionTokens", 0),
        "total_tokens": u.get("totalTokens", 0),
    }


class RunOutcome:
    """Follows one run's stored events (chat.realtime.follow.Stream.frames): the answer by the one
    rule (chat.agent.answer), its thinking, and how it ended."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.answer = Answer()
        self.thinking: list[str] = []
        self.errors: list[dict[str, Any]] = []
        self.complete: dict[str, Any] | None = None

    def add(self, frame: Mapping[str, Any]) -> None:
        if frame.get("runId") != self.run_id:
            return
        self.answer.add(frame)
        kind = frame.get("type")
        if kind == "thinking":
            self.thinking.append(frame["content"])
        elif kind == "error":
            self.errors.append(dict(frame))
        elif kind == "complete":
            self.complete = dict(frame)

    @property
    def finish_reason(self) -> str:
        if any(e.get("code") == ErrorCode.MAX_ITERATIONS for e in self.errors):
            return "length"
        if (self.complete or {}).get("finishReason") == "length":
            return "length"
        return "stop"

    @property
    def retry_after(self) -> int:
        """The Retry-After of a run a budget stopped (its error's retryAfter)."""
        return int((self.errors[-1] if self.errors else {}).get("retryAfter") or 1)

    def failure(self) -> tuple[int, str, str] | None:
        """(HTTP status, code, message) of a run that did not succeed; None when it did."""
        status = (self.complete or {}).get("status")
        if status == "succeeded" or self.finish_reason == "length":
            return None
        last = self.errors[-1] if self.errors else {}
        if last.get("code") == ErrorCode.LLM_CALL_FAILED:
            return 502, "model_call_failed", last.get("message") or "The agent's model call failed."
        if last.get("code") == BUDGET_EXHAUSTED:
            return 429, "insufficient_quota", last.get("message") or "A budget is used up."
        if status == "cancelled":
            return 409, "run_cancelled", "The run was cancelled."
        return 502, "run_failed", last.get("message") or f"The run ended {status or 'without an answer'}."


def completion(outcome: RunOutcome, *, completion_id: str, model: str, created: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": outcome.answer.text}
    if outcome.thinking:
        message["reasoning_content"] = "".join(outcome.thinking)
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": outcome.finish_reason, "logprobs": None}],
        "usage": usage_of(outcome.complete),
    }


def chunk(
    *,
    completion_id: str,
    model: str,
    created: int,
    delta: dict[str, Any] | None = None,
    finish_reason: str | None = None,
    usage: dict[str, int] | None = None,
) -> bytes:
    """One `data:` line of a streamed completion; the usage chunk has no choices."""
    body: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [] if usage is not None else [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason}],
    }
    if usage is not None:
        body["usage"] = usage
    return b"data: " + orjson.dumps(body) + b"\n\n"


def error_chunk(status: int, code: str, message: str) -> bytes:
    """A failure after the stream began: OpenAI's error object as one event (the SDK raises it)."""
    kind = "insufficient_quota" if code == "insufficient_quota" else ERROR_TYPES.get(status, "api_error")
    error = {"message": message, "type": kind, "param": None, "code": code}
    return b"data: " + orjson.dumps({"error": error}) + b"\n\n"


DONE = b"data: [DONE]\n\n"


def now() -> int:
    return int(time.time())
