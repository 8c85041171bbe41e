"""The event stream through the real ASGI application (docs/protocol.md, "Server-sent events"),
with its intervals shortened: the keep-alive comment, and the credential re-check that ends a
stream whose session ended without a push (its row deleted) or whose token was revoked. And the
stream of a streamed completion (docs/protocol.md, "OpenAI-compatible endpoint"), which joins
before its run starts: nothing read back, a lost batch read by its gap, nothing left joined."""

from __future__ import annotations

import asyncio

import orjson
import pytest
import redis.asyncio
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from chat.accounts import held_credentials
from chat.accounts.revocation import user_group
from chat.accounts.tokens import token_create
from chat.agent.batching import GroupedCalls
from chat.conversations.services import conversation_create
from chat.eventlog.reads import events_after, sync_state
from chat.models import Run
from chat.models import UserSession as Session  # the sessions of SESSION_ENGINE (chat.accounts.sessions)
from chat.realtime import follow
from chat.realtime.hub import get_hub
from chat.runs.requests import StartRun
from chat.runs.starter import start_run
from chat.runs.starts import run_start
from chat.runtime.doorbell import conversation_group
from serving.loop_middleware import request_db
from tests.asgi_http import RawStream
from tests.asgi_socket import session_cookie
from tests.fakellm import text_reply
from tests.realtime.test_hub import members_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


@pytest.fixture
def short_intervals(monkeypatch):
    monkeypatch.setattr(follow, "KEEPALIVE_SECONDS", 0.2)
    monkeypatch.setattr(held_credentials, "SESSION_RECHECK_SECONDS", 0.2)


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


async def run_under_stream(conversation, registry) -> RawStream:
    """The owner's stream of the conversation (until=complete), past its `sync`, and a run started."""
    key = await sync_to_async(session_cookie)(conversation.owner)
    stream = RawStream(
        f"/api/conversations/{conversation.pk}/stream/?until=complete", [(b"cookie", f"sessionid={key}".encode())]
    )
    await stream.open()
    assert (await stream.chunk()).startswith(b"event: sync")
    await start_run(StartRun(conversation=conversation, user=conversation.owner, content="count"))
    return stream


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
    stream = await run_under_stream(conversation, registry)
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


# -- the OpenAI-compatible endpoint's stream: joined before its run starts ------------------


def completion(value: str, content: str, *, stream: bool = True) -> RawStream:
    body = {"model": "default", "stream": stream, "messages": [{"role": "user", "content": content}]}
    return RawStream("/v1/chat/completions", [(b"authorization", f"Bearer {value}".encode())], body=body)


def answer_of(body: bytes) -> str:
    """The text of a streamed completion, from its content deltas."""
    text = ""
    for line in body.split(b"\n\n"):
        if line.startswith(b"data: {"):
            for choice in orjson.loads(line[6:]).get("choices") or []:
                text += choice["delta"].get("content") or ""
    return text


class Reads:
    """What the streams read from the database: each call of events_after and sync_state."""

    def __init__(self, monkeypatch):
        self.calls: list[tuple[str, dict]] = []
        # The streams make them grouped (follow's GroupedCalls): each call is seen as it is asked.
        for name in ("events_after", "sync_state"):
            monkeypatch.setattr(follow, f"_{name}", self._spy(name, getattr(follow, f"_{name}")))

    def _spy(self, name, real):
        async def spy(**kwargs):
            self.calls.append((name, kwargs))
            return await real(**kwargs)

        return spy


class Memberships:
    """The layer's group_add and group_discard calls of the users' and conversations' groups:
    the (group, channel) pairs still joined."""

    def __init__(self, monkeypatch):
        self.joined: set[tuple[str, str]] = set()
        self.ever = 0
        layer = get_channel_layer()
        real_add, real_discard = layer.group_add, layer.group_discard

        async def group_add(group, channel):
            if group.startswith(("user.", "conversation.")):
                self.joined.add((group, channel))
                self.ever += 1
            await real_add(group, channel)

        async def group_discard(group, channel):
            self.joined.discard((group, channel))
            await real_discard(group, channel)

        monkeypatch.setattr(layer, "group_add", group_add)
        monkeypatch.setattr(layer, "group_discard", group_discard)


