"""What a model call is asked and what it answers: the options of a request (ModelOptions), the
request itself, a tool call, token usage, and the finished turn (text, thinking, tool calls,
finish reason, usage)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class ModelOptions:
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    # Provider-specific body fields, e.g. {"enable_thinking": True} for DashScope.
    extra_body: dict[str, Any] = field(default_factory=dict)
    # "auto", "none", "required" or the name of one tool; None: not sent (the server's default, auto).
    tool_choice: str | None = None

    def to_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        for name in ("temperature", "max_tokens", "top_p"):
            value = getattr(self, name)
            if value is not None:
                kwargs[name] = value
        if self.tool_choice in TOOL_CHOICE_MODES:
            kwargs["tool_choice"] = self.tool_choice
        elif self.tool_choice:
            kwargs["tool_choice"] = {"type": "function", "function": {"name": self.tool_choice}}
        if self.extra_body:
            kwargs["extra_body"] = dict(self.extra_body)
        return kwargs

    def after_tool_round(self) -> ModelOptions:
        """The options of a model call that follows tool results: a choice that forces a tool call
        (a named tool, "required") applies to a run's first call only, or the model could never
        answer and every run would end at the iteration limit."""
        if self.tool_choice in (None, "auto", "none"):
            return self
        return replace(self, tool_choice=None)


TOOL_CHOICE_MODES = ("auto", "none", "required")


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


def with_system(
    messages: list[dict[str, Any]], system_prompt: str | None, instructions: str | None
) -> list[dict[str, Any]]:
    """A run's first messages: the agent's system prompt first (unless the input brings its own),
    then the run's own `instructions` as a system message of their own (never instead of it)."""
    history = list(messages)
    if system_prompt and not (history and history[0].get("role") == "system"):
        history.insert(0, {"role": "system", "content": system_prompt})
    if instructions:
        history.insert(
            1 if history and history[0].get("role") == "system" else 0, {"role": "system", "content": instructions}
        )
    return history
