"""Conversations, and what is kept per conversation of its runs: their search documents and the user's feedback."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

# Conversation.source of a conversation started by the OpenAI-compatible endpoint.
API_SOURCE = "api"
# Conversation.source of a conversation the AG-UI door started for a thread (docs/protocol.md, "AG-UI").
AGUI_SOURCE = "agui"
# Conversation.source of a conversation a schedule's fire started (docs/protocol.md, "Schedules").
SCHEDULE_SOURCE = "schedule"
# Conversation.source of a conversation a trigger's call started (docs/protocol.md, "Triggers").
TRIGGER_SOURCE = "trigger"
# Conversation.source of a conversation an A2A SendMessage started (docs/protocol.md, "A2A agent").
A2A_SOURCE = "a2a"


class TitleSource(models.TextChoices):
    """Who named a conversation: nobody yet (its first message stands in), a model, or the user."""

    DEFAULT = "default"
    GENERATED = "generated"
    USER = "user"


class Conversation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations")
    title = models.CharField(max_length=200, blank=True, default="")
    title_source = models.CharField(max_length=16, choices=TitleSource.choices, default=TitleSource.DEFAULT)
    pinned = models.BooleanField(default=False)  # listed first
    archived = models.BooleanField(default=False)  # left out of the list unless asked for
    # Null: the environment's configuration (the "default" agent). PROTECT: deleting a profile in use
    # would silently move its conversations to another model and endpoint; the admin disables it instead.
    agent = models.ForeignKey(
        "chat.AgentProfile", null=True, blank=True, on_delete=models.PROTECT, related_name="conversations"
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)
    # The last seq handed out; bumped with UPDATE ... SET last_seq = last_seq + n, whose
    # row lock serialises allocators across processes until their events are committed.
    last_seq = models.PositiveBigIntegerField(default=0, editable=False)
    # The seq of the user_message whose version the owner chose to view (‹ ›), so that a
    # reload or another device shows the same branch; null: the newest branch. A new run
    # clears it: the turn it adds is the one to show.
    viewed_seq = models.PositiveBigIntegerField(null=True, blank=True)
    # Where it was started: "" the chat page (or the API's conversation routes), "api" a call of
    # the OpenAI-compatible endpoint (docs/protocol.md, "OpenAI-compatible endpoint").
    source = models.CharField(max_length=16, blank=True, default="")
    # The schedule that started it (source "schedule"); null once that schedule is deleted.
    schedule = models.ForeignKey(
        "chat.Schedule", null=True, blank=True, on_delete=models.SET_NULL, related_name="conversations"
    )
    # The trigger that started it (source "trigger"); null once that trigger is deleted.
    trigger = models.ForeignKey(
        "chat.Trigger", null=True, blank=True, on_delete=models.SET_NULL, related_name="conversations"
    )

    class Meta:
        ordering = ["-updated_at"]
        # The list's query: the owner's archived or not, pinned first, newest first (chat.conversations.paging).
        indexes = [models.Index(fields=["owner", "archived", "-pinned", "-updated_at"], name="conversation_owner_list")]

    def __str__(self) -> str:
        return self.title or f"Conversation {str(self.id)[:8]}"


class SearchDocument(models.Model):
    """What a finished run shows as text (its user message and its answer), for `?q=` search.

    One row per run, written once when the run completes (and at import), never per delta:
    the event writer's hot path stays as it was. The full-text index over `body` is the
    database's own (chat.eventlog.search): a GIN over to_tsvector on PostgreSQL, an FTS5 table kept by
    triggers on SQLite, both created by migration 0003.
    """

    run = models.OneToOneField("chat.Run", on_delete=models.CASCADE, related_name="search_document")
    conversation = models.ForeignKey("chat.Conversation", on_delete=models.CASCADE, related_name="search_documents")
    body = models.TextField()
    # The user's words alone (the run's user messages, also in `body`): a hit in them ranks first.
    asked = models.TextField(default="")

    def __str__(self) -> str:
        return f"Search document of run {str(self.run_id)[:8]}"


class Feedback(models.Model):
    """The owner's thumbs up or down on one answer (a run), with an optional comment; one per run,
    replaced when the owner changes their mind."""

    class Rating(models.IntegerChoices):
        UP = 1
        DOWN = -1

    run = models.OneToOneField("chat.Run", on_delete=models.CASCADE, related_name="feedback")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="feedback")
    rating = models.SmallIntegerField(choices=Rating.choices)
    comment = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["rating", "-updated_at"], name="feedback_rating_recent")]

    def __str__(self) -> str:
        return f"{'+1' if self.rating > 0 else '-1'} on run {str(self.run_id)[:8]}"
