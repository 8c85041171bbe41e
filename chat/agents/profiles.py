"""Agent profiles as runs use them: the AgentConfig a run's agent is built from (chat.runtime.build),
from an AgentProfile row or, for the `default` agent, from the environment (docs/protocol.md, "Configuration"),
and what a profile's fields may hold (the admin form and the run agree through these checks).

A profile is read from the database when a run starts, so an operator adds or changes one in the
admin and the next run uses it: no restart.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace

from django.conf import settings

from chat import mcp
from chat.agent import ModelOptions
from chat.agent.turns import TOOL_CHOICE_MODES
from chat.models import API_SOURCE, DEFAULT_AGENT_NAME, DEFAULT_AGENT_SLUG, AgentProfile
from chat.tools import BUILTIN_TOOLS
from chat.tools.skill_catalogue import discover

NO_KEY = "unset"
MCP_SEPARATOR = "__"  # MCP tools are offered as `<server>__<tool>` (chat.mcp.tools)
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What a tool name can hold plus fnmatch's own characters (as chat.checks reads AGENT_APPROVAL_TOOLS).
APPROVAL_PATTERN = re.compile(r"[A-Za-z0-9_\-*?\[\]!]+")
# The server's own secrets: a profile sends its key variable to its endpoint as a bearer token,
# so naming one of these would hand it to whoever runs that endpoint.
SERVER_SECRETS = frozenset(
    {"SECRET_KEY", "SECRET_KEY_FILE", "DATABASE_URL", "REDIS_URL", "EMAIL_HOST_PASSWORD", "METRICS_TOKEN"}
)
# The user_message's `via` of a run the Responses API started (docs/protocol.md, "Responses API").
RESPONSES_VIA = "responses"
# The user_message's `via` of a run the AG-UI door started (docs/protocol.md, "AG-UI").
AGUI_VIA = "agui"
# The user_message's `via` of a run an A2A SendMessage started (docs/protocol.md, "A2A agent").
A2A_VIA = "a2a"
# Bounds of the model options and limits (the admin form refuses values outside them).
RANGES: dict[str, tuple[float, float]] = {
    "temperature": (0.0, 2.0),
    "top_p": (0.0, 1.0),
    "max_tokens": (1, 1_000_000),
    "max_iterations": (1, 100),
    "max_retries": (0, 10),
    "retry_interval": (0.0, 300.0),
}


@dataclass(frozen=True)
class AgentConfig:
    """Everything a run's agent is built from. `mcp_tools` None offers every MCP tool (the default
    agent, as before profiles existed); `skills` None offers every skill."""

    slug: str
    name: str
    model: str
    base_url: str | None
    api_key: str | None = field(repr=False)
    system_prompt: str
    tools: tuple[str, ...]
    mcp_tools: tuple[str, ...] | None
    skills: frozenset[str] | None
    options: ModelOptions
    max_iterations: int
    max_retries: int
    retry_interval: float
    # fnmatch patterns of the tools whose calls wait for the user's approval (docs/protocol.md, "Approvals").
    approval_tools: tuple[str, ...]
    profile_id: int | None = None
    # A run nobody watches (the OpenAI-compatible endpoint's): approvals are denied at once.
    unattended: bool = False
    # Its model accepts images: attached ones are sent as image_url parts (docs/protocol.md, "Images").
    vision: bool = False
    # The tokens its model reads at most: requests are compacted to fit (docs/protocol.md, "Compaction").
    context_tokens: int = 32000
    # Its runs may summarize older turns; an OpenAI-compatible call's only trim (its client resends them).
    compacts: bool = True
    # A compaction run's: it summarizes its branch now and makes no other model call.
    compaction_run: bool = False
    # The run's own system message, after the system prompt (a Responses API request's `instructions`).
    instructions: str | None = None

    @property
    def is_demo(self) -> bool:
        return self.model == "demo"

    @property
    def sees_images(self) -> bool:
        """Attached images are shown to its model (the demo's reads their sizes)."""
        return self.vision or self.is_demo


def _float(value: str | None) -> float | None:
    return float(value) if value is not None else None


def offered(names: list[str]) -> tuple[str, ...]:
    """Built-in tool names minus those this server cannot offer (web_search without a Tavily key)."""
    return tuple(name for name in names if name != "web_search" or settings.TAVILY_API_KEY)


def default_config() -> AgentConfig:
    """The environment's configuration, exactly as the server ran before profiles existed."""
    return AgentConfig(
        slug=DEFAULT_AGENT_SLUG,
        name=DEFAULT_AGENT_NAME,
        model=settings.AGENT_MODEL or "",
        base_url=settings.OPENAI_BASE_URL,
        api_key=settings.OPENAI_API_KEY,
        system_prompt=settings.AGENT_SYSTEM_PROMPT,
        tools=offered(settings.AGENT_TOOLS),
        mcp_tools=None,
        skills=None,
        options=ModelOptions(
            temperature=_float(settings.AGENT_TEMPERATURE),
            max_tokens=int(settings.AGENT_MAX_TOKENS) if settings.AGENT_MAX_TOKENS else None,
            top_p=_float(settings.AGENT_TOP_P),
        ),
        max_iterations=settings.AGENT_MAX_ITERATIONS,
        max_retries=settings.AGENT_MAX_RETRIES,
        retry_interval=settings.AGENT_RETRY_INTERVAL,
        approval_tools=tuple(settings.AGENT_APPROVAL_TOOLS),
        vision=settings.AGENT_VISION,
        context_tokens=settings.AGENT_CONTEXT_TOKENS,
    )


def split_names(text: str) -> list[str]:
    """Names or patterns written one per line or separated by commas, in order, without repeats."""
    return list(dict.fromkeys(part for part in re.split(r"[\s,]+", text) if part))


def profile_config(profile: AgentProfile) -> AgentConfig:
    tools = [str(name) for name in profile.tools]
    # Without a key (a key variable gone from this process's environment, or none at all) the
    # endpoint gets a placeholder: local servers (Ollama, vLLM) ignore it, others answer 401, the
    # usual "rejected the API key" model error, where the SDK would refuse to build a client.
    api_key = (os.environ.get(profile.api_key_env) if profile.api_key_env else settings.OPENAI_API_KEY) or NO_KEY
    return AgentConfig(
        slug=profile.slug,
        name=profile.name,
        model=profile.model,
        base_url=profile.base_url or settings.OPENAI_BASE_URL,
        api_key=api_key,
        system_prompt=profile.system_prompt or settings.AGENT_SYSTEM_PROMPT,
        tools=offered([name for name in tools if name in BUILTIN_TOOLS]),
        mcp_tools=tuple(name for name in tools if MCP_SEPARATOR in name),
        skills=frozenset(str(name) for name in profile.skills) or None,
        options=ModelOptions(
            temperature=profile.temperature,
            max_tokens=profile.max_tokens,
            top_p=profile.top_p,
            tool_choice=profile.tool_choice or None,
        ),
        max_iterations=profile.max_iterations,
        max_retries=profile.max_retries,
        retry_interval=profile.retry_interval,
        approval_tools=tuple(split_names(profile.approval_tools)) or tuple(settings.AGENT_APPROVAL_TOOLS),
        profile_id=profile.pk,
        vision=profile.vision,
        context_tokens=profile.context_tokens or settings.AGENT_CONTEXT_TOKENS,
    )


def for_source(config: AgentConfig, *, source: str) -> AgentConfig:
    """The configuration of a run of a conversation started from `source` (Conversation.source):
    an OpenAI-compatible call's run is unattended, at its start and when another process resumes it."""
    return replace(config, unattended=True, compacts=False) if source == API_SOURCE else config


def with_request_options(config: AgentConfig, requested: ModelOptions) -> AgentConfig:
    """The configuration of a run whose request set its own options (an OpenAI-compatible call):
    its temperature replaces the agent's; its max_tokens caps each model call, under the agent's
    own cap when that is lower (an operator's limit is not lifted by a client)."""
    options = config.options
    if requested.temperature is not None:
        options = replace(options, temperature=requested.temperature)
    if requested.max_tokens is not None:
        cap = requested.max_tokens if options.max_tokens is None else min(options.max_tokens, requested.max_tokens)
        options = replace(options, max_tokens=cap)
    return replace(config, options=options)


def config_for(profile: AgentProfile | None) -> AgentConfig:
    return profile_config(profile) if profile is not None else default_config()


def start_config(
    profile: AgentProfile | None,
    *,
    source: str,
    options: ModelOptions | None,
    via: str | None = None,
    instructions: str | None = None,
) -> AgentConfig:
    """The configuration of a run as it starts: its profile's (the environment's for None), for its
    conversation's source, with its request's options when it set any. A run the Responses API
    started is unattended whatever conversation it continues, with its request's instructions; one
    the AG-UI door started is attended whatever conversation it continues, with its context; one
    A2A started is attended whatever conversation it continues."""
    config = for_source(config_for(profile), source=source)
    if via == RESPONSES_VIA:
        # Its client sends the conversation once (previous_response_id), not with every call: it compacts.
        config = replace(config, unattended=True, compacts=True, instructions=instructions)
    elif via == AGUI_VIA:
        # A person watches an AG-UI run (approvals become interrupts), whatever conversation it
        # continues; the thread is kept on the server: it compacts. Its instructions: the request's context.
        config = replace(config, unattended=False, compacts=True, instructions=instructions)
    elif via == A2A_VIA:
        # Its client answers approvals (input-required), even on a conversation /v1 made.
        config = replace(config, unattended=False)
    return with_request_options(config, options) if options is not None else config


def door_instructions(request: dict | None) -> str | None:
    """The run's own system message from what its door was asked (the user_message's `request`):
    a Responses API request's `instructions`, or an AG-UI request's `context` ("<description>:
    <value>" per line); None when neither."""
    asked = request or {}
    if asked.get("instructions") is not None:
        return asked["instructions"]
    context = asked.get("context") or []
    return "\n".join(f"{item['description']}: {item['value']}" for item in context) or None


# -- what a profile's fields may hold -------------------------------------------------------
def tool_problem(name: str) -> str | None:
    if name in BUILTIN_TOOLS:
        return None
    server, separator, tool = name.partition(MCP_SEPARATOR)
    if not separator:
        return f"{name!r} is not a built-in tool (known: {', '.join(sorted(BUILTIN_TOOLS))})"
    servers = {s.name for s in mcp.configured(settings.AGENT_MCP_CONFIG)} if settings.AGENT_MCP_CONFIG else set()
    if server not in servers:
        known = ", ".join(sorted(servers)) or "none configured in AGENT_MCP_CONFIG"
        return f"{name!r} names no configured MCP server {server!r} (servers: {known})"
    if not tool:
        return f"{name!r} names no tool: write {server}__<tool> or {server}__*"
    return None


def skill_problem(name: str) -> str | None:
    skills, _problems = discover(settings.AGENT_SKILLS_DIR)
    if name in skills:
        return None
    return f"{name!r} is not a skill of AGENT_SKILLS_DIR (known: {', '.join(sorted(skills)) or 'none'})"


def key_variable_problem(name: str) -> str | None:
    if not ENV_NAME.fullmatch(name):
        return f"{name!r} is not an environment variable name"
    if name in SERVER_SECRETS:
        return f"{name} is one of the server's own secrets, not a model API key"
    if not os.environ.get(name):
        return f"{name} is not set in the server's environment"
    return None


def approval_pattern_problem(pattern: str) -> str | None:
    if APPROVAL_PATTERN.fullmatch(pattern):
        return None
    return f"{pattern!r} can match no tool name, so no call would wait for it"


def tool_choice_problem(choice: str, tools: list[str]) -> str | None:
    if choice in TOOL_CHOICE_MODES or choice in tools:
        return None
    return f"{choice!r} is neither {', '.join(TOOL_CHOICE_MODES)} nor one of this agent's tools"


def range_problem(name: str, value: float | None) -> str | None:
    low, high = RANGES[name]
    if value is None or low <= value <= high:
        return None
    return f"must be between {low:g} and {high:g}"
