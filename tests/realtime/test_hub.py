"""The sockets' hub (chat/realtime/hub.py): one channel of the layer per process, fanned out to
its sockets; the real consumer through the real ASGI application, and the hub on its own."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from chat.conversations.services import conversation_create
from chat.eventlog.append import events_append
from chat.realtime import hub as hub_module
from chat.realtime.hub import Hub, get_hub
from chat.realtime.layers import InMemoryChannelLayer
from chat.runs.starts import run_start
from chat.runtime.doorbell import conversation_group, publish
from tests.asgi_socket import Socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def members_of(layer, group: str) -> set[str]:
    """The channels of this process the layer has in a group (in-memory, or Redis pub/sub)."""
    if isinstance(layer, InMemoryChannelLayer):
        return set(layer.groups.get(group, {}))
    loop_layer = layer._get_layer()
    return set(loop_layer.groups.get(loop_layer._get_group_channel_name(group), ()))


def channels_of(layer) -> set[str]:
    """The channels of this process the layer holds a queue for."""
    return set((layer if isinstance(layer, InMemoryChannelLayer) else layer._get_layer()).channels)


async def test_the_sockets_of_a_process_share_one_channel_in_each_group(conversation, registry):
    layer, group = get_channel_layer(), conversation_group(conversation.pk)
    other = await sync_to_async(conversation_create)(owner=conversation.owner)
    sockets = [Socket(conversation.owner, conversation.pk) for _ in range(3)] + [Socket(conversation.owner, other.pk)]
    for socket in sockets:
        await socket.connect()
        await socket.history()
    channel = get_hub().channel
    assert channel is not None and hub_module.CHANNEL_PREFIX in channel
    assert members_of(layer, group) == {channel}
    assert members_of(layer, conversation_group(other.pk)) == {channel}
    # The layer holds no channel per socket: the hub's is the only one a socket made.
    assert {name for name in channels_of(layer) if "runs." not in name} <= {channel}

    run, first = await sync_to_async(run_start)(
        conversation=conversation, user=conversation.owner, content="hi", model="m", worker=""
    )
    await publish(conversation.pk, first)
    for socket in sockets[:3]:
        assert await socket.recv() == first[0]
    assert await sockets[3].silent()  # another conversation's doorbell

    # A group is left with its last socket of the process, not before.
    await sockets[0].close()
    await sockets[1].close()
    assert members_of(layer, group) == {channel}
    await sockets[2].close()
    assert members_of(layer, group) == set()
    assert members_of(layer, conversation_group(other.pk)) == {channel}
    await sockets[3].close()


async def test_an_idle_socket_keeps_no_task_and_no_list(conversation, registry):
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    (consumer,) = get_hub().members[conversation_group(conversation.pk)]
    assert (consumer._handling, consumer._inbox) == (None, None)
    run, first = await sync_to_async(run_start)(
        conversation=conversation, user=conversation.owner, content="hi", model="m", worker=""
    )
    await publish(conversation.pk, first)
    assert await socket.recv() == first[0]
    await asyncio.sleep(0)  # the handling task ends after its last send
    assert (consumer._handling, consumer._inbox) == (None, None)
    await socket.close()


async def test_doorbells_that_come_during_the_connect_follow_its_sync(conversation, registry, monkeypatch):
    """Joined, then the history read: a doorbell in between waits for the sync, and what the
    history already sent is not sent again."""
    run, first = await sync_to_async(run_start)(
        conversation=conversation, user=conversation.owner, content="hi", model="m", worker=""
    )
    more = await sync_to_async(events_append)(
        conversation_id=conversation.pk, run_id=run.pk, payloads=[{"type": "text", "content": "a"}]
    )
    real_join = Hub.join

    async def join_then_ring(self, group, member):
        await real_join(self, group, member)
        if group == conversation_group(conversation.pk):
            await publish(conversation.pk, first + more)  # rung before the history is read

    monkeypatch.setattr(Hub, "join", join_then_ring)
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    frames = await socket.history()
    assert frames[-1]["type"] == "sync"
    assert [f["seq"] for f in frames[:-1]] == [f["seq"] for f in first + more]
    assert await socket.silent()
    await socket.close()


async def test_a_message_reaches_each_socket_of_its_group_in_order_and_an_answer_its_socket_alone():
    class Member:
        def __init__(self) -> None:
            self.got: list[int] = []

        def deliver(self, message) -> None:
            self.got.append(message.get("n"))

        def layer_back(self) -> None:
            pass

    hub = Hub(InMemoryChannelLayer())
    a, b, c = Member(), Member(), Member()
    await hub.join("g1", a)
    await hub.join("g1", b)
    await hub.join("g2", c)
    for n in range(5):
        hub.route({"type": "x", "group": "g1", "n": n})
    hub.route({"type": "x", "group": "g2", "n": 9})
    hub.route({"type": "x", "n": 7})  # names no group: nobody's
    assert (a.got, b.got, c.got) == ([0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [9])
    channel, number = hub.address(b)
    assert hub.address(b) == (channel, number) and hub.address(a) != (channel, number)
    hub.route({"type": "approval.refused", "socket": number})
    assert (a.got, b.got) == ([0, 1, 2, 3, 4], [0, 1, 2, 3, 4, None])
    hub.forget(b)
    hub.route({"type": "approval.refused", "socket": number})
    assert b.got[-1] is None and len(b.got) == 6
    hub._reader.cancel()


async def test_through_the_layer_the_hub_delivers_what_was_sent_to_its_channel():
    layer = InMemoryChannelLayer()
    hub = Hub(layer)
    got: list[dict] = []

    class Member:
        deliver = got.append

        def layer_back(self) -> None:
            pass

    await hub.join("conversation.x", Member())
    await layer.group_send("conversation.x", {"type": "chat.events", "events": [], "group": "conversation.x"})
    for _ in range(20):
        if got:
            break
        await asyncio.sleep(0.01)
    assert got == [{"type": "chat.events", "events": [], "group": "conversation.x"}]
    hub._reader.cancel()


async def test_a_socket_past_its_backlog_is_closed_4008_and_resumes_from_the_log(conversation, registry, settings):
    """chat.realtime.backlog: live batches queue while the socket's sends wait on its client; past
    AGENT_SEND_BACKLOG it is a slow consumer, closed 4008, and a reconnect with `after` reads what
    it missed from the log."""
    settings.AGENT_SEND_BACKLOG = 2
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    (consumer,) = get_hub().members[conversation_group(conversation.pk)]
    run, first = await sync_to_async(run_start)(
        conversation=conversation, user=conversation.owner, content="hi", model="m", worker=""
    )
    frames = first + await sync_to_async(events_append)(
        conversation_id=conversation.pk,
        run_id=run.pk,
        payloads=[{"type": "text", "content": str(n)} for n in range(4)],
    )
    consumer.live = False  # as if its sends were waiting on a client that does not read
    for frame in frames:
        consumer.deliver({"type": "chat.events", "events": [frame]})
    assert consumer.behind and consumer._inbox is None  # what it kept is dropped, not kept growing
    assert await socket.comm.receive_output(timeout=5) == {"type": "websocket.close", "code": 4008}
    await socket.close()
    again = Socket(conversation.owner, conversation.pk, after=0)
    await again.connect()
    assert (await again.history())[:-1] == frames
    await again.close()


def test_the_hub_channel_has_room_for_every_doorbell_of_the_process(settings):
    layer = InMemoryChannelLayer(**settings.IN_MEMORY_CHANNEL_LAYER["CONFIG"])
    assert layer.get_capacity(hub_module.CHANNEL_PREFIX + "inmemory!abc") == 100_000
    assert layer.get_capacity("specific.inmemory!abc") == 1000
