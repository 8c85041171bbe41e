"""Generated titles (docs/protocol.md, "Titles, pinning, archiving"): after a conversation's first answer, one model call
of its agent titles it, recorded as a model call with purpose "title" and counted in usage, and a
`title` frame (no seq, not stored) reaches its sockets and streams; never over the user's title,
never a second time, and a failing title call harms nothing."""

from __future__ import annotations

import asyncio
import logging

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from chat.agent.titles import TITLE_REQUEST
from chat.conversations.services import conversation_create, conversation_rename
from chat.conversations.titles import title_store
from chat.eventlog.types import ModelCallData
from chat.models import Conversation, Event, ModelCall, Run
from chat.runs.starts import run_start
from tests.asgi_http import RawStream
from tests.asgi_socket import Socket, session_cookie
from tests.fakellm import text_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def with_usage(reply: dict, prompt: int, completion: int) -> dict:
    reply["chunks"].append(
        {"usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}
    )
    return reply


@pytest.fixture
def titles_on(settings):
    settings.AGENT_TITLES = True


@pytest.fixture
def untitled(make_user):
    return conversation_create(owner=make_user("alice"))


async def _until(predicate, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await sync_to_async(predicate)():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def _stream_frames(stream: RawStream, until: str) -> list[bytes]:
    chunks = []
    while True:
        chunk = await stream.chunk()
        assert chunk is not None
        chunks.append(chunk)
        if chunk.startswith(f"event: {until}\n".encode()):
            return chunks


async def test_the_first_answer_brings_a_title_to_every_socket_and_stream(untitled, registry, llm_settings, titles_on):
    llm_settings.script(
        with_usage(text_reply("It is 42."), 20, 4),
        with_usage(text_reply('Title: "Multiplying six by seven."'), 30, 6),
        text_reply("Still 42."),
    )
    socket = Socket(untitled.owner, untitled.pk)
    await socket.connect()
    await socket.history()
    key = await sync_to_async(session_cookie)(untitled.owner)
    stream = RawStream(f"/api/conversations/{untitled.pk}/stream/", [(b"cookie", f"sessionid={key}".encode())])
    await stream.open()
    assert (await stream.chunk()).startswith(b"event: sync")

    await socket.send({"type": "message", "content": "what is 6*7?"})
    frames = await socket.run_to_end()
    assert frames[-1]["status"] == "succeeded"
    title = await socket.recv()
    assert title == {"type": "title", "title": "Multiplying six by seven"}  # no seq, no runId
    sse = await _stream_frames(stream, "title")
    assert sse[-1] == b'event: title\ndata: {"type":"title","title":"Multiplying six by seven"}\n\n'  # no id
    await stream.close()

    conversation = await Conversation.objects.aget(pk=untitled.pk)
    assert (conversation.title, conversation.title_source) == ("Multiplying six by seven", "generated")
    assert not await Event.objects.filter(conversation=untitled, type="title").aexists()  # not persisted
    # The call: the first message and the answer, then the request; no tools; the run's model.
    asked = llm_settings.requests[1]
    assert [m["role"] for m in asked["messages"]] == ["user", "assistant", "user"]
    assert asked["messages"][0]["content"] == "what is 6*7?" and asked["messages"][1]["content"] == "It is 42."
    assert asked["messages"][2]["content"] == TITLE_REQUEST and "tools" not in asked
    assert asked["model"] == "fake-model"
    # Recorded as a model call of the run, purpose "title", its tokens counted with the run's and in usage.
    run = await Run.objects.aget(pk=frames[0]["runId"])
    calls = [c async for c in ModelCall.objects.filter(run=run).order_by("started_at", "id")]
    assert [(c.purpose, c.total_tokens) for c in calls] == [("agent", 24), ("title", 36)]
    assert (run.prompt_tokens, run.completion_tokens, run.total_tokens) == (50, 10, 60)
    usage = await sync_to_async(_usage_of)(untitled.owner)
    assert usage["today"]["totalTokens"] == 60

    # Only after the first answer: the next one asks no title, and none comes.
    await socket.send({"type": "message", "content": "and again?"})
    await socket.run_to_end()
    assert await socket.silent(0.5)
    assert len(llm_settings.requests) == 3
    await socket.close()


def _usage_of(user) -> dict:
    client = Client()
    client.force_login(user)
    return client.get("/api/usage/").json()


async def test_a_title_the_user_gave_is_never_replaced(untitled, registry, llm_settings, titles_on):
    await sync_to_async(conversation_rename)(conversation=untitled, title="My own title")
    llm_settings.script(text_reply("It is 42."), text_reply("A generated title"))
    socket = Socket(untitled.owner, untitled.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "what is 6*7?"})
    await socket.run_to_end()
    assert await socket.silent(0.5)
    await socket.close()
    assert len(llm_settings.requests) == 1  # no title asked
    conversation = await Conversation.objects.aget(pk=untitled.pk)
    assert (conversation.title, conversation.title_source) == ("My own title", "user")


def test_a_title_given_while_one_is_generated_wins(make_user):
    """The user renames the conversation while its title call is under way: the generated title
    is recorded as a call but does not replace the user's."""
    conversation = conversation_create(owner=make_user("alice"))
    run, _ = run_start(conversation=conversation, user=conversation.owner, content="hi", model="m", worker="w")
    conversation_rename(conversation=conversation, title="Mine")
    call = ModelCallData(
        iteration=0,
        attempt=1,
        started_at=run.started_at,
        first_token_ms=5,
        duration_ms=9,
        message_count=3,
        prompt_tokens=7,
        completion_tokens=2,
        total_tokens=9,
        finish_reason="stop",
        error="",
    )
    assert title_store(conversation_id=conversation.pk, run_id=run.pk, call=call, title="Generated") is False
    stored = Conversation.objects.get(pk=conversation.pk)
    assert (stored.title, stored.title_source) == ("Mine", "user")
    assert ModelCall.objects.get(run=run).purpose == "title"
    assert Run.objects.get(pk=run.pk).total_tokens == 9


async def test_a_failing_title_call_leaves_the_first_message_title_and_logs(
    untitled, registry, llm_settings, titles_on, caplog
):
    llm_settings.script(
        text_reply("It is 42."),
        {"status": 400, "body": {"error": {"message": "no titles here"}}},
        text_reply("Still 42."),
    )
    socket = Socket(untitled.owner, untitled.pk)
    await socket.connect()
    await socket.history()
    with caplog.at_level(logging.WARNING, logger="chat.runtime.titles"):
        await socket.send({"type": "message", "content": "what is 6*7?"})
        frames = await socket.run_to_end()
        await _until(lambda: ModelCall.objects.filter(purpose="title").exists())
    assert frames[-1]["status"] == "succeeded"
    assert await socket.silent(0.5)  # no title frame
    conversation = await Conversation.objects.aget(pk=untitled.pk)
    assert (conversation.title, conversation.title_source) == ("what is 6*7?", "default")
    failed = await ModelCall.objects.aget(purpose="title")
    assert failed.error and "400" in failed.error
    assert any("no title for conversation" in r.getMessage() for r in caplog.records)
    # The conversation goes on as before; the title is not asked again.
    await socket.send({"type": "message", "content": "and again?"})
    again = await socket.run_to_end()
    assert again[-1]["status"] == "succeeded"
    await socket.close()
    assert len(llm_settings.requests) == 3


async def test_a_failed_run_asks_no_title_and_the_first_answer_after_it_does(
    untitled, registry, llm_settings, titles_on
):
    llm_settings.script(
        {"status": 401, "body": {"error": {"message": "bad key"}}},
        text_reply("Now it works."),
        text_reply("Working Now"),
    )
    socket = Socket(untitled.owner, untitled.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "first try"})
    assert (await socket.run_to_end())[-1]["status"] == "failed"
    assert await socket.silent(0.3)
    await socket.send({"type": "message", "content": "second try"})
    await socket.run_to_end()
    assert await socket.recv() == {"type": "title", "title": "Working Now"}
    await socket.close()
    assert llm_settings.requests[2]["messages"][0]["content"] == "second try"


async def test_titles_can_be_turned_off(untitled, registry, llm_settings, settings):
    settings.AGENT_TITLES = False
    llm_settings.script(text_reply("It is 42."), text_reply("A title"))
    socket = Socket(untitled.owner, untitled.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "what is 6*7?"})
    await socket.run_to_end()
    assert await socket.silent(0.5)
    await socket.close()
    assert len(llm_settings.requests) == 1


async def test_the_demo_model_makes_a_title_offline_from_the_first_message(untitled, registry, settings, titles_on):
    settings.AGENT_MODEL = "demo"
    settings.OPENAI_API_KEY = None
    settings.AGENT_DEMO_CHUNK_DELAY = 0
    socket = Socket(untitled.owner, untitled.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "what is 6 * 7?"})
    await socket.run_to_end()
    assert await socket.recv() == {"type": "title", "title": "What Is 6 * 7"}
    await socket.close()
    call = await ModelCall.objects.aget(purpose="title")
    assert call.error == "" and call.total_tokens > 0  # the demo reports usage: counted like any
