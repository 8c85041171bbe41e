"""One channel of the layer for all the sockets of a process, its messages fanned out to them here.

Each socket had a channel of its own in the channel layer, joined to its conversation's and its
user's groups: a name, a queue, a task waiting on that queue for the socket's whole life, a
watcher for the layer's return and, on Redis, a SUBSCRIBE of its own: 4.5 KiB of an idle
socket's Python heap (`python -m bench.socket_memory`, 500 sockets: 26.6 -> 22.1 KiB). Here a
process has one channel, in each group one of its sockets is in. A message that reaches it
names its group (the doorbell and the revocation pushes say which) or, an approval that came
too late, the socket it answers; the hub hands it to those sockets in the order it came, and
each socket handles it at its own pace (HubConsumer.deliver), so a slow one holds up no other.

A socket is a HubConsumer: it keeps what the hub hands it until it is ready for it (a chat
socket: once its connect has sent `sync`), then one task handles it in order while there is
any; an idle socket has neither list nor task.

A stream that follows a conversation over HTTP (chat.realtime.follow.Stream: the SSE door's, a streamed completion's) is a member
too: the hub hands its messages to the stream's queue, which the request reads.

What a member keeps is its Backlog (chat.realtime.backlog): past AGENT_SEND_BACKLOG messages
its client has fallen too far behind (its sends wait on a client that does not read), and the
member is closed as a slow consumer (`fall_behind`) rather than kept growing.

Whether a conversation is watched (docs/protocol.md, "Notifications": a run that ends with no
socket or stream of its conversation open on any process notifies its owner) is asked of the
hubs themselves: `watched` looks at this process's members, then, on a layer shared by several
processes, sends a WATCH_ASK to the conversation's group, which reaches only the processes with a
member in it; the first WATCH_YES answers. No answer within WATCH_ANSWER_SECONDS: nobody watches.

A socket's join always asks the layer too, even of a group the process is in already: the
in-memory layer ends a membership after a day, and a join that waited on the layer is one the
socket can read its history after (register-then-fetch). The group is left when its last
socket of the process leaves.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from typing import Any, Protocol

from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer

from chat.agent.perloop import PerLoop
from chat.realtime.backlog import CLOSE_SLOW_CONSUMER, Backlog, give_up
from chat.realtime.layers import InMemoryChannelLayer
from chat.runtime import doorbell

logger = logging.getLogger(__name__)

# The hub's channel takes every doorbell of the process; its reader empties it at once, so
# the in-memory layer's capacity for it (settings.IN_MEMORY_CHANNEL_LAYER) is set apart.
CHANNEL_PREFIX = "sockets."
_RETRY_SECONDS = 1.0

# The closes of slow consumers and the answers to WATCH_ASK under way (a task nobody holds may be
# collected before it ends).
_closing: set[asyncio.Task] = set()

WATCH_ASK, WATCH_YES = "watch.ask", "watch.yes"
# How long an asking process waits for another to say it watches: a round trip through Redis
# takes milliseconds; a notification made by a late answer's absence is the only cost.
WATCH_ANSWER_SECONDS = 1.0


class Member(Protocol):
    def deliver(self, message: dict[str, Any]) -> None: ...
    def layer_back(self) -> None: ...


class Hub:
    def __init__(self, layer) -> None:
        self.layer = layer
        self.channel: str | None = None
        self.members: dict[str, list[Member]] = {}  # a list: most groups have one socket
        # The sockets given a number (those that answered an approval), both ways.
        self._addresses: dict[int, Member] = {}
        self._numbers: dict[Member, int] = {}
        self._counter = itertools.count(1)
        self._opening: asyncio.Future | None = None
        self._reader: asyncio.Task | None = None
        self._asks: dict[str, asyncio.Future] = {}  # this process's WATCH_ASKs waiting for a yes

    async def join(self, group: str, member: Member) -> None:
        channel = await self._open()
        sockets = self.members.setdefault(group, [])
        if member not in sockets:
            sockets.append(member)
        try:
            await self.layer.group_add(group, channel)
        except BaseException:
            await self.leave(group, member)
            raise

    async def leave(self, group: str, member: Member) -> None:
        sockets = self.members.get(group)
        if sockets is None or member not in sockets:
            return
        sockets.remove(member)
        if sockets:
            return
        del self.members[group]
        try:
            await self.layer.group_discard(group, self.channel)
        except Exception:  # the layer is down: its memberships go with it, or deliver to no socket here
            logger.info("could not leave %s", group, exc_info=True)

    def address(self, member: Member) -> tuple[str, int]:
        """Where a message for this socket alone goes: the hub's channel and the socket's number
        (an approval's answer that another process refuses, chat.runtime.supervision)."""
        assert self.channel is not None  # a socket that answers has joined
        number = self._numbers.get(member)
        if number is None:
            number = self._numbers[member] = next(self._counter)
            self._addresses[number] = member
        return self.channel, number

    def forget(self, member: Member) -> None:
        number = self._numbers.pop(member, None)
        if number is not None:
            del self._addresses[number]

    async def _open(self) -> str:
        if self.channel is not None:
            return self.channel
        if self._opening is None:
            self._opening = asyncio.ensure_future(self._new_channel())
        opening = self._opening
        try:
            return await asyncio.shield(opening)
        except Exception:
            if self._opening is opening:
                self._opening = None  # the next join tries again
            raise

    async def _new_channel(self) -> str:
        channel = await self.layer.new_channel(CHANNEL_PREFIX)
        self.channel = channel
        self._reader = asyncio.create_task(self._read(channel), name="socket-hub")
        doorbell.watch(self._layer_back)
        return channel

    async def _read(self, channel: str) -> None:
        while True:
            try:
                message = await self.layer.receive(channel)
            except Exception:
                logger.warning("the sockets' channel could not be read; trying again", exc_info=True)
                await asyncio.sleep(_RETRY_SECONDS)
                continue
            self.route(message)

    async def watched(self, group: str) -> bool:
        """Whether any process has a member (a socket, a stream) in `group` now."""
        if self.members.get(group):
            return True
        if isinstance(self.layer, InMemoryChannelLayer):
            return False  # one process: its members are all there is
        try:
            channel = await self._open()
            ask = uuid.uuid4().hex
            future = self._asks[ask] = asyncio.get_running_loop().create_future()
            try:
                await self.layer.group_send(group, {"type": WATCH_ASK, "group": group, "reply": channel, "ask": ask})
                await asyncio.wait_for(future, WATCH_ANSWER_SECONDS)
            finally:
                self._asks.pop(ask, None)
        except TimeoutError:
            return False
        except Exception:  # the layer is away: nobody can be told watching
            logger.warning("could not ask who watches %s", group, exc_info=True)
            return False
        return True

    def _answer_watch(self, message: dict[str, Any]) -> None:
        if not self.members.get(message.get("group", "")):
            return  # left since: silence says so
        task = asyncio.create_task(self._say_yes(message), name="socket-hub-watch")
        _closing.add(task)
        task.add_done_callback(_closing.discard)

    async def _say_yes(self, message: dict[str, Any]) -> None:
        try:
            await self.layer.send(message["reply"], {"type": WATCH_YES, "ask": message.get("ask")})
        except Exception:  # the asker makes a notification it need not have: no more
            logger.info("could not answer who watches %s", message.get("group"), exc_info=True)

    def route(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == WATCH_ASK:
            self._answer_watch(message)
            return
        if kind == WATCH_YES:
            future = self._asks.get(message.get("ask", ""))
            if future is not None and not future.done():
                future.set_result(True)
            return
        number = message.get("socket")
        if number is not None:
            member = self._addresses.get(number)
            if member is not None:
                member.deliver(message)
            return
        for member in tuple(self.members.get(message.get("group", ""), ())):
            member.deliver(message)

    def _layer_back(self) -> None:
        """doorbell: the layer came back after an outage; every socket reads what it missed."""
        unique = {id(member): member for sockets in self.members.values() for member in sockets}
        for member in unique.values():
            member.layer_back()


_hubs: PerLoop[Hub] = PerLoop(lambda: Hub(get_channel_layer()))


def get_hub() -> Hub:
    return _hubs.get()


class HubConsumer(AsyncWebsocketConsumer):
    """A consumer whose layer messages come from the hub, not from a channel of its own: the
    same handlers (`dispatch` by message type), no channel, queue or task of its own while idle."""

    groups = ()  # Channels' groups joined for the consumer: none (`join`); no list per socket
    live = False  # ready: layer messages are handled as they come (go_live)
    behind = False  # a slow consumer, being closed: nothing more is sent to it but the close
    _joined: tuple[str, ...] = ()
    _inbox: Backlog | None = None
    _handling: asyncio.Task | None = None

    async def __call__(self, scope, receive, send) -> None:
        """Channels' AsyncConsumer.__call__ without a channel of the layer (the hub delivers):
        the socket's own messages, one at a time, with no task beside this one."""
        self.scope = scope
        self.base_send = send
        try:
            while True:
                await self.dispatch(await receive())
        except StopConsumer:
            pass
        finally:
            if self._handling is not None:
                self._handling.cancel()
            await self.leave_all()  # done by disconnect, unless a handler raised

    async def join(self, group: str) -> None:
        self._joined += (group,)
        await get_hub().join(group, self)

    async def leave_all(self) -> None:
        self.live = False
        self._inbox = None
        hub = get_hub()
        hub.forget(self)
        joined, self._joined = self._joined, ()
        for group in joined:
            await hub.leave(group, self)

    def address(self) -> tuple[str, int]:
        return get_hub().address(self)

    def go_live(self) -> None:
        """What came meanwhile, and from now on what comes, is handled."""
        if self.behind:
            return
        self.live = True
        self._handle_inbox()

    def deliver(self, message: dict[str, Any]) -> None:
        if self.behind:
            return
        inbox = self._inbox
        if inbox is None:
            inbox = self._inbox = Backlog()
        if not inbox.keep(message):
            self.fall_behind()
            return
        self._handle_inbox()

    def fall_behind(self) -> None:
        """Its client fell too far behind (chat.realtime.backlog): what it kept is dropped, its
        handling stopped, and it is closed 4008; it resumes from the log with `after`."""
        self.behind, self.live, self._inbox = True, False, None
        if self._handling is not None:
            self._handling.cancel()
        give_up(self.scope)
        task = asyncio.create_task(self.close(code=CLOSE_SLOW_CONSUMER), name="socket-slow-consumer")
        _closing.add(task)
        task.add_done_callback(_closing.discard)

    def layer_back(self) -> None:
        """The layer came back after an outage: what the socket missed is in the database."""

    def _handle_inbox(self) -> None:
        if self.live and self._inbox is not None and not self._inbox.empty() and self._handling is None:
            self._handling = asyncio.create_task(self._handle_messages(), name="socket-messages")

    async def _handle_messages(self) -> None:
        try:
            while self._inbox is not None and not self._inbox.empty():
                await self.dispatch(self._inbox.get_nowait())
            self._inbox = None  # an idle socket keeps no list
        except Exception:
            # As a handler's error ended the consumer under Channels: logged, the socket closed.
            logger.exception("a socket could not handle a layer message")
            self.live = False
            await self.close(code=1011)
        finally:
            self._handling = None
