"""The A2A agent on two daphne processes sharing one PostgreSQL database and one Redis
(docs/protocol.md, "A2A agent"): a task started through one is read, followed, answered and
cancelled through the other, with the official a2a-sdk client."""

from __future__ import annotations

import asyncio

import pytest
from a2a.types.a2a_pb2 import CancelTaskRequest, GetTaskRequest, SubscribeToTaskRequest, TaskState

from chat.agent.answer import Answer
from tests.fakellm import text_reply, tool_call_reply

from .a2a_client import Agent, answer_of, streamed_answer, token_of
from .conftest import ON_POSTGRES, REDIS_URL
from .harness import Client, answer_text, slow_text_reply

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.skipif(not (ON_POSTGRES and REDIS_URL), reason="needs DATABASE_URL=postgres://... and REDIS_URL"),
]


@pytest.fixture(scope="module")
def servers(databases, make_server):
    database = databases.new()
    extra = {"AGENT_MESSAGES_PER_MINUTE": "1000", "AGENT_APPROVAL_TOOLS": "calc*"}
    return make_server(database, name="A", **extra), make_server(database, name="B", **extra)


@pytest.fixture
async def clients(servers):
    server_a, server_b = servers
    alice = await Client(server_a).signup()
    token = await token_of(alice)
    on_a = await Agent.of(server_a.base, token)
    on_b = await Agent.of(server_b.base, token, streaming=True)
    yield alice, on_a, on_b
    for client in (on_a, on_b):
        await client.aclose()
    await alice.aclose()
    logs = server_a.log() + server_b.log()
    assert "Traceback" not in logs, logs[-3000:]


async def stored_answer(alice: Client, task) -> tuple[list[dict], str]:
    events = [e for e in await alice.events(task.context_id) if e.get("runId") == task.id]
    answer = Answer()
    for event in events:
        answer.add(event)
    return events, answer.text


async def test_a_task_started_on_one_process_is_followed_and_read_on_the_other(clients, replies):
    alice, on_a, on_b = clients
    text = answer_text(60, "mp")
    replies.set("a2a two processes", slow_text_reply(text, chunks=60, delay=0.05))
    [response] = await on_a.send("a2a two processes", return_immediately=True)
    task = response.task
    await asyncio.sleep(1.0)
    events = [e async for e in on_b.client.subscribe(SubscribeToTaskRequest(id=task.id))]
    snapshot = events[0].task
    assert 0 < len(answer_of(snapshot)) < len(text)
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert streamed_answer(events[1:], start=answer_of(snapshot)) == text
    _, answer = await stored_answer(alice, task)
    read = await on_b.client.get_task(GetTaskRequest(id=task.id))
    assert answer == answer_of(read) == text


async def test_a_task_running_on_one_process_is_cancelled_through_the_other(clients, replies):
    alice, on_a, on_b = clients
    replies.set("a2a cancel across", slow_text_reply(answer_text(200, "x"), chunks=200, delay=0.05))
    [response] = await on_a.send("a2a cancel across", return_immediately=True)
    await asyncio.sleep(0.5)
    cancelled = await on_b.client.cancel_task(CancelTaskRequest(id=response.task.id))
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    events, answer = await stored_answer(alice, response.task)
    assert events[-1]["type"] == "complete" and events[-1]["status"] == "cancelled"
    assert answer_of(cancelled) == answer


async def test_an_approval_asked_on_one_process_is_answered_through_the_other(clients, replies):
    alice, on_a, on_b = clients
    replies.set("a2a gated across", tool_call_reply(("calculator", {"expression": "2+3"})), text_reply("Five."))
    [response] = await on_a.send("a2a gated across")
    task = response.task
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    events = await on_b.send("approve", task_id=task.id)
    assert events[0].task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED  # the task as it was
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert streamed_answer(events) == "Five."
    stored, answer = await stored_answer(alice, task)
    assert answer == "Five." and [e["type"] for e in stored].count("user_message") == 1
