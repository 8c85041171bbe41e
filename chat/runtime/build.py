"""Builds the agent core from Django settings: the one place where the two meet."""

from __future__ import annotations

import asyncio
from fnmatch import fnmatchcase
from functools import cache
from pathlib import Path

import httpx2
import openai
from django.conf import settings

from chat import mcp
from chat.agent import Agent, ChatModel, ModelCallObserver, SteeringSource, ToolContext
from chat.agent.approval import Answers, ApprovalPolicy, Unattended
from chat.agent.compaction import Compactor, Layout, Policy
from chat.agent.demo import DEMO_BASE_URL, DemoTransport
from chat.agent.hooks import ToolErrorPolicy
from chat.agent.tools import Tool
from chat.agents import profiles
from chat.agents.profiles import AgentConfig
from chat.agents.tool_limits import rate_limit
from chat.conversations.workspaces import locked_write
from chat.mcp.tools import UnstartedServers
from chat.runtime.budget_check import BudgetCheck
from chat.runtime.delegates import Delegation
from chat.runtime.image_parts import ImageParts
from chat.tools import build_registry
from chat.tools.config import FetchSettings, FilesSettings, SearchSettings, SkillsSettings, ToolSettings
from chat.tools.sandbox import Limits
from chat.tools.skill_catalogue import discover_recent, skills_prompt


@cache  # as many as there are endpoints in the environment and the profiles
def _client(base_url: str | None, api_key: str | None, demo: bool) -> openai.AsyncOpenAI:
    # One client per endpoint and key per process (not per run): its connection pool is shared
    # by every run that talks to that endpoint.
    if demo:
        transport = DemoTransport(chunk_delay=settings.AGENT_DEMO_CHUNK_DELAY)
        client = openai.AsyncOpenAI(
            api_key="demo", base_url=DEMO_BASE_URL, max_retries=0, http_client=httpx2.AsyncClient(transport=transport)
        )
    else:
        # No per-read timeout: ChatModel bounds the whole call by AGENT_LLM_TIMEOUT, and a read
        # timeout makes aiohttp re-arm a timer on every chunk it receives (3% of the CPU at C=200).
        timeout = httpx2.Timeout(settings.AGENT_LLM_TIMEOUT, read=None)
        client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            max_retries=0,  # every retry is the agent's, and visible
            # The SDK's aiohttp transport (its `openai[aiohttp]` extra): aiohttp parses HTTP in C and
            # hands over all the bytes a read brought, where httpcore2 + h11 step through Python
            # layers per chunk. At 200 concurrent streams: server CPU -6%, stretch 1.64-2.05 -> 1.57-1.63.
            http_client=openai.DefaultAioHttpClient(timeout=timeout),
        )
    _made.append(client)
    return client


_made: list[openai.AsyncOpenAI] = []


def client_for(config: AgentConfig) -> openai.AsyncOpenAI:
    if config.is_demo:
        return _client(None, None, True)
    return _client(config.base_url, config.api_key, False)


async def close_client() -> None:
    """Close the model clients' connections, those made so far (tests: they belong to one event loop)."""
    clients = list(_made)
    _made.clear()
    _client.cache_clear()
    for client in clients:
        await client.close()


def build_chat_model(config: AgentConfig | None = None, *, hold: asyncio.Event | None = None) -> ChatModel:
    config = config or profiles.default_config()
    return ChatModel(
        client=client_for(config),
        model=config.model,
        options=config.options,
        timeout=settings.AGENT_LLM_TIMEOUT,
        hold=hold,
    )


def offered_tools() -> list[str]:
    """AGENT_TOOLS minus the tools this server cannot offer (web_search without a Tavily key)."""
    return list(profiles.offered(settings.AGENT_TOOLS))