async def test_a_streamed_completion_comes_live_with_nothing_read_back(make_user, registry, llm_settings, monkeypatch):
    """The new conversation's stream joins its groups before the run starts: every event of the
    run arrives live, and the stream reads neither the history nor the running run."""
    user = await sync_to_async(make_user)("alice")
    _, value = await sync_to_async(token_create)(user=user, name="script")
    reads, memberships = Reads(monkeypatch), Memberships(monkeypatch)
    llm_settings.script(text_reply("one two three four five", piece=3, delay=0.01))
    stream = completion(value, "count")
    start = await stream.open()
    assert start["status"] == 200
    body = await stream.rest()
    await stream.close()
    conversation_id = {k.lower(): v for k, v in start["headers"]}[b"x-agentsite-conversation"].decode()
    stored = await sync_to_async(events_after)(conversation_id=conversation_id)
    assert answer_of(body) == "".join(f["content"] for f in stored if f["type"] == "text") == "one two three four five"
    assert body.count(b'"finish_reason":"stop"') == 1 and body.endswith(b"data: [DONE]\n\n")
    assert reads.calls == []
    assert memberships.ever == 2 and memberships.joined == set()  # the user's group and the conversation's, left


async def test_a_streamed_completion_reads_what_the_layer_lost_by_its_gap(
    make_user, registry, llm_settings, monkeypatch, short_intervals
):
    """Every other doorbell of the run is dropped: the stream fills each gap from the database
    and holds the stored answer exactly, each piece once, the finish once."""
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
    user = await sync_to_async(make_user)("alice")
    _, value = await sync_to_async(token_create)(user=user, name="script")
    reads = Reads(monkeypatch)
    llm_settings.script(text_reply("one two three four five six seven", piece=2, delay=0.01))
    stream = completion(value, "count")
    start = await stream.open()
    body = await stream.rest()
    await stream.close()
    conversation_id = {k.lower(): v for k, v in start["headers"]}[b"x-agentsite-conversation"].decode()
    stored = await sync_to_async(events_after)(conversation_id=conversation_id)
    assert rung["n"] > 2
    assert answer_of(body) == "".join(f["content"] for f in stored if f["type"] == "text")
    assert body.count(b'"finish_reason":"stop"') == 1 and body.endswith(b"data: [DONE]\n\n")
    assert reads.calls and {name for name, _ in reads.calls} == {"events_after"}


async def test_a_refused_completion_leaves_no_membership_behind(
    make_user, registry, llm_settings, monkeypatch, settings
):
    settings.AGENT_MESSAGES_PER_MINUTE = 1
    user = await sync_to_async(make_user)("alice")
    _, value = await sync_to_async(token_create)(user=user, name="script")
    memberships = Memberships(monkeypatch)
    llm_settings.script(text_reply("first"))
    first = completion(value, "one", stream=False)
    assert (await first.open())["status"] == 200
    await first.rest()
    await first.close()
    refused = completion(value, "two")
    start = await refused.open()
    assert start["status"] == 429
    assert b"rate_limit_exceeded" in await refused.rest()
    await refused.close()
    # Both joined before their start; the refused one left at once.
    assert memberships.ever == 4 and memberships.joined == set()


async def test_revoking_the_token_ends_a_streamed_completion(make_user, registry, llm_settings):
    user = await sync_to_async(make_user)("alice")
    token, value = await sync_to_async(token_create)(user=user, name="script")
    llm_settings.script(text_reply("a slow answer of many pieces", piece=1, delay=0.2))
    stream = completion(value, "slowly")
    assert (await stream.open())["status"] == 200
    assert b'"role":"assistant"' in await stream.chunk()
    await sync_to_async(token.delete)()  # pushed to the user's group: the stream ends now
    body = await stream.rest()
    await stream.close()
    assert b'"code":"invalid_api_key"' in body and body.endswith(b"data: [DONE]\n\n")
    assert len(answer_of(body)) < len("a slow answer of many pieces")


# -- served by the hub: no channel of its own, its groups left to the end ---------------------


class Channels:
    """The channels the streams and /healthz make, and whether the layer still holds each: in its
    table of channels, in a group, and on Redis as a subscription of the server (PUBSUB NUMSUB)."""

    def __init__(self, monkeypatch):
        self.made: list[str] = []
        self.layer = get_channel_layer()
        real_new = self.layer.new_channel

        async def new_channel(prefix="specific."):
            name = await real_new(prefix)
            if prefix in ("sse.", "healthz."):  # not the run registry's nor the hub's, which live with the process
                self.made.append(name)
            return name

        monkeypatch.setattr(self.layer, "new_channel", new_channel)

    async def held(self) -> list[str]:
        subscribed = set()
        if settings.REDIS_URL:
            client = redis.asyncio.Redis.from_url(settings.REDIS_URL)
            try:
                counts = await client.pubsub_numsub(*self.made) if self.made else []
            finally:
                await client.aclose()
            subscribed = {name.decode() for name, count in counts if count}
        joined = {name for members in self.layer.groups.values() for name in members}
        return [name for name in self.made if name in self.layer.channels or name in subscribed or name in joined]

    async def left(self, timeout: float = 3.0) -> bool:
        """True once no channel made is held (the stream's end runs as the request winds down)."""
        async with asyncio.timeout(timeout):
            while await self.held():
                await asyncio.sleep(0.05)
        return True


