"""Per-user tool rate limit, per-tool timeouts and the registry built from settings."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from chat.agent.hooks import ToolCallRequest, ToolOutcome
from chat.agent.tools import ToolContext
from chat.agent.turns import ToolCall
from chat.agents.tool_limits import ToolRateLimit
from chat.tools import build_registry

pytestmark = pytest.mark.django_db(transaction=True)


def _request(user_id: str) -> ToolCallRequest:
    return ToolCallRequest(ToolCall("call_1", "calculator", "{}"), ToolContext(user_id=user_id))


def _records(user, count: int) -> None:
    from chat.conversations.services import conversation_create
    from chat.models import Run, ToolRecord

    conversation = conversation_create(owner=user, title="t")
    run = Run.objects.create(conversation=conversation, user=user, status="succeeded")
    ToolRecord.objects.bulk_create(
        ToolRecord(run=run, tool_call_id=f"c{i}", tool_name="calculator") for i in range(count)
    )


async def test_rate_limit_counts_stored_and_running_calls():
    users = get_user_model().objects
    alice = await users.acreate(username="alice")
    bob = await users.acreate(username="bob")
    await sync_to_async(_records)(alice, 2)
    limit = ToolRateLimit(per_minute=3)
    release = asyncio.Event()
    calls = 0

    async def slow(request):
        nonlocal calls
        calls += 1
        await release.wait()
        return ToolOutcome("ok")

    first = asyncio.create_task(limit.intercept_tool(_request(str(alice.pk)), slow))
    await asyncio.sleep(0.1)
    refused = await limit.intercept_tool(_request(str(alice.pk)), slow)  # 2 stored + 1 running = 3
    assert refused.is_error and "at most 3 tool calls per minute" in refused.result
    release.set()
    assert (await first).result == "ok"
    assert (await limit.intercept_tool(_request(str(bob.pk)), slow)).result == "ok"  # per user
    assert calls == 2
    assert (await ToolRateLimit(0).intercept_tool(_request(str(alice.pk)), slow)).result == "ok"  # 0: off


def test_registry_timeouts_and_companions():
    registry = build_registry(["load_skill", "bash", "nope"], timeouts={"bash": 7})
    assert registry.names() == ["load_skill", "read_skill_file", "bash"]
    assert registry.get("bash").timeout == 7 and registry.get("load_skill").timeout is None


def test_build_agent_wires_limits(settings):
    from chat.agents.tool_limits import ToolRateLimit
    from chat.runtime.build import build_agent, tool_context

    settings.AGENT_TOOLS = ["calculator", "bash", "fetch_url"]
    settings.AGENT_TOOL_TIMEOUTS = {"fetch_url": 3.0}
    settings.AGENT_BASH_TIMEOUT = 10
    agent = build_agent()
    assert agent.tools.get("bash").timeout == 15 and agent.tools.get("fetch_url").timeout == 3
    assert isinstance(agent.tool_interceptors[0], ToolRateLimit)
    context = tool_context(conversation_id="abc", user_id="1")
    assert context.workspace == settings.AGENT_WORKSPACE_ROOT / "abc"
    assert context.settings.bash.timeout == 10 and context.settings.files.read_chunk == settings.AGENT_FILE_READ_CHUNK
