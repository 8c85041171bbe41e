"""Conversations, runs and the event log.

The event log is the single source of truth: what a user saw, what the admin
inspects and what the model is sent as memory (chat.eventlog.history derives the model's
messages from the events) all come from `Event` rows. `ToolRecord` is a
queryable index of the tool calls, written from the same tool_end events;
`ModelCall` records each model call attempt (the run inspector's timings and tokens).
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import orjson
from django.conf import settings
from django.contrib.sessions.base_session import AbstractBaseSession
from django.db import models
from django.db.models import Q
from django.utils import timezone

from chat.eventlog.frames import EventFrame, event_frame, frame_time

# The partial unique index that allows one running run per conversation.
RUNNING_RUN_CONSTRAINT = "one_running_run_per_conversation"


# The environment's configuration (docs/protocol.md, "Configuration") as the API and the events name it: the
# agent of a conversation without a profile. No profile may take the slug.
DEFAULT_AGENT_SLUG = "default"
DEFAULT_AGENT_NAME = "Default"


class AgentProfile(models.Model):
    """A configuration of the agent that users pick per conversation (docs/protocol.md, "Agents"): the
    seeds' ReactAgent builder (name, model, tools, instruction, options, limits) made data.
    chat.agents.profiles turns a row into the AgentConfig a run is built from; the admin form
    (chat.agents.form) refuses what could not run."""

    slug = models.SlugField(max_length=64, unique=True, help_text="What the API and the picker call it.")
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True, default="")
    enabled = models.BooleanField(default=True, help_text="Disabled: nobody may pick it or run with it.")
    base_url = models.CharField(
        "base URL", max_length=500, blank=True, default="", help_text="Empty: the server's OPENAI_BASE_URL."
    )
    # The NAME of an environment variable: keys stay in the server's environment, never in the database.
    api_key_env = models.CharField(
        "API key variable",
        max_length=100,
        blank=True,
        default="",
        help_text="Name of the environment variable holding the key (e.g. DEEPSEEK_API_KEY); empty: OPENAI_API_KEY.",
    )
    model = models.CharField(max_length=200)
    vision = models.BooleanField(
        "accepts images",
        default=False,
        help_text="The model takes images: attached ones are sent to it, scaled to AGENT_IMAGE_MAX_PIXELS.",
    )
    system_prompt = models.TextField(blank=True, default="", help_text="Empty: the server's AGENT_SYSTEM_PROMPT.")
    tools = models.JSONField(default=list, blank=True)  # built-in names and MCP `<server>__<tool>` / `<server>__*`
    skills = models.JSONField(default=list, blank=True)  # empty: every skill of AGENT_SKILLS_DIR
    temperature = models.FloatField(null=True, blank=True)
    max_tokens = models.PositiveIntegerField(null=True, blank=True)
    top_p = models.FloatField("top_p", null=True, blank=True)
    tool_choice = models.CharField(
        max_length=200,
        blank=True,
        default="",
        help_text="auto, none, required, or the name of one of its tools (then called on each run's first "
        "model call); empty: not sent (the endpoint's default, auto). Small local models may call tools only so.",
    )
    max_iterations = models.PositiveSmallIntegerField(default=10, help_text="Model calls per run.")
    max_retries = models.PositiveSmallIntegerField(default=3, help_text="Retries per model call.")
    retry_interval = models.FloatField(default=10.0, help_text="Seconds between retries.")
    # fnmatch patterns, one per line or comma-separated; empty: AGENT_APPROVAL_TOOLS.
    approval_tools = models.TextField(blank=True, default="")
    everyone = models.BooleanField(default=False, help_text="Every signed-in user may use it.")
    users = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="agent_profiles")
    groups = models.ManyToManyField("auth.Group", blank=True, related_name="agent_profiles")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "slug"]

    def __str__(self) -> str:
        return f"{self.name} ({self.slug})"


# Conversation.source of a conversation started by the OpenAI-compatible endpoint.
API_SOURCE = "api"


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
        AgentProfile, null=True, blank=True, on_delete=models.PROTECT, related_name="conversations"
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

    class Meta:
        ordering = ["-updated_at"]
        # The list's query: the owner's archived or not, pinned first, newest first (chat.conversations.paging).
        indexes = [models.Index(fields=["owner", "archived", "-pinned", "-updated_at"], name="conversation_owner_list")]

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
    # The profile the run was built from (null: the environment's); `model` keeps the name it sent.
    agent = models.ForeignKey(AgentProfile, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
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


_SURROGATE = re.compile("[\ud800-\udfff]")


class Utf8JSONEncoder(json.JSONEncoder):
    """Text stored as itself, not as \\uXXXX escapes. On SQLite (JSON kept as text) an escape takes
    6 bytes where the UTF-8 character takes 2-3: a Chinese answer's rows were twice its size.
    PostgreSQL's jsonb stores the parsed value either way. Every string stored now went through
    chat.agent.text; a lone surrogate can still come back from a row an older version wrote (SQLite
    kept it escaped) and be written again (a memory checkpoint): that value keeps its escapes."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs["ensure_ascii"] = False
        super().__init__(*args, **kwargs)

    def encode(self, o) -> str:
        text = super().encode(o)
        if not text.isascii() and _SURROGATE.search(text):
            return json.dumps(o, ensure_ascii=True, cls=json.JSONEncoder)
        return text


# An event's payload as its JSON text, for the readers of many rows (a replay, a run's events at
# its completion): decoded by payload_of rather than by the field's converter (json.loads) row by
# row, orjson parses it in a quarter of the time.
RAW_PAYLOAD = models.ExpressionWrapper(models.F("payload"), output_field=models.TextField())


