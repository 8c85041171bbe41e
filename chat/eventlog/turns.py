"""A start's turn in the conversation's version tree (docs/protocol.md,
"Versions: edits, regenerated answers and branches"): the user_message payload a start stores, with the turn it
follows and the message it edits or regenerates, read from the event log for a group of starts
at once; and an untitled conversation's first title. The start itself (its rules, its rows) is
chat.runs.starts's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import Max, OuterRef, Q, Subquery

from chat.agent.events import UserMessageEvent
from chat.agent.text import clean
from chat.eventlog.append import conversation_key
from chat.eventlog.frames import CHILD_KEY
from chat.eventlog.types import RunStart
from chat.exceptions import NotAUserMessage
from chat.models import DEFAULT_AGENT_NAME, DEFAULT_AGENT_SLUG, Conversation, Event, Run

# An untitled conversation's title until one is generated or given (docs/protocol.md, "Titles, pinning, archiving").
FIRST_MESSAGE_TITLE_CHARS = 60


def first_message_title(content: str) -> str:
    """An untitled conversation's title: its first message, whitespace collapsed, cut at 60 characters."""
    return clean(" ".join(content.split())[:FIRST_MESSAGE_TITLE_CHARS].rstrip())


def first_turn_text(turn: dict[str, Any]) -> str:
    """What a first message says: its text, or the names of its files when they came alone."""
    return turn["content"] or ", ".join(file["path"] for file in turn.get("attachments") or ())


def with_agent(turn: dict[str, Any], run: Run) -> dict[str, Any]:
    """The user_message that starts a run names the agent and model that answer it (PROTOCOL
    section 6), so the page labels each answer, and renaming or deleting a profile later
    changes nothing of what the log says."""
    profile = run.agent
    if profile is None:
        return {**turn, "agent": DEFAULT_AGENT_SLUG, "agentName": DEFAULT_AGENT_NAME, "model": run.model}
    return {**turn, "agent": profile.slug, "agentName": profile.name, "model": run.model}


def start_turns(starts: list[RunStart]) -> list[dict[str, Any] | Exception]:
    """Each start's user_message payload, with its place among the versions (docs/protocol.md, "Versions: edits, regenerated answers and branches"):
    `parentSeq` always, `edits` / `regenerates` when it is one; or NotAUserMessage. Two queries
    for the group whatever its size (the user_messages it names, the newest of each conversation
    whose message follows the newest), and one more per edit of a message stored before
    versions existed."""
    named = [
        (conversation_key(s.message.conversation.pk), s.message.named_seq)
        for s in starts
        if s.message.named_seq is not None
    ]
    found: dict[tuple[Any, int], dict[str, Any]] = {}
    if named:
        where = Q()
        for key, seq in named:
            where |= Q(conversation_id=key, seq=seq)
        found = {
            (conversation_id, seq): payload
            for conversation_id, seq, payload in Event.objects.filter(where, type="user_message")
            .exclude(payload__has_key=CHILD_KEY)
            .values_list("conversation_id", "seq", "payload")
        }
    following = {conversation_key(s.message.conversation.pk) for s in starts if s.message.named_seq is None}
    newest: dict[Any, int | None] = {}
    if following:
        # The newest through the user_message index backwards, one row per conversation: a MAX
        # per group would read every turn of the conversation (7.6 ms at 10,000 turns, idle).
        latest = (
            Event.objects.filter(conversation=OuterRef("pk"), type="user_message")
            .exclude(payload__has_key=CHILD_KEY)
            .order_by("-seq")
        )
        newest = dict(
            Conversation.objects.filter(pk__in=following)
            .annotate(newest=Subquery(latest.values("seq")[:1]))
            .values_list("pk", "newest")
        )
    out: list[dict[str, Any] | Exception] = []
    for message in (start.message for start in starts):
        key, seq = conversation_key(message.conversation.pk), message.named_seq
        if seq is None:
            payload = user_message_payload(
                message.content, parent_seq=newest.get(key), attachments=message.attachments, history=message.history
            )
            if message.queue_id is not None:
                payload["queueId"] = message.queue_id
            out.append(_with_door(payload, message))
            continue
        named_payload = found.get((key, seq))
        if named_payload is None:
            out.append(NotAUserMessage(f"seq {seq} is not a user_message of this conversation"))
        elif message.parent_seq is not None:
            out.append(
                _with_door(
                    user_message_payload(
                        message.content, parent_seq=seq, attachments=message.attachments, history=message.history
                    ),
                    message,
                )
            )
        else:
            # An edit or regenerate takes the place of the named message: it follows the same
            # turn, with the same files attached.
            version = {"edits": seq} if message.edits is not None else {"regenerates": seq}
            content = message.content if message.edits is not None else named_payload.get("content", "")
            out.append(
                user_message_payload(
                    content,
                    parent_seq=_parent_of(key, seq, named_payload),
                    attachments=named_payload.get("attachments") or (),
                    **version,
                )
            )
    return out


def user_message_payload(
    content: str,
    *,
    parent_seq: int | None,
    attachments: Sequence[dict[str, Any]] = (),
    history: Sequence[dict[str, Any]] = (),
    **version: int,
) -> dict[str, Any]:
    """A start's user_message payload, before the agent that answers it is named (_with_agent);
    a head start predicts its run's memory from it (chat.runtime.head_start)."""
    message = {**UserMessageEvent(content).to_dict(), "parentSeq": parent_seq, **version}
    if attachments:
        message["attachments"] = list(attachments)
    if history:
        message["history"] = list(history)
    return message


def _with_door(payload: dict[str, Any], message) -> dict[str, Any]:
    """The door that started the run, when not a person's (docs/protocol.md, "Schedules" and
    "Responses API"): `via`, and what it was asked besides the message."""
    if message.schedule_id is not None:
        payload["scheduleId"], payload["via"] = str(message.schedule_id), "schedule"
    if message.trigger_id is not None:
        payload["triggerId"], payload["via"] = str(message.trigger_id), "trigger"
    if message.via is not None:
        payload["via"] = message.via
    if message.request is not None:
        payload["request"] = message.request
    return payload


def _parent_of(conversation_key, seq: int, payload: dict[str, Any]) -> int | None:
    """The parentSeq of a stored user_message; one stored before versions existed follows the
    user_message before it (an old conversation is one linear branch)."""
    if "parentSeq" in payload:
        parent = payload["parentSeq"]
        return parent if isinstance(parent, int) and not isinstance(parent, bool) else None
    rows = Event.objects.filter(conversation_id=conversation_key, type="user_message", seq__lt=seq)
    return rows.exclude(payload__has_key=CHILD_KEY).aggregate(previous=Max("seq"))["previous"]
