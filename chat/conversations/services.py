"""Writes of conversations over HTTP: create, rename, choose the agent, the version viewed, pin
and archive, delete; and the feedback on a run. Keyword-only and typed; each is one transaction."""

from __future__ import annotations

import uuid

from django.utils import timezone

from chat.agent.text import clean
from chat.eventlog.reads import is_user_message
from chat.exceptions import NotAUserMessage
from chat.models import (
    AgentProfile,
    Conversation,
    Feedback,
    Run,
    TitleSource,
)

TITLE_MAX = 200


FEEDBACK_COMMENT_MAX = 2000


def conversation_create(
    *,
    owner,
    title: str = "",
    agent: AgentProfile | None = None,
    source: str = "",
    title_source: str = TitleSource.DEFAULT,
    conversation_id: uuid.UUID | None = None,
) -> Conversation:
    """`agent`: a profile the owner may use (chat.agents.selectors.agent_chosen checked it); None:
    the default agent. `source`: Conversation.source ("api" for the OpenAI-compatible endpoint's).
    `title_source`: USER for a title the user gave; DEFAULT for one that stands in (the API's
    first message), which the title generated after the first answer replaces. `conversation_id`:
    its id when the door derives it (an AG-UI thread's, docs/protocol.md "AG-UI"); else a new one."""
    return Conversation.objects.create(
        **({"id": conversation_id} if conversation_id is not None else {}),
        owner=owner,
        title=clean(title.strip()[:TITLE_MAX]),
        agent=agent,
        source=source,
        title_source=title_source,
    )


def conversation_set_agent(*, conversation: Conversation, agent: AgentProfile | None) -> Conversation:
    """The agent of the conversation's next runs; the runs so far keep the one they used."""
    conversation.agent = agent
    conversation.updated_at = timezone.now()
    conversation.save(update_fields=["agent", "updated_at"])
    return conversation


def conversation_rename(*, conversation: Conversation, title: str) -> Conversation:
    """The user's title: from now on no generated title replaces it."""
    conversation.title = clean(title.strip()[:TITLE_MAX])
    conversation.title_source = TitleSource.USER
    conversation.updated_at = timezone.now()
    conversation.save(update_fields=["title", "title_source", "updated_at"])
    return conversation


def conversation_organize(*, conversation: Conversation, pinned: bool | None, archived: bool | None) -> Conversation:
    """Pin or unpin, archive or unarchive (None: unchanged). Organizing is not activity:
    `updated_at` stays, so the conversation keeps its place among the others."""
    fields = []
    if pinned is not None:
        conversation.pinned = pinned
        fields.append("pinned")
    if archived is not None:
        conversation.archived = archived
        fields.append("archived")
    if fields:
        conversation.save(update_fields=fields)
    return conversation


def conversation_view_version(*, conversation: Conversation, seq: int | None) -> Conversation:
    """Keep the version the owner chose to view (the seq of a user_message; None: the newest
    branch) for their next load, on any device; NotAUserMessage for any other seq. Choosing
    a version is not activity: `updated_at` stays, so the conversation keeps its place."""
    if seq is not None and not is_user_message(conversation_id=conversation.pk, seq=seq):
        raise NotAUserMessage(f"seq {seq} is not a user_message of this conversation")
    conversation.viewed_seq = seq
    conversation.save(update_fields=["viewed_seq"])
    return conversation


def conversation_delete(*, conversation: Conversation) -> None:
    conversation.delete()


def feedback_set(*, run: Run, user, rating: int, comment: str = "") -> Feedback:
    """The user's rating of a run's answer: one per run, the newest replacing the one before."""
    feedback, _ = Feedback.objects.update_or_create(
        run=run,
        defaults={"user": user, "rating": rating, "comment": clean(comment.strip()), "updated_at": timezone.now()},
    )
    return feedback
