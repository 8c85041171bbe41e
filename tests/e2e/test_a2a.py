"""The A2A agent with the official a2a-sdk client over real HTTP against a real daphne
(docs/protocol.md, "A2A agent"): the cards, send, stream, get, list, cancel, resubscribe, an
approval as input-required, the errors; every answer compared with the stored run."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a.client.errors import AgentCardResolutionError
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    ListTasksRequest,
    Part,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.proto_utils import validate_proto_required_fields
from google.protobuf.struct_pb2 import Value

from chat.agent.answer import Answer
from tests.fakellm import text_reply, tool_call_reply

from .a2a_client import Agent, answer_of, streamed_answer, token_of
from .harness import Client, answer_text, shell, slow_text_reply

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def a2a_server(databases, make_server):
    server = make_server(
        databases.new(),
        name="a2a",
        AGENT_MESSAGES_PER_MINUTE="1000",
        AGENT_APPROVAL_TOOLS="calc*",
        AGENT_SITE_NAME="Test site",
    )
    shell(
        server,
        "from chat.models import AgentProfile\n"
        "AgentProfile.objects.create(slug='helper', name='Helper', description='Helps.', model='helper-1', everyone=True)\n"
        "AgentProfile.objects.create(slug='secret', name='Secret', model='secret-1')\n"
        "print('ok')",
    )
    yield server
    assert "Traceback" not in server.log(tail=None), server.log()


@pytest.fixture
async def alice(a2a_server):
    user = await Client(a2a_server).signup()
    user.token = await token_of(user)
    yield user
    await user.aclose()


@pytest.fixture
async def bob(a2a_server):
    user = await Client(a2a_server).signup()
    user.token = await token_of(user)
    yield user
    await user.aclose()


def grant(server, username: str, slug: str = "secret") -> None:
    shell(
        server,
        "from chat.models import AgentProfile\nfrom django.contrib.auth.models import User\n"
        f"AgentProfile.objects.get(slug='{slug}').users.add(User.objects.get(username='{username}'))\nprint('ok')",
    )


async def stored(user: Client, task) -> tuple[list[dict], str]:
    """The run's stored events and its answer, as the log has them."""
    events = [e for e in await user.events(task.context_id) if e.get("runId") == task.id]
    answer = Answer()
    for event in events:
        answer.add(event)
    return events, answer.text


@pytest.fixture
async def agent(alice):
    client = await Agent.of(alice.server.base, alice.token)
    yield client
    await client.aclose()


