"""Notifications: what happened while nobody watched, told to the owner (docs/protocol.md,
"Notifications"). A run's notification is made once whatever the number of processes: the
unique constraint on (run, kind, toolCallId) lets the second maker's insert fail."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class Notification(models.Model):
    class Kind(models.TextChoices):
        RUN_FINISHED = "run_finished"
        APPROVAL_WAITING = "approval_waiting"
        SCHEDULE_FAILED = "schedule_failed"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    kind = models.CharField(max_length=32, choices=Kind.choices)
    title = models.CharField(max_length=200, blank=True, default="")
    body = models.TextField(blank=True, default="")
    # Gone with its conversation: a notification that opens nothing is not kept.
    conversation = models.ForeignKey(
        "chat.Conversation", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    run = models.ForeignKey("chat.Run", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    # Ids, not keys: a deleted schedule or trigger leaves what it did told.
    schedule_id = models.UUIDField(null=True, blank=True)
    trigger_id = models.UUIDField(null=True, blank=True)
    status = models.CharField(max_length=32, blank=True, default="")  # run_finished: the run's
    code = models.CharField(max_length=32, blank=True, default="")  # schedule_failed: the refusal's
    tool_call_id = models.CharField(max_length=200, blank=True, default="")  # approval_waiting
    tool_name = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    read = models.BooleanField(default=False)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "kind", "tool_call_id"],
                condition=Q(run__isnull=False),
                name="one_notification_per_run_event",
            )
        ]
        indexes = [
            models.Index(fields=["owner", "-id"], name="notification_owner_newest"),
            models.Index(fields=["owner", "read"], name="notification_owner_read"),
        ]

    def __str__(self) -> str:
        return f"{self.kind}: {self.title}"