def tool_timeouts() -> dict[str, float]:
    # A tool's own limit fires first and says more than the loop's generic timeout.
    return {
        "bash": settings.AGENT_BASH_TIMEOUT + 5,
        "fetch_url": settings.AGENT_FETCH_TIMEOUT + 5,
        **settings.AGENT_TOOL_TIMEOUTS,
    }


def system_prompt(tool_names: list[str], *, base: str | None = None, skills: frozenset[str] | None = None) -> str:
    prompt = settings.AGENT_SYSTEM_PROMPT if base is None else base
    if "load_skill" in tool_names:
        found, _problems = discover_recent(settings.AGENT_SKILLS_DIR)  # bad skills: a system check says
        listing = skills_prompt({name: skill for name, skill in found.items() if skills is None or name in skills})
        if listing:
            prompt = f"{prompt}\n\n{listing}" if prompt else listing
    return prompt


async def mcp_tools() -> list[Tool]:
    return await mcp.available_tools(settings.AGENT_MCP_CONFIG, timeout=settings.AGENT_MCP_TIMEOUT)


def mcp_source(patterns: tuple[str, ...]):
    """The MCP tools a profile enables: those whose `<server>__<tool>` name matches one of its patterns."""

    async def source() -> list[Tool]:
        return [tool for tool in await mcp_tools() if any(fnmatchcase(tool.name, p) for p in patterns)]

    return source


def approval_policy(config: AgentConfig, answers: Answers | None) -> ApprovalPolicy | None:
    """The run's approvals: the profile's patterns (AGENT_APPROVAL_TOOLS for the default agent
    and for a profile that names none)."""
    patterns = config.approval_tools
    if config.unattended and patterns:
        answers = Unattended(config.unattended_reason)
    if answers is None or not patterns:
        return None
    return ApprovalPolicy(patterns=patterns, timeout=settings.AGENT_APPROVAL_TIMEOUT, answers=answers)


def build_agent(
    *,
    config: AgentConfig | None = None,
    observers: list[ModelCallObserver] | None = None,
    answers: Answers | None = None,
    hold: asyncio.Event | None = None,
    steering: SteeringSource | None = None,
    compactor: Compactor | None = None,
    delegation: Delegation | None = None,
    budget: BudgetCheck | None = None,
) -> Agent:
    """The agent of one run, from its profile's config (the environment's when None); `observers`
    are told of each model call attempt (chat.agent.trace); `answers` deliver the user's approvals
    (chat.runtime.approvals). Without them (the `ask` command, where the operator runs their own
    question) no call waits. `hold`: the model's answers are read once it is set (ChatModel).
    `steering`: where the run finds the steers sent to it (chat.runtime.steering); `compactor`:
    what keeps its requests within its context (compactor()); `delegation`: its delegate tools
    (chat.runtime.delegates); `budget`: the check before each model call attempt that may stop
    the run (chat.runtime.budget_check)."""
    config = config or profiles.default_config()
    names = list(config.tools)
    sources = []
    if settings.AGENT_MCP_CONFIG and config.mcp_tools is None:
        sources = [mcp_tools]
    elif settings.AGENT_MCP_CONFIG and config.mcp_tools:
        sources = [mcp_source(config.mcp_tools)]
    return Agent(
        build_chat_model(config, hold=hold),
        tools=build_registry(names, timeouts=tool_timeouts()),
        tool_sources=[*sources, *([delegation.source] if delegation is not None else [])],
        system_prompt=system_prompt(names, base=config.system_prompt, skills=config.skills),
        instructions=config.instructions,
        max_iterations=config.max_iterations,
        max_retries=config.max_retries,
        retry_interval=config.retry_interval,
        max_retry_after=settings.AGENT_RETRY_AFTER_MAX,
        tool_timeout=settings.AGENT_TOOL_TIMEOUT,
        tool_concurrency=settings.AGENT_TOOL_CONCURRENCY,
        max_tool_calls=settings.AGENT_MAX_TOOL_CALLS or None,
        # ImageParts after the compaction: only the kept messages' images are built. The demo model
        # always accepts them (it answers with their size), so the offline demo shows the feature.
        hooks=[*([budget] if budget else []), ImageParts(vision=config.sees_images)],
        model_interceptors=[budget] if budget else [],
        tool_interceptors=[
            # First: a delegate call is bounded by its child run's limits, and its error is the child's.
            *([delegation] if delegation is not None else []),
            rate_limit(settings.AGENT_TOOL_RATE_LIMIT),
            ToolErrorPolicy(),
            *([UnstartedServers(lambda: mcp.get_servers().connections.values())] if sources else []),
        ],
        observers=observers or [],
        trace_requests=settings.AGENT_TRACE_REQUESTS,
        approval=approval_policy(config, answers),
        steering=steering,
        compactor=compactor,
    )