def streams_groups() -> set[str]:
    """The users' and conversations' groups the hub has a member in (the streams', here)."""
    return {group for group in get_hub().members if group.startswith(("user.", "conversation."))}


async def hub_left(groups, timeout: float = 3.0) -> bool:
    """True once the hub has no member in these groups and its channel is in none of them."""
    layer, hub = get_channel_layer(), get_hub()
    async with asyncio.timeout(timeout):
        while any(group in hub.members or hub.channel in members_of(layer, group) for group in groups):
            await asyncio.sleep(0.05)
    return True


async def test_an_open_stream_is_served_by_the_hub_and_leaves_its_groups(
    conversation, short_intervals, registry, monkeypatch
):
    """No channel of the layer per stream (on Redis, no subscription per stream): the stream is a
    member of the hub in the user's and the conversation's groups, across its ticks, then leaves."""
    channels = Channels(monkeypatch)
    key = await sync_to_async(session_cookie)(conversation.owner)
    stream = RawStream(f"/api/conversations/{conversation.pk}/stream/", [(b"cookie", f"sessionid={key}".encode())])
    await stream.open()
    assert (await stream.chunk()).startswith(b"event: sync")
    for _ in range(3):
        assert await stream.chunk() == b": keep-alive\n\n"
    groups = {user_group(conversation.owner.pk), conversation_group(conversation.pk)}
    hub = get_hub()
    assert channels.made == []
    assert streams_groups() == groups and all(len(hub.members[group]) == 1 for group in groups)
    assert all(members_of(get_channel_layer(), group) == {hub.channel} for group in groups)
    await stream.close()
    assert await hub_left(groups)


async def test_finished_completions_and_probes_leave_nothing_behind(make_user, registry, llm_settings, monkeypatch):
    """A streamed completion ends on its `complete`: its memberships of the hub are left, as a
    stream's are. Each /healthz's channel is ended."""
    channels = Channels(monkeypatch)
    user = await sync_to_async(make_user)("alice")
    _, value = await sync_to_async(token_create)(user=user, name="script")
    for streamed in (True, False):
        llm_settings.script(text_reply("one two three", piece=3, delay=0.01))
        call = completion(value, "count", stream=streamed)
        assert (await call.open())["status"] == 200
        body = await call.rest()
        await call.close()
        if streamed:
            assert answer_of(body) == "one two three"
        else:
            assert orjson.loads(body)["choices"][0]["message"]["content"] == "one two three"
    for _ in range(2):
        probe = RawStream("/healthz", [])
        assert (await probe.open())["status"] == 200
        await probe.rest()
        await probe.close()
    assert len(channels.made) == 2 and all("healthz." in name for name in channels.made)
    assert await channels.left()
    assert await hub_left({user_group(user.pk)}) and streams_groups() == set()


async def test_a_client_closing_as_its_stream_ends_does_not_keep_the_membership(
    conversation, registry, llm_settings, monkeypatch
):
    """A client that read `complete` closes at once, and Django cancels the request while the
    stream leaves its groups: the leaving must not stop there (the soak's clients do this)."""
    layer = get_channel_layer()
    real_discard = layer.group_discard
    leaving = asyncio.Event()
    group = conversation_group(conversation.pk)

    async def slow_group_discard(name, channel):
        if name == group:
            leaving.set()
            await asyncio.sleep(0.3)
        await real_discard(name, channel)

    monkeypatch.setattr(layer, "group_discard", slow_group_discard)
    llm_settings.script(text_reply("one two three", piece=3, delay=0.01))
    stream = await run_under_stream(conversation, registry)
    while b"event: complete" not in await stream.chunk():
        pass
    await asyncio.wait_for(leaving.wait(), 2)
    await stream.close()  # the disconnect cancels the request in the middle of its leaving
    assert await hub_left({group, user_group(conversation.owner.pk)})


async def test_a_stream_reads_what_it_missed_when_the_layer_comes_back(conversation, registry, monkeypatch):
    """The hub tells its members the layer came back after an outage: the stream reads the
    database then, not at its next tick (an hour away here)."""
    monkeypatch.setattr(follow, "KEEPALIVE_SECONDS", 3600.0)
    monkeypatch.setattr(held_credentials, "SESSION_RECHECK_SECONDS", 3600.0)
    key = await sync_to_async(session_cookie)(conversation.owner)
    stream = RawStream(f"/api/conversations/{conversation.pk}/stream/", [(b"cookie", f"sessionid={key}".encode())])
    await stream.open()
    assert (await stream.chunk()).startswith(b"event: sync")
    # Stored with no doorbell, as when the layer was away.
    await sync_to_async(run_start)(
        conversation=conversation, user=conversation.owner, content="hi", model="m", worker=""
    )
    get_hub()._layer_back()
    chunk = await asyncio.wait_for(stream.chunk(), 2)
    assert chunk.startswith(b"id: 1\nevent: user_message\n")
    await stream.close()