async def test_the_public_card_names_the_agents_open_to_everyone(a2a_server, alice):
    grant(a2a_server, alice.username)
    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, a2a_server.base).get_agent_card()
        validate_proto_required_fields(card)
        assert card.name == "Test site" and card.capabilities.streaming and card.capabilities.extended_agent_card
        assert [(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == [
            (f"{a2a_server.base}/a2a/default/", "JSONRPC", "1.0")
        ]
        assert [skill.id for skill in card.skills] == ["default", "helper"]  # never `secret`
        assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
        helper = await A2ACardResolver(http, f"{a2a_server.base}/a2a/helper").get_agent_card()
        assert (helper.name, helper.description, [s.id for s in helper.skills]) == ("Helper", "Helps.", ["helper"])
        # A private agent's card: only with the token of a user who may use it.
        with pytest.raises(AgentCardResolutionError) as hidden:
            await A2ACardResolver(http, f"{a2a_server.base}/a2a/secret").get_agent_card()
        assert hidden.value.status_code == 404
    secret = await Agent.of(a2a_server.base, alice.token, "secret")
    try:
        extended = await secret.client.get_extended_agent_card(GetExtendedAgentCardRequest())
        assert extended.name == "Secret"
        assert [s.id for s in extended.skills] == ["default", "helper", "secret"]
    finally:
        await secret.aclose()


async def test_send_answers_the_completed_task_equal_to_the_stored_run(agent, alice, replies):
    replies.set("a2a plain", text_reply("Plain answer from the agent."))
    [response] = await agent.send("a2a plain")
    task = response.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_of(task) == "Plain answer from the agent."
    events, answer = await stored(alice, task)
    assert answer == answer_of(task)
    assert events[0]["type"] == "user_message" and events[0]["via"] == "a2a"
    assert events[0]["content"] == "a2a plain"
    assert task.history[0].parts[0].text == "a2a plain" and task.history[0].role == 1  # ROLE_USER
    r = await alice.api("GET", f"/api/conversations/{task.context_id}/")
    assert (r.json()["source"], r.json()["title"]) == ("a2a", "a2a plain")
    # GetTask: the same Task; a second message in the same context continues its conversation.
    again = await agent.client.get_task(GetTaskRequest(id=task.id))
    assert answer_of(again) == answer and again.status.state == TaskState.TASK_STATE_COMPLETED
    replies.set("a2a second", text_reply("Second."))
    [second] = await agent.send("a2a second", context_id=task.context_id)
    assert second.task.context_id == task.context_id and answer_of(second.task) == "Second."
    listed = await agent.client.list_tasks(ListTasksRequest(context_id=task.context_id, include_artifacts=True))
    assert [t.id for t in listed.tasks] == [second.task.id, task.id]  # newest first
    assert answer_of(listed.tasks[1]) == answer and listed.total_size == 2
    # The inspector shows where the run came from: its conversation's source and its door.
    shell(
        alice.server,
        f"from django.contrib.auth.models import User; print(User.objects.filter(username={alice.username!r}).update(is_staff=True))",
    )
    page = await alice.http.get(alice.url(f"/inspect/?conversation={task.context_id}"))
    assert page.status_code == 200 and "tag-a2a" in page.text
    page = await alice.http.get(alice.url(f"/inspect/runs/{task.id}/"))
    assert page.status_code == 200 and "started by an A2A client" in page.text and "<dd>a2a</dd>" in page.text


async def test_a_stream_sends_the_task_then_chunks_that_make_the_stored_answer(alice, replies):
    replies.set("a2a stream", tool_call_reply(("current_time", {})), text_reply("Streamed " * 8, piece=5))
    streaming = await Agent.of(alice.server.base, alice.token, streaming=True)
    try:
        events = await streaming.send("a2a stream")
    finally:
        await streaming.aclose()
    first = events[0].task
    assert first.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    assert not first.artifacts and first.history[0].parts[0].text == "a2a stream"
    statuses = [e.status_update.status for e in events if e.HasField("status_update")]
    assert [s.message.parts[0].text for s in statuses[:2]] == ["calling current_time", "current_time done"]
    assert statuses[-1].state == TaskState.TASK_STATE_COMPLETED
    chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert not chunks[0].append and all(c.append for c in chunks[1:])
    _, answer = await stored(alice, first)
    assert streamed_answer(events) == answer == "Streamed " * 8


@pytest.fixture
async def streamer(alice):
    client = await Agent.of(alice.server.base, alice.token, streaming=True)
    yield client
    await client.aclose()


async def test_cancel_ends_the_run_cancelled_in_the_log(agent, streamer, alice, replies):
    replies.set("a2a long", slow_text_reply(answer_text(200, "long"), chunks=200, delay=0.05))
    [response] = await agent.send("a2a long", return_immediately=True)
    task = response.task
    assert task.status.state in (TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_SUBMITTED)
    with pytest.raises(UnsupportedOperationError, match="RUN_IN_PROGRESS"):
        await agent.send("a2a busy", context_id=task.context_id)
    cancelled = await agent.client.cancel_task(CancelTaskRequest(id=task.id))
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    events, answer = await stored(alice, task)
    assert events[-1]["type"] == "complete" and events[-1]["status"] == "cancelled"
    assert answer_of(cancelled) == answer
    with pytest.raises(TaskNotCancelableError):
        await agent.client.cancel_task(CancelTaskRequest(id=task.id))
    with pytest.raises(UnsupportedOperationError):
        [e async for e in streamer.client.subscribe(SubscribeToTaskRequest(id=task.id))]


async def test_resubscribe_mid_run_gets_exactly_the_rest(agent, streamer, alice, replies):
    text = answer_text(60, "sub")
    replies.set("a2a resub", slow_text_reply(text, chunks=60, delay=0.05))
    [response] = await agent.send("a2a resub", return_immediately=True)
    task = response.task
    # Mid-run: once part of the answer is stored (a fixed wait met a loaded CI machine's run
    # before its first text), with most of its 3 s still to stream.
    async with asyncio.timeout(20):
        while not answer_of(await agent.client.get_task(GetTaskRequest(id=task.id))):
            await asyncio.sleep(0.05)
    events = [e async for e in streamer.client.subscribe(SubscribeToTaskRequest(id=task.id))]
    snapshot = events[0].task
    assert snapshot.id == task.id and snapshot.status.state == TaskState.TASK_STATE_WORKING
    assert 0 < len(answer_of(snapshot)) < len(text)  # mid-run: part of the answer, not all
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert streamed_answer(events[1:], start=answer_of(snapshot)) == text
    _, answer = await stored(alice, task)
    assert answer == text


async def test_an_approval_is_input_required_and_answered_by_a_message(agent, alice, replies):
    replies.set("a2a gated", tool_call_reply(("calculator", {"expression": "6*7"})), text_reply("It is 42."))
    [response] = await agent.send("a2a gated")
    task = response.task
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    text_part, data_part = task.status.message.parts
    assert text_part.text == "calculator needs your approval"
    request_data = data_part.data.struct_value.fields["approvalRequest"].struct_value
    assert request_data.fields["toolName"].string_value == "calculator"
    with pytest.raises(UnsupportedOperationError):  # waiting for input: no new run in its context
        await agent.send("a2a meanwhile", context_id=task.context_id)
    decision = Value()
    decision.struct_value.update({"decision": "approve"})
    [answered] = await agent.send(task_id=task.id, context_id=task.context_id, parts=[Part(data=decision)])
    assert answered.task.id == task.id and answered.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_of(answered.task) == "It is 42."
    events, answer = await stored(alice, task)
    kinds = [e["type"] for e in events]
    assert kinds.count("user_message") == 1 and "approval_result" in kinds
    assert next(e for e in events if e["type"] == "approval_result")["decision"] == "approved"
    assert answer == "It is 42."
    with pytest.raises(UnsupportedOperationError):  # not waiting any more
        await agent.send("approve", task_id=task.id)


async def test_no_token_is_401_and_anothers_agents_and_tasks_are_not_found(alice, bob, a2a_server, replies):
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    async with httpx.AsyncClient() as http:
        r = await http.post(f"{a2a_server.base}/a2a/default/", json=body, headers={"A2A-Version": "1.0"})
        assert r.status_code == 401 and r.headers["WWW-Authenticate"].startswith("Bearer") and r.json()["error"]
        # A session cookie alone is not read.
        r = await alice.http.post(f"{a2a_server.base}/a2a/default/", json=body, headers={"A2A-Version": "1.0"})
        assert r.status_code == 401
        auth = {"Authorization": f"Bearer {bob.token}", "A2A-Version": "1.0"}
        r = await http.post(f"{a2a_server.base}/a2a/secret/", json=body, headers=auth)
        assert r.status_code == 404  # not bob's agent: as an unknown one
        r = await http.post(f"{a2a_server.base}/a2a/default/", json=body, headers={**auth, "A2A-Version": "0.1"})
        assert r.json()["error"]["code"] == -32009
        r = await http.post(f"{a2a_server.base}/a2a/default/", content=b"{nope", headers=auth)
        assert r.json()["error"]["code"] == -32700
    replies.set("a2a mine", text_reply("Mine."))
    mine = await Agent.of(a2a_server.base, alice.token)
    theirs = await Agent.of(a2a_server.base, bob.token)
    helper = await Agent.of(a2a_server.base, alice.token, "helper")
    try:
        [response] = await mine.send("a2a mine")
        task = response.task
        with pytest.raises(TaskNotFoundError):
            await theirs.client.get_task(GetTaskRequest(id=task.id))
        with pytest.raises(TaskNotFoundError):
            await theirs.client.cancel_task(CancelTaskRequest(id=task.id))
        with pytest.raises(TaskNotFoundError):  # another agent's task
            await helper.client.get_task(GetTaskRequest(id=task.id))
        with pytest.raises(InvalidParamsError):  # another user's context: nothing appended to it
            await theirs.send("a2a intrude", context_id=task.context_id)
        assert len(await alice.events(task.context_id)) == len((await stored(alice, task))[0])
        assert (await theirs.client.list_tasks(ListTasksRequest())).tasks == []
        with pytest.raises(UnsupportedOperationError):  # a taskId not waiting for input
            await mine.send("hello", task_id=task.id)
        extended = await theirs.client.get_extended_agent_card(GetExtendedAgentCardRequest())
        assert [skill.id for skill in extended.skills] == ["default", "helper"]  # not alice's `secret`
        with pytest.raises(InvalidParamsError):
            await mine.send(parts=[])
        with pytest.raises(ContentTypeNotSupportedError):
            await mine.send(parts=[Part(url="https://example.com/x.png")])
        with pytest.raises(PushNotificationNotSupportedError):
            await mine.client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task.id, url="https://example.com/hook")
            )
    finally:
        for client in (mine, theirs, helper):
            await client.aclose()


