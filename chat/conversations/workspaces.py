"""Conversation workspaces on the Django side: the lock their writes take, the admin's listing of
one, and its removal.

A write that must keep the workspace quota (AGENT_WORKSPACE_MAX_BYTES: an upload, write_file, a
saved MCP image) measures the workspace and then writes; two writers that both measure before
either writes both pass, and the workspace ends over its quota. So the measurement and the write
are done under `workspace_locked`, a lock held in the database, the one thing every server process
shares: the conversation's row locked FOR UPDATE on PostgreSQL; on SQLite the transaction itself,
which BEGIN IMMEDIATE (agentsite/settings.py) opens holding the database's write lock. A mutex of
one process would not see the others. The lock is held for one measurement and one write (an
upload is already received in full), never for a tool's run or a PDF's text extraction.

A deleted conversation's workspace (the files its tools wrote) is removed once the deletion commits,
and the thumbnails of its images (chat.conversations.thumbnails) with it.

A `post_delete` receiver on Conversation rather than a step in the delete service: Django
sends the signal for every conversation deleted by any path, the API's service, the admin
(one or many), and the cascade of a user's deletion, which never goes through the service.
The removal waits for `on_commit`, so a rolled-back deletion removes nothing, and it goes
through `remove_tree`, which never follows a symlink out of the workspace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from typing import TypeVar

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from chat.agent.tools import ToolContext, ToolError
from chat.conversations.thumbnails import conversation_folder
from chat.models import Conversation
from chat.tools.confine import Confined, workspace_path
from chat.tools.removal import remove_workspace

T = TypeVar("T")


@contextmanager
def workspace_locked(conversation_id) -> Iterator[None]:
    """Held while a write into the conversation's workspace is measured against the quota and done;
    Conversation.DoesNotExist when the conversation is gone (its workspace is being removed)."""
    with transaction.atomic():
        if not list(Conversation.objects.select_for_update().filter(pk=conversation_id).values_list("pk")):
            raise Conversation.DoesNotExist(conversation_id)
        yield


def _locked_call(conversation_id, write: Callable[[], T]) -> T:
    try:
        with workspace_locked(conversation_id):
            return write()
    except Conversation.DoesNotExist:
        raise ToolError("the conversation was deleted; its workspace is gone") from None


async def locked_write(context: ToolContext, write: Callable[[], T]) -> T:
    """FilesSettings.exclusive for the server's runs: the tools' quota-checked writes under the lock."""
    return await database_sync_to_async(_locked_call)(context.conversation_id, write)


@receiver(post_delete, sender=Conversation, dispatch_uid="chat.conversations.workspaces.remove_after_delete")
def remove_after_delete(sender, instance: Conversation, using: str, **kwargs) -> None:
    path = workspace_path(settings.AGENT_WORKSPACE_ROOT, instance.pk)
    transaction.on_commit(partial(remove_workspace, path), using=using, robust=True)
    transaction.on_commit(partial(remove_workspace, conversation_folder(instance.pk)), using=using, robust=True)


def workspace_listing(conversation_id) -> list[tuple[str, int, datetime]]:
    """Files of a conversation's workspace for the admin: (relative path, size in bytes, modified, UTC)."""
    entries, _cut = Confined(workspace_path(settings.AGENT_WORKSPACE_ROOT, conversation_id)).entries(".", limit=10_000)
    return [(rel, size, datetime.fromtimestamp(mtime, tz=UTC)) for rel, size, mtime, is_dir in entries if not is_dir]
