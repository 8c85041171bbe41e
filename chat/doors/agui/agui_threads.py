"""AG-UI threads as the user's conversations (docs/protocol.md, "AG-UI"): the reads and writes
of the AG-UI door, each run in the request's thread (serving.loop_middleware.request_db).

A threadId is a conversation id of the user, or an id the client made up: its conversation's id
is then derived from the user and the threadId (UUID 5), so that the first run makes it and
later runs find it again with no table of their own, and two users' made-up ids never meet."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction

from chat.agents.selectors import agent_chosen
from chat.conversations.services import conversation_create, conversation_delete
from chat.eventlog.frames import CHILD_KEY
from chat.eventlog.reads import run_events, run_in_progress, runs_memory_events, user_message_rows
from chat.eventlog.turns import first_message_title
from chat.models import AGUI_SOURCE, DEFAULT_AGENT_SLUG, Conversation, Event
from chat.runs.client_frames import ProtocolError, already_answered

# The namespace of the conversation ids derived from made-up thread ids.
THREADS = uuid.UUID("5b0c7c1e-8a52-4d0e-9a7e-6a1f1f0a9c3d")
INTERRUPT_ID = re.compile(r"call_([0-9a-f]{32})_([0-9]+)")


class Foreign:
    """Another user's conversation: answered as a missing one, never touched."""


FOREIGN = Foreign()


def thread_key(*, user, thread_id: str) -> uuid.UUID:
    return uuid.uuid5(THREADS, f"{user.pk}/{thread_id}")


def slug_of(conversation: Conversation) -> str:
    return conversation.agent.slug if conversation.agent is not None else DEFAULT_AGENT_SLUG


def thread_conversation(*, user, thread_id: str) -> Conversation | Foreign | None:
    """The conversation of a thread: the user's conversation of that id, or the one the user's
    made-up id stands for; FOREIGN for another user's conversation; None when there is none yet."""
    try:
        named = uuid.UUID(thread_id)
    except ValueError:
        named = None
    rows = Conversation.objects.select_related("agent")
    for candidate in (named, thread_key(user=user, thread_id=thread_id)):
        if candidate is None:
            continue
        found = rows.filter(pk=candidate).first()
        if found is not None:
            return found if found.owner_id == user.pk else FOREIGN
    return None


def agent_open(*, user, slug: str) -> bool:
    """Whether the user may run the agent `slug`."""
    try:
        agent_chosen(user=user, slug=slug)
    except (LookupError, ValueError):
        return False
    return True


def open_thread(*, user, slug: str, thread_id: str) -> tuple[bool, Conversation | Foreign | None]:
    """Whether the user may run the agent `slug` and, when so, the thread's conversation
    (thread_conversation): a request's two look-ups in one trip."""
    if not agent_open(user=user, slug=slug):
        return False, None
    return True, thread_conversation(user=user, thread_id=thread_id)


def new_thread(*, user, thread_id: str, slug: str, content: str) -> Conversation | None:
    """The conversation of a made-up thread id, made now (source "agui", titled by its first
    message); None when the user may not use the agent. Two first runs at once: one makes it."""
    try:
        agent = agent_chosen(user=user, slug=slug)
    except (LookupError, ValueError):
        return None
    key = thread_key(user=user, thread_id=thread_id)
    try:
        with transaction.atomic():
            return conversation_create(
                owner=user,
                title=first_message_title(content),
                agent=agent,
                source=AGUI_SOURCE,
                conversation_id=key,
            )
    except IntegrityError:
        return Conversation.objects.select_related("agent").get(pk=key, owner=user)


def discard(conversation: Conversation) -> None:
    """A thread's conversation made for a run that was refused goes again: nothing is left."""
    conversation_delete(conversation=conversation)


@dataclass
class ThreadState:
    """A thread as it stands: its newest run's id and user_message, the seq up to which it was
    read, the stored events of its newest branch and those of the run (both up to that seq)."""

    last_seq: int
    run_id: Any = None
    user_message: dict[str, Any] = field(default_factory=dict)
    branch: list[dict[str, Any]] = field(default_factory=list)
    run: list[dict[str, Any]] = field(default_factory=list)


def thread_state(*, conversation: Conversation) -> ThreadState:
    last_seq = Conversation.objects.filter(pk=conversation.pk).values_list("last_seq", flat=True).first() or 0
    rows = user_message_rows(conversation_ids=[conversation.pk]).get(conversation.pk, [])
    if not rows:
        return ThreadState(last_seq)
    run_id = rows[-1][1]
    branch = [f for f in runs_memory_events(runs={conversation.pk: run_id})[conversation.pk] if f["seq"] <= last_seq]
    own = [f for f in branch if f.get("runId") == str(run_id) and CHILD_KEY not in f]
    return ThreadState(last_seq, run_id, own[0] if own else {}, branch, own)


@dataclass
class Answering:
    """The run a resume answers: the calls (its toolCallId, the AG-UI id and the entry) and its
    events up to its newest approval request (the stream goes on after it)."""

    run_id: Any
    calls: list[tuple[str, str, Any]]
    before: list[dict[str, Any]]


def answering(*, conversation: Conversation, entries) -> Answering:
    """Check each resume entry against the thread's pending approval requests: one naming no
    request of this thread is BAD_REQUEST, one already answered ALREADY_ANSWERED."""
    run, pending = run_in_progress(conversation_id=conversation.pk)
    calls = []
    for entry in entries:
        named = INTERRUPT_ID.fullmatch(entry.interrupt_id)
        asked = (
            Event.objects.filter(conversation_id=conversation.pk, seq=int(named.group(2)), type="approval_request")
            .values_list("run_id", "payload")
            .first()
            if named
            else None
        )
        if asked is None or uuid.UUID(str(asked[0])).hex != named.group(1):  # type: ignore[union-attr]
            raise ProtocolError(
                "BAD_REQUEST", "No interrupt of this thread has that id.", f"unknown interruptId {entry.interrupt_id}"
            )
        tool_call_id = asked[1].get("toolCallId", "")
        if run is None or str(asked[0]) != str(run.pk) or tool_call_id not in pending:
            raise already_answered()
        calls.append((tool_call_id, entry.interrupt_id, entry))
    events = run_events(conversation_id=conversation.pk, run_id=run.pk)  # type: ignore[union-attr]
    cut = max(f["seq"] for f in events if f["type"] == "approval_request")
    return Answering(run.pk, calls, [f for f in events if f["seq"] <= cut])  # type: ignore[union-attr]
