"""The reads of sockets that connect together, done together (chat.runtime.batching.Batcher).

A restarted server's pages all reconnect within a few seconds (the page's first wait is 0.25-2.25 s).
One by one, each socket took two trips to the ORM thread and six queries: its session, its user,
its conversation, then its history after `after`, the run under way and the waiting messages. At
10,000 sockets the storm queued on that thread for a minute (docs/performance.md, "10,000 idle
sockets and a reconnect storm"). Here the handshakes waiting while a round is read form the next
round, read in one trip: the sessions in one query and their users in another
(chat.accounts.session_users), the conversations in one. After each socket has joined its groups,
the syncs waiting form rounds alike: the last seq of every conversation in one query, a history
read only for a socket whose `after` is behind it, and the run and queue state in two queries
(eventlog.reads.sync_states). When the layer answers again after an outage every socket
re-checks its credential (a revocation pushed meanwhile was lost): those re-checks form rounds
too. A round reads at most SLICE sockets per query (SQLite bounds a query's parameters).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from channels.db import database_sync_to_async

from chat.accounts.bearer import socket_bearer
from chat.accounts.held_credentials import HeldCredential
from chat.accounts.session_users import session_users
from chat.agent.batching import Batcher
from chat.agent.perloop import PerLoop
from chat.doors.socket.credentials import SignedIn, session_cookie, signed_in
from chat.eventlog.reads import EVENT_PAGE, events_after, last_seqs, sync_states
from chat.models import Conversation

SLICE = 500

T = TypeVar("T")
R = TypeVar("R")

# What `sync` says (eventlog.reads.sync_state): the run under way, its open approvals, the
# waiting messages and the pending steers.
SyncState = tuple[Any, list[str], list[str], list[str]]


@dataclass(frozen=True, slots=True)
class Handshake:
    scope: dict
    conversation_id: Any


@dataclass(frozen=True, slots=True)
class Resume:
    conversation_id: Any
    after: int


def _in_slices(read: Callable[[list[T]], list[R]]) -> Callable[[list[T]], list[R]]:
    @functools.wraps(read)
    def sliced(items: list[T]) -> list[R]:
        return [out for start in range(0, len(items), SLICE) for out in read(items[start : start + SLICE])]

    return sliced


@_in_slices
def _sign_in(handshakes: list[Handshake]) -> list[tuple[SignedIn | None, Conversation | None]]:
    """Who each handshake signs in as and, if anyone, their conversation (None: not theirs or
    gone): a token's socket as before (chat.doors.socket.credentials), the sessions together."""
    tokens = {i: signed_in(h.scope) for i, h in enumerate(handshakes) if socket_bearer(h.scope) is not None}
    keys = {i: session_cookie(h.scope) for i, h in enumerate(handshakes) if i not in tokens}
    users = session_users(keys.values())
    signed: list[SignedIn | None] = []
    for i in range(len(handshakes)):
        if i in tokens:
            signed.append(tokens[i])
            continue
        user = users.get(keys[i] or "")
        # A copy each: the sockets of one session keep a user of their own, as they did.
        signed.append(SignedIn(copy.copy(user), keys[i], None) if user is not None else None)
    wanted = [h.conversation_id for h, s in zip(handshakes, signed) if s is not None]
    conversations = {c.pk: c for c in Conversation.objects.filter(pk__in=wanted)} if wanted else {}
    out: list[tuple[SignedIn | None, Conversation | None]] = []
    for handshake, who in zip(handshakes, signed):
        conversation = conversations.get(handshake.conversation_id) if who is not None else None
        if conversation is not None and conversation.owner_id != who.user.pk:
            conversation = None
        elif conversation is not None:
            conversation = copy.copy(conversation)  # each socket its own, as it had
        out.append((who, conversation))
    return out


@_in_slices
def _resume(resumes: list[Resume]) -> list[tuple[list[dict[str, Any]], SyncState | None]]:
    """Each socket's first page of history after `after` and, once it is the last page, what
    `sync` says (None while more pages follow): the history first, then the state, as one socket
    read them."""
    last = last_seqs(conversation_ids=[r.conversation_id for r in resumes])
    pages = [
        events_after(conversation_id=r.conversation_id, after=r.after, limit=EVENT_PAGE)
        if last.get(r.conversation_id, 0) > r.after
        else []
        for r in resumes
    ]
    done = [r.conversation_id for r, frames in zip(resumes, pages) if len(frames) < EVENT_PAGE]
    states = sync_states(conversation_ids=done) if done else {}
    return [
        (frames, states[r.conversation_id] if len(frames) < EVENT_PAGE else None) for r, frames in zip(resumes, pages)
    ]


def _batcher(read: Callable[[list[T]], list[R]], name: str) -> PerLoop[Batcher[T, R]]:
    async def process(items: list[T]) -> Sequence[R]:
        return await database_sync_to_async(read)(items)

    return PerLoop(lambda: Batcher(process, name=name))


@_in_slices
def _still_current(credentials: list[HeldCredential]) -> list[bool]:
    """Whether each credential still signs its user in (HeldCredential.is_current): the
    sessions' in two queries, a token's as before."""
    users = session_users(c.session_key for c in credentials if c.token_id is None)
    return [
        c.is_current() if c.token_id is not None else getattr(users.get(c.session_key or ""), "pk", None) == c.user_id
        for c in credentials
    ]


_sign_ins = _batcher(_sign_in, "socket-sign-ins")
_resumes = _batcher(_resume, "socket-resumes")
_rechecks = _batcher(_still_current, "socket-rechecks")


async def sign_in(scope, conversation_id) -> tuple[SignedIn | None, Conversation | None]:
    """Who the handshake signs in as, and their conversation: with the handshakes that came meanwhile."""
    return await _sign_ins.get().submit(Handshake(scope, conversation_id))


async def still_current(credential: HeldCredential) -> bool:
    """Whether the credential still holds, checked with the others asked meanwhile (every socket
    of the process asks when the layer comes back after an outage)."""
    return await _rechecks.get().submit(credential)


async def resume(conversation_id, after: int) -> tuple[list[dict[str, Any]], SyncState | None]:
    """The first page of the history after `after`, and the sync state once it is the last: with
    the sockets that joined meanwhile."""
    return await _resumes.get().submit(Resume(conversation_id, after))
