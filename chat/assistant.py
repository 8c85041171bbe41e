"""Builds the agent core from Django settings: the one place where the two meet."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import httpx2
import openai
from django.conf import settings

from chat import mcp
from chat.agent import Agent, ChatModel, ModelCallObserver, ModelOptions, ToolContext
from chat.agent.demo import DEMO_BASE_URL, DemoTransport
from chat.agent.hooks import MessageTrimmingHook, ToolErrorPolicy
from chat.agent.tools import Tool
from chat.skills import discover_recent, skills_prompt
from chat.tool_limits import rate_limit
from chat.tools import build_registry
from chat.tools.config import FetchSettings, FilesSettings, SearchSettings, SkillsSettings, ToolSettings
from chat.tools.sandbox import Limits


def is_demo() -> bool:
    return settings.AGENT_MODEL == "demo"


def _float(value: str | None) -> float | None:
    return float(value) if value is not None else None


def model_options() -> ModelOptions:
    return ModelOptions(
        temperature=_float(settings.AGENT_TEMPERATURE),
        max_tokens=int(settings.AGENT_MAX_TOKENS) if settings.AGENT_MAX_TOKENS else None,
        top_p=_float(settings.AGENT_TOP_P),
    )


@lru_cache(maxsize=1)
def _client() -> openai.AsyncOpenAI:
    # One client per process: its connection pool is shared by every run.
    if is_demo():
        transport = DemoTransport(chunk_delay=settings.AGENT_DEMO_CHUNK_DELAY)
        return openai.AsyncOpenAI(
            api_key="demo", base_url=DEMO_BASE_URL, max_retries=0, http_client=httpx2.AsyncClient(transport=transport)
        )
    # No per-read timeout: ChatModel bounds the whole call by AGENT_LLM_TIMEOUT, and a read
    # timeout makes aiohttp re-arm a timer on every chunk it receives (3% of the CPU at C=200).
    timeout = httpx2.Timeout(settings.AGENT_LLM_TIMEOUT, read=None)
    return openai.AsyncOpenAI(
        api_key=settings.OPENAI_API_KEY,
        base_url=settings.OPENAI_BASE_URL,
        timeout=timeout,
        max_retries=0,  # every retry is the agent's, and visible
        # The SDK's aiohttp transport (its `openai[aiohttp]` extra): aiohttp parses HTTP in C and
        # hands over all the bytes a read brought, where httpcore2 + h11 step through Python
        # layers per chunk. At 200 concurrent streams: server CPU -6%, stretch 1.64-2.05 -> 1.57-1.63.
        http_client=openai.DefaultAioHttpClient(timeout=timeout),
    )


async def close_client() -> None:
    """Close the model client's connections, if it was made (tests: they belong to one event loop)."""
    if _client.cache_info().currsize:
        await _client().close()
        _client.cache_clear()


def build_chat_model() -> ChatModel:
    return ChatModel(
        client=_client(), model=settings.AGENT_MODEL, options=model_options(), timeout=settings.AGENT_LLM_TIMEOUT
    )


def offered_tools() -> list[str]:
    """AGENT_TOOLS minus the tools this server cannot offer (web_search without a Tavily key)."""
    return [name for name in settings.AGENT_TOOLS if name != "web_search" or settings.TAVILY_API_KEY]


def tool_timeouts() -> dict[str, float]:
    # A tool's own limit fires first and says more than the loop's generic timeout.
    return {
        "bash": settings.AGENT_BASH_TIMEOUT + 5,
        "fetch_url": settings.AGENT_FETCH_TIMEOUT + 5,
        **settings.AGENT_TOOL_TIMEOUTS,
    }


def system_prompt(tool_names: list[str]) -> str:
    prompt = settings.AGENT_SYSTEM_PROMPT
    if "load_skill" in tool_names:
        skills, _problems = discover_recent(settings.AGENT_SKILLS_DIR)  # bad skills: a system check says
        listing = skills_prompt(skills)
        if listing:
            prompt = f"{prompt}\n\n{listing}" if prompt else listing
    return prompt


async def mcp_tools() -> list[Tool]:
    return await mcp.available_tools(settings.AGENT_MCP_CONFIG, timeout=settings.AGENT_MCP_TIMEOUT)


def build_agent(*, observers: list[ModelCallObserver] | None = None) -> Agent:
    """The agent of one run; `observers` are told of each model call attempt (chat.agent.trace)."""
    names = offered_tools()
    return Agent(
        build_chat_model(),
        tools=build_registry(names, timeouts=tool_timeouts()),
        tool_sources=[mcp_tools] if settings.AGENT_MCP_CONFIG else [],
        system_prompt=system_prompt(names),
        max_iterations=settings.AGENT_MAX_ITERATIONS,
        max_retries=settings.AGENT_MAX_RETRIES,
        retry_interval=settings.AGENT_RETRY_INTERVAL,
        max_retry_after=settings.AGENT_RETRY_AFTER_MAX,
        tool_timeout=settings.AGENT_TOOL_TIMEOUT,
        tool_concurrency=settings.AGENT_TOOL_CONCURRENCY,
        max_tool_calls=settings.AGENT_MAX_TOOL_CALLS or None,
        hooks=[MessageTrimmingHook(max_messages=80)],
        tool_interceptors=[rate_limit(settings.AGENT_TOOL_RATE_LIMIT), ToolErrorPolicy()],
        observers=observers or [],
        trace_requests=settings.AGENT_TRACE_REQUESTS,
    )


def tool_settings() -> ToolSettings:
    """The AGENT_* settings the built-in tools read, typed (chat/tools/* stay free of Django)."""
    return ToolSettings(
        files=FilesSettings(
            read_chunk=settings.AGENT_FILE_READ_CHUNK,
            max_file_bytes=settings.AGENT_FILE_MAX_BYTES,
            workspace_max_bytes=settings.AGENT_WORKSPACE_MAX_BYTES,
        ),
        fetch=FetchSettings(
            allowed_hosts=tuple(settings.AGENT_FETCH_ALLOWED_HOSTS),
            max_bytes=settings.AGENT_FETCH_MAX_BYTES,
            max_redirects=settings.AGENT_FETCH_MAX_REDIRECTS,
            timeout=settings.AGENT_FETCH_TIMEOUT,
        ),
        search=SearchSettings(api_key=settings.TAVILY_API_KEY, max_results=settings.AGENT_SEARCH_MAX_RESULTS),
        skills=SkillsSettings(skills_dir=settings.AGENT_SKILLS_DIR),
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


def tool_context(*, conversation_id: str = "", user_id: str = "", run_id: str = "") -> ToolContext:
    workspace = Path(settings.AGENT_WORKSPACE_ROOT) / str(conversation_id) if conversation_id else None
    return ToolContext(
        conversation_id=conversation_id, user_id=user_id, run_id=run_id, workspace=workspace, settings=tool_settings()
    )