def payload_of(text: str) -> Any:
    """A payload read as RAW_PAYLOAD."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:  # a lone surrogate escape an older version stored: json takes it
        return json.loads(text)


class Event(models.Model):
    # No index of their own: (conversation, seq) and (run, seq) below lead with them and serve
    # every lookup and cascade; the two single-column copies cost ~80 of the ~300 bytes of
    # each row besides its text, and two index writes per event (bench/storage.py).
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="events", db_index=False)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events", db_index=False)
    seq = models.PositiveBigIntegerField()
    type = models.CharField(max_length=32)
    # The event's protocol JSON without seq and runId, which are columns.
    payload = models.JSONField(encoder=Utf8JSONEncoder)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["conversation", "seq"]
        constraints = [
            # Also the index behind "events of a conversation after seq N".
            models.UniqueConstraint(fields=["conversation", "seq"], name="event_seq_unique_per_conversation")
        ]
        indexes = [
            models.Index(fields=["run", "seq"], name="event_run_seq"),
            # The turns of a conversation, walked for its branches (versions) on every run start.
            models.Index(fields=["conversation", "seq"], condition=Q(type="user_message"), name="event_user_message"),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.type}"

    def to_frame(self) -> EventFrame:
        return event_frame(self.payload, seq=self.seq, run_id=self.run_id, ts=frame_time(self.created_at))


class ToolRecord(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tool_records")
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


class MetricTally(models.Model):
    """What deleted rows had added to a counter or histogram series of /metrics (chat.ops.metrics):
    the series are derived from Run and ToolRecord rows, and without this, deleting a
    conversation would make counters go down, which Prometheus reads as a reset."""

    series = models.CharField(max_length=500, primary_key=True)  # name and labels (chat.ops.metrics.series_key)
    value = models.FloatField(default=0)

    def __str__(self) -> str:
        return f"{self.series} += {self.value}"


class ProcessGauge(models.Model):
    """One server process's live gauges, published on its heartbeat (chat.ops.metrics): open
    WebSockets exist only in a process's memory, and /metrics may be scraped from any process
    (on any machine), so each process writes its own row and the scrape sums the fresh ones."""

    process = models.CharField(max_length=200, primary_key=True)
    websocket_connections = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now, db_index=True)

    def __str__(self) -> str:
        return f"{self.process}: {self.websocket_connections} sockets"


class ModelCall(models.Model):
    """One model call attempt of a run, failed ones included (chat.agent.trace.ModelCallRecord)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="model_calls")
    # "answer": a call of the run's loop; "title": the conversation's title, asked after the run (chat.runtime.titles).
    purpose = models.CharField(max_length=16, default="answer")
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
    # The messages sent, only with AGENT_TRACE_REQUESTS (they may be large and hold user data).
    request_messages = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["started_at", "id"]
        # Per-user token sums by day (quota, usage API) start from the time.
        indexes = [models.Index(fields=["started_at"], name="modelcall_started")]

    def __str__(self) -> str:
        return f"model call {self.iteration}.{self.attempt}"


class SearchDocument(models.Model):
    """What a finished run shows as text (its user message and its answer), for `?q=` search.

    One row per run, written once when the run completes (and at import), never per delta:
    the event writer's hot path stays as it was. The full-text index over `body` is the
    database's own (chat.eventlog.search): a GIN over to_tsvector on PostgreSQL, an FTS5 table kept by
    triggers on SQLite, both created by migration 0003.
    """

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="search_document")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="search_documents")
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


class RunMemory(models.Model):
    """A finished run's memory checkpoint: the chat messages the model is sent for it as an
    earlier turn (chat.eventlog.history), and the run of the turn before it on its branch (PROTOCOL
    section 6). Derived from the event log, like SearchDocument, and rebuilt from it when
    missing (chat.eventlog.memory): a run start reads its branch backwards through `parent` only as
    far as the model's trimmed input reaches, so it costs the same at turn 10 and 10,000.

    A run the branch walk cannot be told by one parent (an imported run holding several
    user_messages) has no messages and no size: a walk that meets it falls back to reading
    the branch from the event log."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, primary_key=True, related_name="memory")
    parent = models.ForeignKey(Run, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    messages = models.JSONField(null=True, blank=True)
    size = models.PositiveIntegerField(null=True, blank=True)  # len(messages), read by the walk without them

    def __str__(self) -> str:
        return f"Memory of run {str(self.run_id)[:8]}"


class GroupLimits(models.Model):
    """A group's limits (docs/configuration.md, "Limits per group"), read at each run start. Blank:
    the group sets none; 0: unlimited, as the settings' 0. A user gets their most generous group's."""

    group = models.OneToOneField("auth.Group", on_delete=models.CASCADE, primary_key=True, related_name="limits")
    daily_token_quota = models.PositiveIntegerField(null=True, blank=True, help_text="Blank: not set. 0: no quota.")
    messages_per_minute = models.PositiveIntegerField(null=True, blank=True, help_text="Blank: not set. 0: no limit.")

    class Meta:
        verbose_name_plural = "group limits"

    def __str__(self) -> str:
        return f"Limits of {self.group.name}"


class UserSession(AbstractBaseSession):
    """A session that names its user (chat.web.sessions, the SESSION_ENGINE), so that "sign out of all
    other sessions" finds them without decoding every session of the site."""

    # No database constraint: a request may save its session just after its user was deleted, and
    # that save must not fail; deleting a user still deletes their sessions (the ORM's cascade).
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        db_constraint=False,
        related_name="+",
    )

    class Meta(AbstractBaseSession.Meta):
        db_table = "chat_user_session"


# Models of modules of their own (who a user or program is, shared links), registered with the app's.
from chat.identity import AccountSettings, ApiToken, OidcIdentity, ProviderGroup  # noqa: E402, F401
from chat.sharing.models import ShareLink  # noqa: E402, F401