async def test_streams_and_sockets_of_a_user_share_one_cap(conversation, registry, settings):
    """AGENT_MAX_SOCKETS_PER_USER counts a user's sockets and SSE streams together (chat.accounts.sockets):
    past it a stream is refused 429 RATE_LIMITED before it starts, a socket closed 4429; a stream
    that ends gives its place back."""
    from tests.asgi_socket import Socket

    settings.AGENT_MAX_SOCKETS_PER_USER = 2
    key = await sync_to_async(session_cookie)(conversation.owner)
    path, cookie = f"/api/conversations/{conversation.pk}/stream/", [(b"cookie", f"sessionid={key}".encode())]
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    stream = RawStream(path, cookie)
    assert (await stream.open())["status"] == 200
    refused = RawStream(path, cookie)
    assert (await refused.open())["status"] == 429
    assert orjson.loads(await refused.rest())["error"]["code"] == "RATE_LIMITED"
    late = Socket(conversation.owner, conversation.pk)
    assert (await late.connect())[0]
    assert await late.comm.receive_output(timeout=2) == {"type": "websocket.close", "code": 4429}
    await stream.close()
    again = RawStream(path, cookie)
    assert (await again.open())["status"] == 200
    await again.close()
    await socket.close()


async def test_streams_opened_together_read_their_own_histories_in_shared_trips(make_user, registry, monkeypatch):
    """Streams opening at once read their histories and states grouped (chat.realtime.follow): each
    gets exactly its own conversation's events and state, in fewer trips to a thread than streams."""
    trips: list[str] = []

    def counted(name):
        def trip(function):
            made = request_db(function)

            async def call(*args, **kwargs):
                trips.append(name)
                return await made(*args, **kwargs)

            return call

        return trip

    monkeypatch.setattr(follow, "_events_after", GroupedCalls(events_after, counted("history"), name="t-history"))
    monkeypatch.setattr(follow, "_sync_state", GroupedCalls(sync_state, counted("state"), name="t-state"))
    count = 6
    owners = [await sync_to_async(make_user)(f"user{i}") for i in range(count)]
    conversations = [await sync_to_async(conversation_create)(owner=owner, title="t") for owner in owners]
    for i, conversation in enumerate(conversations):
        await sync_to_async(run_start)(
            conversation=conversation, user=conversation.owner, content=f"message {i}", model="m", worker=""
        )
    streams = []
    for conversation in conversations:
        key = await sync_to_async(session_cookie)(conversation.owner)
        cookie = [(b"cookie", f"sessionid={key}".encode())]
        streams.append(RawStream(f"/api/conversations/{conversation.pk}/stream/", cookie))
    assert [start["status"] for start in await asyncio.gather(*(s.open() for s in streams))] == [200] * count
    for i, (stream, conversation) in enumerate(zip(streams, conversations, strict=True)):
        message, sync = await stream.chunk(), await stream.chunk()
        assert message.startswith(b"id: 1\nevent: user_message\n")
        assert orjson.loads(message.split(b"\ndata: ", 1)[1])["content"] == f"message {i}"
        state = orjson.loads(sync.split(b"\ndata: ", 1)[1])
        run = await sync_to_async(Run.objects.get)(conversation=conversation)
        assert state["lastSeq"] == 1 and state["runId"] == str(run.pk)  # its own run, in progress
        await stream.close()
    assert 1 <= trips.count("history") < count and 1 <= trips.count("state") < count


async def test_a_stream_asked_for_no_state_reads_none(conversation, registry, monkeypatch):
    """`state=False` (AG-UI's streams, which render stored events only): the history is read, the
    run's state is not, and the `sync` says none, though a run is in progress."""
    reads = Reads(monkeypatch)
    await sync_to_async(run_start)(
        conversation=conversation, user=conversation.owner, content="hi", model="m", worker=""
    )
    stream = follow.Stream(
        conversation=conversation,
        user=conversation.owner,
        token_id=None,
        session_key=None,
        after=0,
        until_complete=True,
        state=False,
    )
    frames = stream.frames()
    try:
        message, sync = await anext(frames), await anext(frames)
    finally:
        await frames.aclose()
    assert message["type"] == "user_message" and message["seq"] == 1
    assert sync == {**sync, "type": "sync", "lastSeq": 1, "running": False, "runId": None}
    assert [name for name, _ in reads.calls] == ["events_after"]
