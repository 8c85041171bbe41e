"""Builds the agent core from Django settings: the one place where the two meet."""

from __future__ import annotations

from functools import lru_cache

import httpx2
import openai
from django.conf import settings

from chat.agent import Agent, ChatModel, ModelOptions, ToolContext
from chat.agent.demo import DEMO_BASE_URL, DemoTransport
from chat.agent.hooks import MessageTrimmingHook, ToolErrorPolicy
from chat.tools import build_registry


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
            api_key="demo", base_url=DEMO_BASE_URL, http_client=httpx2.AsyncClient(transport=transport)
        )
    return openai.AsyncOpenAI(
        api_key=settings.OPENAI_API_KEY, base_url=settings.OPENAI_BASE_URL, timeout=settings.AGENT_LLM_TIMEOUT
    )


def build_chat_model() -> ChatModel:
    return ChatModel(
        client=_client(), model=settings.AGENT_MODEL, options=model_options(), timeout=settings.AGENT_LLM_TIMEOUT
    )


def build_agent() -> Agent:
    return Agent(
        build_chat_model(),
        tools=build_registry(settings.AGENT_TOOLS),
        system_prompt=settings.AGENT_SYSTEM_PROMPT,
        max_iterations=settings.AGENT_MAX_ITERATIONS,
        max_retries=settings.AGENT_MAX_RETRIES,
        retry_interval=settings.AGENT_RETRY_INTERVAL,
        tool_timeout=settings.AGENT_TOOL_TIMEOUT,
        tool_concurrency=settings.AGENT_TOOL_CONCURRENCY,
        max_tool_calls=settings.AGENT_MAX_TOOL_CALLS or None,
        hooks=[MessageTrimmingHook(max_messages=80)],
        tool_interceptors=[ToolErrorPolicy()],
    )


def tool_context(*, conversation_id: str = "", user_id: str = "", run_id: str = "") -> ToolContext:
    workspace = settings.AGENT_WORKSPACE_ROOT / conversation_id if conversation_id else None
    return ToolContext(conversation_id=conversation_id, user_id=user_id, run_id=run_id, workspace=workspace)
