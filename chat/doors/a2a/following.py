"""A task followed as its run's events are stored (docs/protocol.md, "A2A agent", *Streams*): the
conversation's stream (chat.realtime.follow.Stream, joined before anything is read or started)
handed to a TaskRender, whichever process runs the run. A follower stops at the run's
`complete` or, once past what it was started from, at an approval request (the task waits for
input); a client that goes away stops only its follower, never the run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from chat.doors.a2a.tasks import StreamEvent, TaskRender
from chat.models import Conversation
from chat.realtime.follow import Stream
from chat.runs import engine
from chat.runs.requests import StartRun


@dataclass(frozen=True)
class Door:
    """Who calls which agent: the token's user, the token, the endpoint's agent (None: `default`)
    and the request's scope (its send buffer is given up on for a slow streaming client)."""

    user: Any
    token_id: int
    profile: Any
    slug: str
    origin: str
    scope: dict

    @property
    def agent_id(self) -> int | None:
        return self.profile.pk if self.profile is not None else None


class Follower:
    """The events of one run of `conversation` stored after `after`, rendered by `render`."""

    def __init__(
        self, door: Door, conversation: Conversation, render: TaskRender, *, after: int, new: bool, streamed: bool
    ):
        self.render = render
        self.stream = Stream(
            conversation=conversation,
            user=door.user,
            token_id=door.token_id,
            session_key=None,
            after=after,
            until_complete=True,
            new=new,
            scope=door.scope if streamed else None,
        )
        self._frames = self.stream.frames()
        self._early: list[StreamEvent] = []

    async def join(self) -> None:
        """Joined before the caller starts or answers anything: every later event reaches it."""
        try:
            self._early = self._add(await anext(self._frames))
        except BaseException:
            await self.aclose()
            raise

    async def start(self, request: StartRun):
        """The run started once joined; a refused start leaves the stream at once."""
        await self.join()
        try:
            run, _ = await engine.start(request)
        except BaseException:
            await self.aclose()
            raise
        self.render.run_id = str(run.pk)
        return run

    def _add(self, frame: dict[str, Any] | bytes) -> list[StreamEvent]:
        return [] if isinstance(frame, bytes) else self.render.add(frame)

    async def events(self) -> AsyncIterator[StreamEvent]:
        """The stream events of the run, until it completes or asks for approval; the stream is
        left when they end or the caller stops reading."""
        try:
            for event in self._early:
                yield event
            if self.render.finished:
                return
            async for frame in self._frames:
                if self.stream.behind:
                    break
                for event in self._add(frame):
                    yield event
                if self.render.finished or (self.render.waiting and _asks(frame, self.render)):
                    break
        finally:
            await self.aclose()

    async def to_rest(self) -> None:
        """Follow without sending: to the run's end or its next approval request."""
        async with aclosing(self.events()) as events:
            async for _ in events:
                pass

    async def aclose(self) -> None:
        await self._frames.aclose()


def _asks(frame: dict[str, Any] | bytes, render: TaskRender) -> bool:
    return isinstance(frame, dict) and frame.get("type") == "approval_request" and frame.get("runId") == render.run_id
