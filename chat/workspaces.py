"""Conversation workspaces on the Django side: the admin's listing of one, and its removal.

A deleted conversation's workspace (the files its tools wrote) is removed once the deletion commits.

A `post_delete` receiver on Conversation rather than a step in the delete service: Django
sends the signal for every conversation deleted by any path, the API's service, the admin
(one or many), and the cascade of a user's deletion, which never goes through the service.
The removal waits for `on_commit`, so a rolled-back deletion removes nothing, and it goes
through `remove_tree`, which never follows a symlink out of the workspace.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial

from django.conf import settings
from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from .models import Conversation
from .tools.workspace import Confined, remove_workspace, workspace_path


@receiver(post_delete, sender=Conversation, dispatch_uid="chat.workspaces.remove_after_delete")
def remove_after_delete(sender, instance: Conversation, using: str, **kwargs) -> None:
    path = workspace_path(settings.AGENT_WORKSPACE_ROOT, instance.pk)
    transaction.on_commit(partial(remove_workspace, path), using=using, robust=True)


def workspace_listing(conversation_id) -> list[tuple[str, int, datetime]]:
    """Files of a conversation's workspace for the admin: (relative path, size in bytes, modified, UTC)."""
    entries, _cut = Confined(workspace_path(settings.AGENT_WORKSPACE_ROOT, conversation_id)).entries(".", limit=10_000)
    return [(rel, size, datetime.fromtimestamp(mtime, tz=UTC)) for rel, size, mtime, is_dir in entries if not is_dir]
