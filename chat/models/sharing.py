"""Shared links: a read-only snapshot of a conversation for anyone with the link (chat.sharing)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class ShareLink(models.Model):
    """A read-only link to a conversation as it was up to `up_to_seq`: the branch that ends at
    `leaf_seq`, under the title it had then (chat/sharing/snapshot.py). Only the SHA-256 of the
    link's token is stored (looked up by it, chat/sharing/links.py), so a copy of the database
    opens no link; revoking keeps the row (the admin's history) and closes the link at once."""

    conversation = models.ForeignKey("chat.Conversation", on_delete=models.CASCADE, related_name="share_links")
    digest = models.CharField(max_length=64, unique=True)  # sha256 hex of the token
    hint = models.CharField(max_length=12)  # the token's first characters, to tell links apart
    up_to_seq = models.PositiveBigIntegerField()
    # The snapshot's branch, by its last turn (the seq of a user_message, at most up_to_seq).
    leaf_seq = models.PositiveBigIntegerField()
    # The conversation's title when the link was made (Conversation.title's length).
    title = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "chat"
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["conversation", "-created_at"], name="share_link_conversation")]

    def __str__(self) -> str:
        return f"Link {self.hint}… to conversation {str(self.conversation_id)[:8]}"