def compactor(config: AgentConfig, layout: Layout) -> Compactor:
    """The compactor of a run of `config`'s agent starting from a memory laid out as `layout`
    (docs/protocol.md, "Compaction"); an OpenAI-compatible call's run trims only, its client
    sending the whole history again with every call."""
    policy = Policy(
        context_tokens=config.context_tokens,
        compact_at=settings.AGENT_COMPACT_AT,
        keep_turns=settings.AGENT_COMPACT_KEEP_TURNS,
        max_messages=settings.AGENT_COMPACT_MAX_MESSAGES,
        prompt=settings.AGENT_COMPACT_PROMPT,
        may_compact=config.compacts,
        manual=config.compaction_run,
    )
    return Compactor(policy, layout)


def tool_settings(*, skills: frozenset[str] | None = None) -> ToolSettings:
    """The AGENT_* settings the built-in tools read, typed (chat/tools/* stay free of Django);
    `skills`: the only skills a profile enables (None: every one)."""
    return ToolSettings(
        files=FilesSettings(
            read_chunk=settings.AGENT_FILE_READ_CHUNK,
            max_file_bytes=settings.AGENT_FILE_MAX_BYTES,
            workspace_max_bytes=settings.AGENT_WORKSPACE_MAX_BYTES,
            exclusive=locked_write,
        ),
        fetch=FetchSettings(
            allowed_hosts=tuple(settings.AGENT_FETCH_ALLOWED_HOSTS),
            max_bytes=settings.AGENT_FETCH_MAX_BYTES,
            max_redirects=settings.AGENT_FETCH_MAX_REDIRECTS,
            timeout=settings.AGENT_FETCH_TIMEOUT,
        ),
        search=SearchSettings(api_key=settings.TAVILY_API_KEY, max_results=settings.AGENT_SEARCH_MAX_RESULTS),
        skills=SkillsSettings(skills_dir=settings.AGENT_SKILLS_DIR, only=skills),
        bash=Limits(
            timeout=settings.AGENT_BASH_TIMEOUT,
            cpu_seconds=settings.AGENT_BASH_CPU_SECONDS,
            memory_mb=settings.AGENT_BASH_MEMORY_MB,
            file_size_mb=settings.AGENT_BASH_FILE_SIZE_MB,
            max_processes=settings.AGENT_BASH_MAX_PROCESSES,
            max_output_chars=settings.AGENT_BASH_MAX_OUTPUT,
            sandbox_uid=settings.AGENT_BASH_UID,
            tmp_mb=settings.AGENT_BASH_TMP_MB,
            workspace_max_bytes=settings.AGENT_WORKSPACE_MAX_BYTES,
        ),
    )


def tool_context(
    *, conversation_id: str = "", user_id: str = "", run_id: str = "", config: AgentConfig | None = None
) -> ToolContext:
    workspace = Path(settings.AGENT_WORKSPACE_ROOT) / str(conversation_id) if conversation_id else None
    skills = config.skills if config is not None else None
    return ToolContext(
        conversation_id=conversation_id,
        user_id=user_id,
        run_id=run_id,
        workspace=workspace,
        settings=tool_settings(skills=skills),
    )
