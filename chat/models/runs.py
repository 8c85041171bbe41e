"""Runs: one agent's work on one message, its tool calls, its model calls and the memory it left."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

# The partial unique index that allows one running run per conversation.
RUNNING_RUN_CONSTRAINT = "one_running_run_per_conversation"


class Run(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"
        INTERRUPTED = "interrupted"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey("chat.Conversation", on_delete=models.CASCADE, related_name="runs")
    # Who sent the message: the conversation's owner today, kept per run for per-user limits.
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    model = models.CharField(max_length=200, blank=True, default="")
    # The profile the run was built from (null: the environment's); `model` keeps the name it sent.
    agent = models.ForeignKey(
        "chat.AgentProfile", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
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
    # Made by an import (POST /api/conversations/import/): history a user wrote, not activity of
    # this server. Never counted in /metrics, the dashboard, usage, quotas or rate limits.
    imported = models.BooleanField(default=False)
    # The schedule that started it (docs/protocol.md, "Schedules"); kept null when the schedule is deleted.
    schedule = models.ForeignKey("chat.Schedule", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    # The trigger that started it (docs/protocol.md, "Triggers"); kept null when the trigger is deleted.
    trigger = models.ForeignKey("chat.Trigger", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    # A child run (docs/protocol.md, "Sub-agents"): the run whose delegate tool call started it, that
    # call's toolCallId, and how deep it nests (a top-level run: 0, no parent).
    parent = models.ForeignKey("chat.Run", null=True, blank=True, on_delete=models.CASCADE, related_name="children")
    parent_tool_call_id = models.CharField(max_length=200, blank=True, default="")
    depth = models.PositiveSmallIntegerField(default=0)
    # Tokens reserved against each budget that applies, from its admission to its end (docs/protocol.md,
    # "Budgets"); what its model calls used is taken off as it goes. Counted only while it runs.
    reserved_tokens = models.PositiveIntegerField(default=0)
    # The API token that started it (a token budget counts it); null: a session's.
    api_token = models.ForeignKey(
        "chat.ApiToken", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )

    class Meta:
        ordering = ["-started_at"]
        constraints = [
            # Top-level runs only: a child run overlaps its parent.
            models.UniqueConstraint(
                fields=["conversation"],
                condition=Q(status="running", parent__isnull=True),
                name=RUNNING_RUN_CONSTRAINT,
            )
        ]
        indexes = [
            models.Index(fields=["status", "heartbeat_at"], name="run_status_heartbeat"),
            models.Index(fields=["user", "started_at"], name="run_user_started"),
        ]

    def __str__(self) -> str:
        return f"Run {str(self.id)[:8]} ({self.status})"


class ToolRecord(models.Model):
    run = models.ForeignKey("chat.Run", on_delete=models.CASCADE, related_name="tool_records")
    tool_call_id = models.CharField(max_length=200)
    tool_name = models.CharField(max_length=200)
    arguments = models.TextField(blank=True, default="")
    result = models.TextField(blank=True, default="")
    is_error = models.BooleanField(default=False)  # the tool_end's isError: a failure or not approved
    # ok, error, denied or expired (chat.agent.approval.call_outcome): what figures count, where
    # a call the user denied, or nobody approved in time, is not a failure of its tool.
    outcome = models.CharField(max_length=16, default="ok")
    # The run offered a tool of this name: a name the model invented is no metric label (chat.ops.metrics).
    offered = models.BooleanField(default=True)
    started_at = models.DateTimeField(default=timezone.now)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["started_at"]
        indexes = [
            models.Index(fields=["started_at"], name="toolrecord_started"),
            # Covers the scrape's GROUP BY tool_name, outcome, offered (chat.ops.metrics): an index-only scan.
            models.Index(fields=["tool_name", "outcome", "offered"], name="toolrecord_tool_offered"),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.tool_call_id})"


class ModelCall(models.Model):
    """One model call attempt of a run, failed ones included (chat.agent.trace.ModelCallRecord)."""

    run = models.ForeignKey("chat.Run", on_delete=models.CASCADE, related_name="model_calls")
    # "agent": a call of the run's loop; "compaction": a summary of older turns (chat.agent.compaction);
    # "title": the conversation's title, asked after the run (chat.runtime.titles).
    purpose = models.CharField(max_length=16, default="agent")
    iteration = models.PositiveIntegerField()
    attempt = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    first_token_ms = models.PositiveIntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    message_count = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    total_tokens = models.PositiveIntegerField(default=0)
    finish_reason = models.CharField(max_length=64, blank=True, default="")
    error = models.TextField(blank=True, default="")
    # The tokens are an estimate (chat.agent.estimate): the call was cut by a Stop before the
    # endpoint reported them. Counted all the same: usage, the daily quota, the cost.
    usage_estimated = models.BooleanField(default=False)
    # Dollars at the prices in force when it was recorded (AGENT_MODEL_PRICES); null: unpriced model.
    cost = models.FloatField(null=True, blank=True)
    # The messages sent, only with AGENT_TRACE_REQUESTS (they may be large and hold user data).
    request_messages = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["started_at", "id"]
        # Per-user token sums by day (quota, usage API) start from the time.
        indexes = [models.Index(fields=["started_at"], name="modelcall_started")]

    def __str__(self) -> str:
        return f"model call {self.iteration}.{self.attempt}"


class RunMemory(models.Model):
    """A finished run's memory checkpoint: the chat messages the model is sent for it as an
    earlier turn (chat.eventlog.history), and the run of the turn before it on its branch (PROTOCOL
    section 6). Derived from the event log, like SearchDocument, and rebuilt from it when
    missing (chat.eventlog.memory): a run start reads its branch backwards through `parent` only as
    far as the model's trimmed input reaches, so it costs the same at turn 10 and 10,000.

    A run the branch walk cannot be told by one parent (an imported run holding several
    user_messages) has no messages and no size: a walk that meets it falls back to reading
    the branch from the event log."""

    run = models.OneToOneField("chat.Run", on_delete=models.CASCADE, primary_key=True, related_name="memory")
    parent = models.ForeignKey("chat.Run", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    messages = models.JSONField(null=True, blank=True)
    size = models.PositiveIntegerField(null=True, blank=True)  # len(messages), read by the walk without them

    def __str__(self) -> str:
        return f"Memory of run {str(self.run_id)[:8]}"
