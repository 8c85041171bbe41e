"""Head starts (chat.runtime.head_start): a conversation's first message sends its model request
while its start is being stored, and nothing of the answer is read before the run exists; a
refused or mispredicted start cancels it; a refused user gets none for a minute."""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from chat.accounts.budgets import budgets_may_apply
from chat.accounts.tokens import token_create
from chat.conversations.services import conversation_create
from chat.exceptions import QuotaExceeded, RateLimited, RunInProgress
from chat.models import AgentProfile, Budget, Event, ModelCall, Run
from chat.runs import starter
from chat.runs.requests import StartRun
from chat.runs.starter import Starter, start_run
from chat.runs.starts import run_start
from chat.runtime import build
from tests.asgi_http import RawStream
from tests.asgi_socket import Socket
from tests.fakellm import text_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


@pytest.fixture
def trips(monkeypatch, llm_settings):
    """Each group's trip to the ORM thread waits (up to a second) for a model request made since
    its start was asked for, and records how many had arrived when it went on."""
    seen: list[int] = []
    asked = {"base": 0}
    original_start, original_trip = Starter.start, starter.start_with_memory

    async def start(self, request):
        asked["base"] = len(llm_settings.requests)
        return await original_start(self, request)

    def start_with_memory(starts):
        deadline = time.monotonic() + 1.0
        while len(llm_settings.requests) == asked["base"] and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append(len(llm_settings.requests) - asked["base"])
        return original_trip(starts)

    monkeypatch.setattr(Starter, "start", start)
    monkeypatch.setattr(starter, "start_with_memory", start_with_memory)
    return seen


def _payloads(run_id) -> list[dict]:
    return list(Event.objects.filter(run_id=run_id).order_by("seq").values_list("payload", flat=True))


def _texts(payloads) -> str:
    return "".join(p["content"] for p in payloads if p["type"] == "text")


async def test_a_first_message_s_model_request_goes_out_while_its_start_is_stored(
    conversation, registry, llm_settings, trips
):
    llm_settings.script(text_reply("an early answer", piece=3))
    run, seq = await start_run(
        StartRun(conversation=conversation, user=conversation.owner, content="hello", first=True)
    )
    await registry.wait_idle()
    assert trips == [1]  # the request arrived before the trip ended
    payloads = await sync_to_async(_payloads)(run.pk)
    assert seq == 1 and payloads[0]["type"] == "user_message" and payloads[0]["content"] == "hello"
    assert _texts(payloads) == "an early answer" and payloads[-1]["status"] == "succeeded"
    assert [body["messages"][-1]["content"] for body in llm_settings.requests] == ["hello"]
    calls = await sync_to_async(lambda: list(ModelCall.objects.filter(run=run)))()
    assert len(calls) == 1 and calls[0].finish_reason == "stop"
    stored = await sync_to_async(Run.objects.get)(pk=run.pk)
    assert stored.started_at <= calls[0].started_at  # the run began with its head start, not when stored


async def test_a_later_message_or_a_caller_that_saw_events_waits_for_its_start(
    conversation, registry, llm_settings, trips
):
    first, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content="one"))
    await registry.wait_idle()
    second, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content="two"))
    await registry.wait_idle()
    assert trips == [0, 0]  # `first` not said: no head start
    assert [len(body["messages"]) for body in llm_settings.requests][-1] > 1  # the second has its memory


async def test_only_the_first_of_messages_arriving_together_gets_a_head_start(make_user, registry, llm_settings, trips):
    user = await sync_to_async(make_user)("erin")
    conversations = [await sync_to_async(conversation_create)(owner=user) for _ in range(4)]
    await registry.ensure_started()
    started = await asyncio.gather(
        *(
            start_run(StartRun(conversation=c, user=user, content=f"m{i}", first=True))
            for i, c in enumerate(conversations)
        )
    )
    await registry.wait_idle()
    # One group: only the message that found the starter idle began before it.
    assert trips == [1]
    runs = await sync_to_async(lambda: list(Run.objects.filter(pk__in=[r.pk for r, _ in started])))()
    assert sorted(run.status for run in runs) == ["succeeded"] * 4
    assert len(llm_settings.requests) == 4


