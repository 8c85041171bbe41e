"""Fixtures of the agent-core tests: the real openai SDK over real HTTP to the fake server."""

from __future__ import annotations

import openai
import pytest

from chat.agent import Agent, ChatModel, ToolRegistry

from .helpers import sample_tools


@pytest.fixture
async def client(fake_llm):
    client = openai.AsyncOpenAI(base_url=fake_llm.base_url, api_key="x")
    yield client
    await client.close()


@pytest.fixture
def chat_model(client):
    return ChatModel(client=client, model="fake-model")


@pytest.fixture
def make_agent(chat_model):
    """Agent(ChatModel(...)) with no wait between retries and the sample tools unless given."""

    def make(tools: ToolRegistry | None = None, **options) -> Agent:
        options.setdefault("retry_interval", 0)
        return Agent(chat_model, tools=sample_tools() if tools is None else tools, **options)

    return make
