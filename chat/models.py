"""Conversations, runs and the event log.

The event log is the single source of truth: what a user saw, what the admin
inspects and what the model is sent as memory (chat.history derives the model's
messages from the events) all come from `Event` rows. `ToolRecord` is a
queryable index of the tool calls, written from the same tool_end events.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from .frames import EventFrame, event_frame

# The partial unique index that allows one running run per conversation.
RUNNING_RUN_CONSTRAINT = "one_running_run_per_conversation"


class Conversation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations")
    title = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)
    # The last seq handed out; bumped with UPDATE ... SET last_seq = last_seq + n, whose
    # row lock serialises allocators across processes until their events are committed.
    last_seq = models.PositiveBigIntegerField(default=0, editable=False)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["owner", "-updated_at"], name="conversation_owner_recent")]

    def __str__(self) -> str:
        return self.title or f"Conversation {str(self.id)[:8]}"


class Run(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"
        INTERRUPTED = "interrupted"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="runs")
    # Who sent the message: the conversation's owner today, kept per run for per-user limits.
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    model = models.CharField(max_length=200, blank=True, default="")
    iterations = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    total_tokens = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    heartbeat_at = models.DateTimeField(default=timezone.now)
    # The channel of the server process running it: cancel requests are sent there.
    worker = models.CharField(max_length=200, blank=True, default="")
    cancel_requested = models.BooleanField(default=False)
    # Times the run was continued by another process after its own died (AGENT_MAX_RESUMES).
    resumes = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["-started_at"]
        constraints = [
            models.UniqueConstraint(fields=["conversation"], condition=Q(status="running"), name=RUNNING_RUN_CONSTRAINT)
        ]
        indexes = [
            models.Index(fields=["status", "heartbeat_at"], name="run_status_heartbeat"),
            models.Index(fields=["user", "started_at"], name="run_user_started"),
        ]

    def __str__(self) -> str:
        return f"Run {str(self.id)[:8]} ({self.status})"


class Event(models.Model):
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="events")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveBigIntegerField()
    type = models.CharField(max_length=32)
    # The event's protocol JSON without seq and runId, which are columns.
    payload = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["conversation", "seq"]
        constraints = [
            # Also the index behind "events of a conversation after seq N".
            models.UniqueConstraint(fields=["conversation", "seq"], name="event_seq_unique_per_conversation")
        ]
        indexes = [models.Index(fields=["run", "seq"], name="event_run_seq")]

    def __str__(self) -> str:
        return f"#{self.seq} {self.type}"

    def to_frame(self) -> EventFrame:
        return event_frame(self.payload, seq=self.seq, run_id=self.run_id)


class ToolRecord(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tool_records")
    tool_call_id = models.CharField(max_length=200)
    tool_name = models.CharField(max_length=200)
    arguments = models.TextField(blank=True, default="")
    result = models.TextField(blank=True, default="")
    is_error = models.BooleanField(default=False)
    started_at = models.DateTimeField(default=timezone.now)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["started_at"]
        indexes = [models.Index(fields=["started_at"], name="toolrecord_started")]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.tool_call_id})"


class Feedback(models.Model):
    """The owner's thumbs up or down on one answer (a run), with an optional comment; one per run,
    replaced when the owner changes their mind."""

    class Rating(models.IntegerChoices):
        UP = 1
        DOWN = -1

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="feedback")
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
