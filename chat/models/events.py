"""The event log: the single source of truth. What a user saw, what the admin inspects and what
the model is sent as memory (chat.eventlog.history derives the model's messages from the events)
all come from `Event` rows."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
from django.db import models
from django.db.models import Q
from django.utils import timezone

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
    conversation = models.ForeignKey(
        "chat.Conversation", on_delete=models.CASCADE, related_name="events", db_index=False
    )
    # Null only for `queued` and `unqueued`, which belong to the conversation (docs/protocol.md,
    # "Queued messages").
    run = models.ForeignKey(
        "chat.Run", on_delete=models.CASCADE, related_name="events", db_index=False, null=True, blank=True
    )
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
