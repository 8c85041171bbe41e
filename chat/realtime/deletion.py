"""A deleted conversation ends its run and every socket and stream open on it, on every process
(docs/protocol.md, "Server-sent events", "OpenAI-compatible endpoint" and "The WebSocket": 4404).

Whatever deletes it, Django sends `pre_delete` for it: `DELETE /api/conversations/<id>/`, the
admin (one or many), a user's deletion cascading to their conversations, a /v1 call's refused
start. So the work is a receiver's, not a step in the delete service:

- in the deletion's transaction, its running run is closed `cancelled` (runs_cancel_deleted):
  the run's own closing events could no longer be stored once the conversation is gone, and
  this status is what /metrics keeps of it. chat.ops.metrics folds the rows into its tallies in
  a `pre_delete` receiver of its own, which must see the status: this one is connected first
  (chat.apps);
- once the deletion commits, the run's process is asked to stop it, as any cancel from another
  process is (doorbell.ring_cancel; the run's process may be this one), and DELETED is pushed
  to the conversation's group by the path of the revocations (revocation.push): every socket and
  server-sent event stream on the conversation (a /v1 call's too) is in it, on every process, and
  the hub hands it the push. A socket closes with 4404, a stream sends `error` NOT_FOUND and ends,
  a /v1 call answers OpenAI's `404`. Not when the conversation goes with its owner: the owner's
  revocation ends all of it, as for any user deleted (4401).

A rolled-back deletion stops nothing and pushes nothing.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import QuerySet
from django.db.models.signals import pre_delete

from chat.accounts.revocation import push
from chat.eventlog.takeover import runs_cancel_deleted
from chat.models import Conversation
from chat.runtime.doorbell import conversation_group, ring_cancel

DELETED = "conversation.deleted"


def _before_delete(sender, instance: Conversation, using: str, origin=None, **kwargs) -> None:
    runs = runs_cancel_deleted(conversation_id=instance.pk)
    pushed = not _with_its_owner(origin)
    transaction.on_commit(partial(_deleted, instance.pk, runs, pushed=pushed), using=using, robust=True)


def _with_its_owner(origin) -> bool:
    """Whether the deletion is a user's (or the admin's of several users), cascading to their
    conversations: the user's own revocation closes everything of theirs, with 4401 (not signed
    in, chat.accounts.revocation), which a 4404 pushed first would pre-empt."""
    model = origin.model if isinstance(origin, QuerySet) else type(origin)
    return model is get_user_model()


def _deleted(conversation_id, runs: list[tuple[Any, str]], *, pushed: bool) -> None:
    for run_id, worker in runs:
        if worker:  # none: released by a stopping process, and no process will take it now
            async_to_sync(ring_cancel)(run_id=run_id, worker=worker)
    if pushed:
        push(conversation_group(conversation_id), {"type": DELETED})


def connect_signals() -> None:
    pre_delete.connect(_before_delete, sender=Conversation, dispatch_uid="agentsite-end-deleted-conversation")