async def test_a_refused_start_cancels_its_head_start_and_its_user_gets_none_for_a_minute(
    conversation, registry, llm_settings, trips
):
    slow = text_reply("slow words " * 30, piece=2, delay=0.02)
    llm_settings.script(slow, slow)
    run, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content="first", first=True))
    # A second tab that had not seen the first message yet: its head start goes, then is refused.
    with pytest.raises(RunInProgress):
        await start_run(StartRun(conversation=conversation, user=conversation.owner, content="second", first=True))
    assert trips == [1, 1]
    assert "aborted" in await llm_settings.endings(2)  # its request closed, unread
    await registry.wait_idle()
    payloads = await sync_to_async(_payloads)(run.pk)
    assert [p["content"] for p in payloads if p["type"] == "user_message"] == ["first"]
    assert _texts(payloads).startswith("slow words") and payloads[-1]["status"] == "succeeded"
    calls = await sync_to_async(lambda: ModelCall.objects.count())()
    assert calls == 1  # the cancelled request left no record
    # The same user's next first message, in another conversation: no head start for a minute.
    other = await sync_to_async(conversation_create)(owner=conversation.owner)
    await start_run(StartRun(conversation=other, user=conversation.owner, content="third", first=True))
    await registry.wait_idle()
    assert trips == [1, 1, 0]


async def test_a_rate_limited_user_s_messages_do_not_become_model_requests(
    conversation, registry, llm_settings, trips, settings
):
    settings.AGENT_MESSAGES_PER_MINUTE = 1
    await start_run(StartRun(conversation=conversation, user=conversation.owner, content="one", first=True))
    await registry.wait_idle()
    for i in range(3):
        other = await sync_to_async(conversation_create)(owner=conversation.owner)
        with pytest.raises(RateLimited):
            await start_run(StartRun(conversation=other, user=conversation.owner, content=f"spam {i}", first=True))
    # The first refusal's head start was sent (and cancelled); none after it.
    assert trips == [1, 1, 0, 0]
    assert len(llm_settings.requests) == 2


async def test_a_head_start_predicted_wrong_is_cancelled_and_the_run_starts_from_its_memory(
    conversation, registry, llm_settings, trips
):
    earlier, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content="remember 42"))
    await registry.wait_idle()
    llm_settings.script(text_reply("slow words " * 20, piece=2, delay=0.02), text_reply("it was 42"))
    # A caller whose view of the conversation is stale says it saw no event.
    run, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content="what?", first=True))
    await registry.wait_idle()
    assert trips == [0, 1]
    head, real = llm_settings.requests[-2:]
    assert [m["content"] for m in head["messages"] if m["role"] == "user"] == ["what?"]
    assert [m["content"] for m in real["messages"] if m["role"] == "user"] == ["remember 42", "what?"]
    payloads = await sync_to_async(_payloads)(run.pk)
    assert _texts(payloads) == "it was 42" and payloads[-1]["status"] == "succeeded"
    assert await sync_to_async(lambda: ModelCall.objects.filter(run=run).count())() == 1


async def test_a_conversation_with_an_agent_profile_gets_no_head_start(conversation, registry, llm_settings, trips):
    profile = await AgentProfile.objects.acreate(slug="helper", name="Helper", model="fake-model", everyone=True)
    conversation.agent = profile
    await sync_to_async(conversation.save)()
    run, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content="hi", first=True))
    await registry.wait_idle()
    assert trips == [0]  # its profile is read, and checked, with the start
    assert (await sync_to_async(Run.objects.get)(pk=run.pk)).status == "succeeded"


async def test_a_socket_asks_for_a_head_start_until_it_has_seen_an_event(conversation, registry, llm_settings, trips):
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "remember 7"})
    first = await socket.run_to_end()
    await socket.send({"type": "message", "content": "which number?"})
    second = await socket.run_to_end()
    await socket.close()
    # A new socket on the conversation catches up on its events first.
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "again?"})
    await socket.run_to_end()
    await socket.close()
    assert trips == [1, 0, 0]
    assert first[0]["seq"] == 1 and first[-1]["status"] == second[-1]["status"] == "succeeded"
    remembered = [m["content"] for m in llm_settings.requests[1]["messages"] if m["role"] == "user"]
    assert remembered == ["remember 7", "which number?"]


