"""Writes of conversations over HTTP: create, rename, choose the agent, the version viewed,
delete; and the feedback on a run. Keyword-only and typed; each is one transaction."""

from __future__ import annotations

from django.utils import timezone

from chat.agent.text import clean
from chat.eventlog.reads import is_user_message
from chat.exceptions import NotAUserMessage
from chat.models import (
    AgentProfile,
    Conversation,
    Feedback,
    Run,
)

TITLE_MAX = 200


FEEDBACK_COMMENT_MAX = 2000


def conversation_create(*, owner, title: str = "", agent: AgentProfile | None = None, source: str = "") -> Conversation:
    """`agent`: a profile the owner may use (the caller checked it); None: the default agent.
    `source`: Conversation.source ("api" for the OpenAI-compatible endpoint's)."""
    return Conversation.objects.create(owner=owner, title=clean(title.strip()[:TITLE_MAX]), agent=agent, source=source)


def conversation_set_agent(*, conversation: Conversation, agent: AgentProfile | None) -> Conversation:
    """The agent of the conversation's next runs; the runs so far keep the one they used."""
    conversation.agent = agent
    conversation.updated_at = timezone.now()
    conversation.save(update_fields=["agent", "updated_at"])
    return conversation


def conversation_rename(*, conversation: Conversation, title: str) -> Conversation:
    conversation.title = clean(title.strip()[:TITLE_MAX])
    conversation.updated_at = timezone.now()
    conversation.save(update_fields=["title", "updated_at"])
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
