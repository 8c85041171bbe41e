"""Schedules: a prompt run as its owner at set times (docs/protocol.md, "Schedules"). The slot to
fire next is `next_run_at`; the process that moves it on (a compare-and-set) fires that slot
(chat.scheduling.firing)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone as django_time


class Schedule(models.Model):
    class Status(models.TextChoices):
        """What a schedule's newest slot did (`running`: its run's own status is read instead)."""

        RUNNING = "running"
        INTERRUPTED = "interrupted"  # claimed, and the claiming process died before the run started
        SKIPPED_RUNNING = "skipped_running"
        MISSED = "missed"
        OWNER_INACTIVE = "owner_inactive"
        AGENT_UNAVAILABLE = "agent_unavailable"
        RATE_LIMITED = "rate_limited"
        QUOTA_EXCEEDED = "quota_exceeded"
        RUN_IN_PROGRESS = "run_in_progress"
        NOT_FOUND = "not_found"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="schedules")
    name = models.CharField(max_length=100)
    prompt = models.TextField()
    # Exactly one of the three timings.
    cron = models.CharField(max_length=200, null=True, blank=True)
    every = models.PositiveIntegerField(null=True, blank=True)  # seconds
    at = models.DateTimeField(null=True, blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    # Null: the environment's agent ("default"). PROTECT as a conversation's: the admin disables a profile.
    agent = models.ForeignKey("chat.AgentProfile", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    # Null: each fire starts a new conversation. Not a foreign key: a deleted conversation must be
    # told apart from "new" (its slot ends `not_found` and disables the schedule).
    conversation_id = models.UUIDField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    webhook_url = models.CharField(max_length=2000, null=True, blank=True)
    # The webhook's secret, encrypted (chat.scheduling.webhooks); "" without a webhookUrl.
    webhook_secret = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=django_time.now, editable=False)
    updated_at = models.DateTimeField(default=django_time.now)
    # From when `every` counts its slots: when it was set or the schedule last enabled.
    anchor_at = models.DateTimeField(default=django_time.now)
    next_run_at = models.DateTimeField(null=True, blank=True, db_index=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_run = models.ForeignKey("chat.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    last_status = models.CharField(max_length=32, choices=Status.choices, null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "Schedules"

    def __str__(self) -> str:
        return self.name
