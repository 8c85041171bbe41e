"""Triggers: a prompt run as its owner when a program posts to the trigger's URL (docs/protocol.md,
"Triggers"). The secret is never stored as it is (chat.scheduling.triggers)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone as django_time


class Trigger(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="triggers")
    name = models.CharField(max_length=100)
    # The user message's template: every `{{payload}}` is replaced by the posted body.
    prompt = models.TextField()
    # Null: the environment's agent ("default"). PROTECT as a conversation's: the admin disables a profile.
    agent = models.ForeignKey("chat.AgentProfile", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    # Null: each call starts a new conversation (a schedule's rule, chat.models.schedules).
    conversation_id = models.UUIDField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    # The hex SHA-256 of the secret (a bearer value is compared with it), and the secret encrypted
    # with a key derived from SECRET_KEY (a signature is checked with it): a copy of the database
    # alone passes no hook's check.
    secret_digest = models.CharField(max_length=64)
    secret_sealed = models.TextField()
    created_at = models.DateTimeField(default=django_time.now, editable=False)
    updated_at = models.DateTimeField(default=django_time.now)
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_run = models.ForeignKey("chat.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # What its newest call did: `running` (its run's own status is read instead) or a refusal's code.
    last_status = models.CharField(max_length=32, null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "Triggers"

    def __str__(self) -> str:
        return self.name
