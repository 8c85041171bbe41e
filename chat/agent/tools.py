"""Tool registry: a tool is an async function whose type hints give its JSON schema.

pydantic builds the schema from the signature and validates the model's arguments
against it, so a tool author writes an ordinary typed function:

    @registry.tool
    async def calculator(expression: str) -> str:
        "Evaluate an arithmetic expression."

A parameter annotated `ToolContext` is filled by the agent (workspace, ids, emit)
and never shown to the model.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

import pydantic

from .events import AgentEvent


class ToolError(Exception):
    """A failure the model should read: its message goes back as `{"error": message}`."""


@dataclass
class ToolContext:
    """What a tool may know about the run it serves."""

    conversation_id: str = ""
    user_id: str = ""
    run_id: str = ""
    workspace: Path | None = None
    # Emits an extra event into the run's stream (a search tool's `reference`).
    emit: Callable[[AgentEvent], Awaitable[None]] | None = None
    # The host's typed settings for its tools (limits, keys, directories): for the built-in tools a
    # chat.tools.config.ToolSettings, whose defaults apply when this is None.
    settings: Any = None


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    fn: Callable[..., Awaitable[Any]]
    arguments_model: type[pydantic.BaseModel]
    context_param: str | None
    timeout: float | None

    def spec(self) -> dict[str, Any]:
        """The OpenAI tool definition (computed once: building a JSON schema is slow). Read-only."""
        return self._spec

    @functools.cached_property
    def _spec(self) -> dict[str, Any]:
        schema = self.arguments_model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": schema},
        }

    def parse_arguments(self, raw: str) -> dict[str, Any]:
        """Model JSON -> keyword arguments, or ToolError saying what is wrong."""
        data = json_object(raw)
        try:
            parsed = self.arguments_model.model_validate(data)
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}" for err in exc.errors()
            )
            raise ToolError(f"invalid arguments for {self.name}: {problems}") from None
        return {name: getattr(parsed, name) for name in type(parsed).model_fields}

    async def run(self, raw_arguments: str, context: ToolContext) -> Any:
        kwargs = self.parse_arguments(raw_arguments)
        if self.context_param:
            kwargs[self.context_param] = context
        return await self.fn(**kwargs)


@dataclass(frozen=True)
class SchemaTool(Tool):
    """A tool described by a JSON schema written elsewhere (an MCP server's). Its function takes
    `arguments` (the model's JSON object, checked only for being an object: the far side validates
    it against its own schema) and `context`."""

    parameters: dict[str, Any] = field(default_factory=dict)

    @functools.cached_property
    def _spec(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def parse_arguments(self, raw: str) -> dict[str, Any]:
        return {"arguments": json_object(raw)}


def json_object(raw: str) -> dict[str, Any]:
    """A tool call's arguments as the model wrote them: a JSON object (empty text: no arguments),
    or ToolError saying what is wrong, for the model to read and correct."""
    try:
        data = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        raise ToolError(f"arguments are not valid JSON: {exc.msg} at position {exc.pos}") from None
    except RecursionError:
        raise ToolError("arguments are nested too deep") from None
    if not isinstance(data, dict):
        raise ToolError("arguments must be a JSON object")
    return data


def schema_tool(
    name: str,
    description: str,
    parameters: dict[str, Any],
    fn: Callable[[dict[str, Any], ToolContext], Awaitable[Any]],
    *,
    timeout: float | None = None,
) -> SchemaTool:
    """A tool from a name, a description, a JSON schema and `async fn(arguments, context)`."""
    # No arguments model: parse_arguments above takes its place.
    return SchemaTool(name, description, fn, pydantic.BaseModel, "context", timeout, parameters=parameters)


# Tools known only when a run starts (an MCP server's current listing): the agent awaits each
# source then and offers its tools next to the registry's.
ToolSource = Callable[[], Awaitable[Iterable[Tool]]]


def _description(fn: Callable[..., Any]) -> str:
    return inspect.cleandoc(fn.__doc__ or "").strip() or fn.__name__.replace("_", " ")


def make_tool(
    fn: Callable[..., Awaitable[Any]],
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
) -> Tool:
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(f"tool {fn.__name__} must be an async function")
    hints = get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    context_param = None
    for param in inspect.signature(fn).parameters.values():
        annotation = hints.get(param.name, Any)
        if annotation is ToolContext:
            context_param = param.name
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {fn.__name__}: *args and **kwargs cannot be described to a model")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, default)
    tool_name = name or fn.__name__
    model = pydantic.create_model(f"{tool_name}_arguments", __config__=pydantic.ConfigDict(extra="forbid"), **fields)
    return Tool(tool_name, description or _description(fn), fn, model, context_param, timeout)


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = ()):
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> Tool:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        self._tools[tool.name] = tool
        return tool

    def tool(self, fn: Callable[..., Awaitable[Any]] | None = None, **options: Any):
        """Decorator: `@registry.tool` or `@registry.tool(name=..., timeout=...)`."""

        def register(func: Callable[..., Awaitable[Any]]):
            self.add(make_tool(func, **options))
            return func

        return register(fn) if fn is not None else register

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> list[dict[str, Any]]:
        return [tool.spec() for tool in self._tools.values()]

    def subset(self, names: Iterable[str]) -> ToolRegistry:
        return ToolRegistry(self._tools[name] for name in names if name in self._tools)

    def extended(self, tools: Iterable[Tool]) -> ToolRegistry:
        """A copy with more tools; a name this registry already has keeps its own tool."""
        return ToolRegistry([*self._tools.values(), *(tool for tool in tools if tool.name not in self._tools)])

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)


@dataclass(frozen=True)
class ToolRecord:
    """One executed tool call, as the loop returns it and the server stores it."""

    tool_call_id: str
    tool_name: str
    arguments: str
    result: str
    is_error: bool
    started_at: float  # epoch seconds
    duration_ms: int


def result_to_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump_json()
    return json.dumps(value, ensure_ascii=False, default=str)


def error_result(message: str) -> str:
    return json.dumps({"error": message}, ensure_ascii=False)
