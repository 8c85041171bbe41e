"""The event stream through the real ASGI application (docs/protocol.md, "Server-sent events"),
with its intervals shortened: the keep-alive comment, and the credential re-check that ends a
stream whose session ended without a push (its row deleted) or whose token was revoked."""

from __future__ import annotations

import orjson
import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from chat.eventlog.reads import events_after
from chat.models import UserSession as Session  # the sessions of SESSION_ENGINE (chat.web.sessions)
from chat.web import streams
from chat.web.tokens import token_create
from tests.asgi_http import RawStream
from tests.asgi_socket import session_cookie
from tests.fakellm import text_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


@pytest.fixture
def short_intervals(monkeypatch):
    monkeypatch.setattr(streams, "KEEPALIVE_SECONDS", 0.2)
    monkeypatch.setattr(streams, "SESSION_RECHECK_SECONDS", 0.2)


async def test_sync_has_no_id_then_keep_alive_comments(conversation, short_intervals, registry):
    key = await sync_to_async(session_cookie)(conversation.owner)
    stream = RawStream(f"/api/conversations/{conversation.pk}/stream/", [(b"cookie", f"sessionid={key}".encode())])
    start = await stream.open()
    assert start["status"] == 200
    headers = {name.lower(): value for name, value in start["headers"]}
    assert headers[b"content-type"] == b"text/event-stream"
    assert headers[b"x-accel-buffering"] == b"no"
    sync = await stream.chunk()
    assert sync.startswith(b"event: sync\ndata: {") and b"id:" not in sync
    assert b'"lastSeq":0' in sync
    assert await stream.chunk() == b": keep-alive\n\n"
    assert await stream.chunk() == b": keep-alive\n\n"
    await stream.close()


async def test_a_session_deleted_without_a_signal_ends_the_stream_at_the_recheck(
    conversation, short_intervals, registry
):
    key = await sync_to_async(session_cookie)(conversation.owner)
    stream = RawStream(f"/api/conversations/{conversation.pk}/stream/", [(b"cookie", f"sessionid={key}".encode())])
    await stream.open()
    assert (await stream.chunk()).startswith(b"event: sync")
    await sync_to_async(Session.objects.filter(session_key=key).delete)()  # a queryset delete: no push
    while (chunk := await stream.chunk()) is not None:
        assert chunk == b": keep-alive\n\n"
    await stream.close()


async def test_a_token_revoked_without_a_push_ends_the_stream_at_the_recheck(
    conversation, short_intervals, registry, monkeypatch
):
    token, value = await sync_to_async(token_create)(user=conversation.owner, name="script")
    stream = RawStream(
        f"/api/conversations/{conversation.pk}/stream/", [(b"authorization", f"Bearer {value}".encode())]
    )
    await stream.open()
    assert (await stream.chunk()).startswith(b"event: sync")
    await sync_to_async(type(token).objects.filter(pk=token.pk)._raw_delete)(using="default")  # no signal
    while (chunk := await stream.chunk()) is not None:
        assert chunk == b": keep-alive\n\n"
    await stream.close()


async def test_the_stream_of_another_user_is_a_404(conversation, make_user, registry):
    other = await sync_to_async(make_user)("mallory")
    key = await sync_to_async(session_cookie)(other)
    stream = RawStream(f"/api/conversations/{conversation.pk}/stream/", [(b"cookie", f"sessionid={key}".encode())])
    start = await stream.open()
    assert start["status"] == 404
    assert b'"NOT_FOUND"' in await stream.chunk()
    await stream.close()


async def test_batches_the_layer_lost_are_read_from_the_database(
    conversation, registry, llm_settings, monkeypatch, short_intervals
):
    """Every other doorbell of the run is dropped: each gap is filled from the database, and the
    stream (until=complete) holds exactly the stored events, each once, in order."""
    layer = get_channel_layer()
    real_group_send = layer.group_send
    rung = {"n": 0}

    async def lossy_group_send(group, message):
        if message.get("type") == "chat.events":
            rung["n"] += 1
            if rung["n"] % 2:
                return
        await real_group_send(group, message)

    monkeypatch.setattr(layer, "group_send", lossy_group_send)
    llm_settings.script(text_reply("one two three four five six seven", piece=2, delay=0.01))
    key = await sync_to_async(session_cookie)(conversation.owner)
    stream = RawStream(
        f"/api/conversations/{conversation.pk}/stream/?until=complete", [(b"cookie", f"sessionid={key}".encode())]
    )
    await stream.open()
    assert (await stream.chunk()).startswith(b"event: sync")
    await registry.start(conversation=conversation, user=conversation.owner, content="count")
    body = b""
    while (chunk := await stream.chunk()) is not None:
        body += chunk
    await stream.close()
    assert rung["n"] > 2
    events = [block for block in body.split(b"\n\n") if block and not block.startswith(b":")]
    got = [orjson.loads(block.split(b"\ndata: ", 1)[1]) for block in events]
    stored = await sync_to_async(events_after)(conversation_id=conversation.pk)
    assert got == stored and got[-1]["type"] == "complete"
    assert [block.split(b"\n", 1)[0] for block in events] == [f"id: {f['seq']}".encode() for f in stored]
