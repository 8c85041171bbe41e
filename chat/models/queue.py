"""Messages that wait for the conversation's run to end, and steers that wait for the running run
to take them in (docs/protocol.md, "Queued messages" and "Steering"): a row each, so that
neither a restart nor a dead process loses one. A row is deleted when its message starts a run
or leaves the queue (its `unqueued` event says why), and a steer's when its run, having taken
it in, completes."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from chat.models.events import Utf8JSONEncoder


class QueueQuerySet(models.QuerySet):
    def waiting(self) -> QueueQuerySet:
        """The waiting messages, in the order they will start: steers their run ended without
        taking in first, as they came, then queued messages, oldest first."""
        return self.filter(steer_run__isnull=True).order_by("-steered", "seq")

    def pending_steers(self) -> QueueQuerySet:
        """The steers not taken in yet, in the order they came."""
        return self.filter(steer_run__isnull=False, taken=False).order_by("seq")

    def withdrawable(self) -> QueueQuerySet:
        """What `unqueue` and `clearQueue` may withdraw, and AGENT_MAX_QUEUED counts: waiting
        messages and pending steers."""
        return self.filter(taken=False)


class QueuedMessage(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)  # the queueId
    conversation = models.ForeignKey("chat.Conversation", on_delete=models.CASCADE, related_name="queued")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # The API token that sent it: the run it starts counts against that token's budget.
    api_token = models.ForeignKey("chat.ApiToken", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    content = models.TextField(blank=True)
    attachments = models.JSONField(default=list, blank=True, encoder=Utf8JSONEncoder)
    # The seq of its `queued` event (a steer's: of its `steer` event): the order they start or are
    # taken in (gap-free per conversation).
    seq = models.PositiveBigIntegerField()
    # A steer: the run it steers, while it has not become a waiting message.
    steer_run = models.ForeignKey("chat.Run", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    # A steer its run took in (its `steer_applied` stored, or about to be): no longer withdrawable.
    taken = models.BooleanField(default=False)
    # A steer its run ended without taking in: a waiting message that starts before the others.
    steered = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    objects = QueueQuerySet.as_manager()

    class Meta:
        # By the column, not the relation: "conversation" would follow Conversation's ordering
        # (a join on every default-ordered read, and its columns in a DISTINCT).
        ordering = ["conversation_id", "seq"]
        indexes = [models.Index(fields=["conversation", "seq"], name="queued_message_order")]

    def __str__(self) -> str:
        return f"queued {self.id}"