async def test_the_http_door_asks_for_a_head_start_for_an_empty_conversation(
    conversation, registry, llm_settings, trips
):
    _, value = await sync_to_async(token_create)(user=conversation.owner, name="t")
    for content in ("one", "two"):
        request = RawStream(
            f"/api/conversations/{conversation.pk}/messages/",
            [(b"authorization", f"Bearer {value}".encode())],
            body={"content": content},
        )
        assert (await request.open())["status"] == 202
        await request.rest()
        await request.close()
        await registry.wait_idle()
    assert trips == [1, 0]


async def test_an_agent_that_cannot_be_built_fails_its_run_as_without_a_head_start(
    conversation, registry, llm_settings, monkeypatch
):
    def broken(**kwargs):
        raise RuntimeError("a broken tool registry")

    monkeypatch.setattr(build, "build_agent", broken)
    run, seq = await start_run(StartRun(conversation=conversation, user=conversation.owner, content="hi", first=True))
    await registry.wait_idle()
    payloads = await sync_to_async(_payloads)(run.pk)
    assert seq == 1 and [p["type"] for p in payloads] == ["user_message", "error", "complete"]
    assert payloads[-1]["status"] == "interrupted" and llm_settings.requests == []


async def test_an_attempt_that_dies_before_its_start_is_stored_is_retried_with_nothing_to_discard(
    conversation, registry, llm_settings, trips, monkeypatch
):
    dying = {"chunks": [{"delta": {"content": p}} for p in ("Partial ", "words")], "truncate_after": 2}
    llm_settings.script(dying, text_reply("The full answer."))
    trip = starter.start_with_memory

    def after_the_attempt_died(starts):
        deadline = time.monotonic() + 5.0
        while "truncated" not in llm_settings.stream_endings and time.monotonic() < deadline:
            time.sleep(0.01)
        return trip(starts)

    monkeypatch.setattr(starter, "start_with_memory", after_the_attempt_died)
    run, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content="flaky", first=True))
    await registry.wait_idle()
    payloads = await sync_to_async(_payloads)(run.pk)
    errors = [p for p in payloads if p["type"] == "error"]
    # Died while held: aiohttp reads a body that failed as its failure, not the bytes before it.
    assert trips == [1] and len(errors) == 1 and "discards" not in errors[0]
    assert _texts(payloads) == "The full answer." and payloads[-1]["status"] == "succeeded"


async def test_under_a_budget_no_model_is_called_ahead_of_the_decision(
    conversation, registry, llm_settings, trips, settings
):
    """docs/protocol.md, "Budgets": a refused start calls no model, not even ahead of the decision;
    so once budgets are in force (the daily quota, a budget met in this process) no head start."""
    settings.AGENT_DAILY_TOKEN_QUOTA = 5
    await sync_to_async(ModelCall.objects.create)(
        run=await sync_to_async(_finished_run)(conversation),
        iteration=1,
        attempt=1,
        started_at=timezone.now(),
        total_tokens=5,
    )
    other = await sync_to_async(conversation_create)(owner=conversation.owner)
    with pytest.raises(QuotaExceeded):
        await start_run(StartRun(conversation=other, user=conversation.owner, content="refused", first=True))
    assert trips == [0] and llm_settings.requests == []
    settings.AGENT_DAILY_TOKEN_QUOTA = 0
    assert not budgets_may_apply()
    await sync_to_async(Budget.objects.create)(scope="user", user=conversation.owner, period="day", tokens=100)
    another = await sync_to_async(conversation_create)(owner=conversation.owner)
    await start_run(StartRun(conversation=another, user=conversation.owner, content="admitted", first=True))
    await registry.wait_idle()
    assert budgets_may_apply() and trips == [0, 0]  # the budget seen: no head start from then on


def _finished_run(conversation) -> Run:
    run, _ = run_start(conversation=conversation, user=conversation.owner, content="x", model="m", worker="w")
    Run.objects.filter(pk=run.pk).update(status="succeeded")
    return run
