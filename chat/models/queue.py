"""Messages that wait for the conversation's run to end (docs/protocol.md, "Queued messages"): a
row each, so that neither a restart nor a dead process loses one. A row is deleted when its
message starts a run or leaves the queue (its `unqueued` event says why)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from chat.models.events import Utf8JSONEncoder


class QueuedMessage(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)  # the queueId
    conversation = models.ForeignKey("chat.Conversation", on_delete=models.CASCADE, related_name="queued")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    content = models.TextField(blank=True)
    attachments = models.JSONField(default=list, blank=True, encoder=Utf8JSONEncoder)
    # The seq of its `queued` event: the order they start in (gap-free per conversation).
    seq = models.PositiveBigIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        # By the column, not the relation: "conversation" would follow Conversation's ordering
        # (a join on every default-ordered read, and its columns in a DISTINCT).
        ordering = ["conversation_id", "seq"]
        indexes = [models.Index(fields=["conversation", "seq"], name="queued_message_order")]

    def __str__(self) -> str:
        return f"queued {self.id}"