async def test_list_pages_and_a_chat_page_run_is_a_task(agent, alice, replies):
    replies.set("a2a page", text_reply("Paged."))
    [first] = await agent.send("a2a page")
    context = first.task.context_id
    for _ in range(2):
        await agent.send("a2a page", context_id=context)
    page = await agent.client.list_tasks(ListTasksRequest(context_id=context, page_size=2))
    assert len(page.tasks) == 2 and page.next_page_token and page.total_size == 3
    rest = await agent.client.list_tasks(
        ListTasksRequest(context_id=context, page_size=2, page_token=page.next_page_token)
    )
    assert [t.id for t in rest.tasks] == [first.task.id] and not rest.next_page_token
    assert not rest.tasks[0].artifacts  # without includeArtifacts
    with pytest.raises(InvalidParamsError):
        await agent.client.list_tasks(ListTasksRequest(page_token="nonsense"))
    with pytest.raises(InvalidParamsError):
        await agent.client.list_tasks(ListTasksRequest(page_size=101))
    done = await agent.client.list_tasks(ListTasksRequest(context_id=context, status=TaskState.TASK_STATE_COMPLETED))
    assert len(done.tasks) == 3
    # A run started on the chat page (here its HTTP twin) is a task of the same agent.
    replies.set("a2a from the page", text_reply("From the page."))
    conversation = await alice.create_conversation("page")
    r = await alice.api(
        "POST", f"/api/conversations/{conversation}/messages/", json_body={"content": "a2a from the page"}
    )
    assert r.status_code in (200, 201, 202), r.text
    for _ in range(100):
        listed = await agent.client.list_tasks(ListTasksRequest(context_id=conversation, include_artifacts=True))
        if listed.tasks and listed.tasks[0].status.state == TaskState.TASK_STATE_COMPLETED:
            break
        await asyncio.sleep(0.1)
    [task] = listed.tasks
    assert answer_of(task) == "From the page." == (await stored(alice, task))[1]
    assert task.history[0].message_id.startswith(conversation)


async def test_a_retried_model_call_replaces_the_streamed_text_of_the_failed_attempt(streamer, alice, replies):
    broken = {"chunks": [{"delta": {"content": "Broken half "}}, {"error": {"message": "overloaded"}}]}
    replies.set("a2a retried", broken, text_reply("Whole answer."))
    events = await streamer.send("a2a retried")
    chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert "Broken half " in "".join(c.artifact.parts[0].text for c in chunks)  # the follower saw it
    assert [c.append for c in chunks].count(False) == 2  # the first chunk, and the first of the retry
    _, answer = await stored(alice, events[0].task)
    assert streamed_answer(events) == answer == "Whole answer."
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
