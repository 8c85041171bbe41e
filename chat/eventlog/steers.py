"""Steers on the event log (docs/protocol.md, "Steering"): a steer is a QueuedMessage row bound to
the run it steers (steer_run) from its `steer` event until the run takes it in or ends.

- steers_take: the run claims its pending steers right before a model call (`taken`, under the
  conversation's lock, so that against an `unqueue` exactly one of the two happens); the run
  then stores a `steer_applied` for each through its own events.
- steers_left: in the transaction that stores a run's `complete`, the steers it did not take in
  become waiting messages (`queued` with `steered: true`, before the `complete`), and the rows of
  those it took in go.
- steers_retake: a run taken over from a dead process gets back the steers it claimed whose
  `steer_applied` never reached the log, so that its resumed attempt takes them in again."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction

from chat.agent import Steer
from chat.models import Conversation, QueuedMessage


def steers_take(*, conversation_id, run_id) -> list[Steer]:
    """Claim the run's pending steers, in the order they came. One indexed read when there are
    none (the case of nearly every model call), the lock only when there are."""
    if not QueuedMessage.objects.filter(steer_run_id=run_id, taken=False).exists():
        return []
    with transaction.atomic():
        # The lock an `unqueue` takes too (chat.runs.queue): the claim and a withdrawal serialise.
        if not Conversation.objects.select_for_update().filter(pk=conversation_id).values_list("pk").exists():
            return []
        rows = list(QueuedMessage.objects.filter(steer_run_id=run_id).pending_steers().values_list("pk", "content"))
        QueuedMessage.objects.filter(pk__in=[pk for pk, _ in rows]).update(taken=True)
    return [Steer(str(pk), content) for pk, content in rows]


def steers_left(run_ids: Iterable[Any]) -> dict[str, list[dict[str, Any]]]:
    """For runs whose `complete` is being stored (in that transaction, the conversation's row
    locked by its seqs): {str(run id): the `queued` payloads of the steers it did not take in},
    those rows made waiting messages; the rows of the steers it took in are deleted."""
    ids = list(run_ids)
    if not ids:
        return {}
    rows = list(
        QueuedMessage.objects.filter(steer_run_id__in=ids)
        .order_by("seq")
        .values_list("pk", "steer_run_id", "content", "taken")
    )
    if not rows:
        return {}
    QueuedMessage.objects.filter(pk__in=[pk for pk, _, _, taken in rows if taken]).delete()
    left = [(pk, run, content) for pk, run, content, taken in rows if not taken]
    QueuedMessage.objects.filter(pk__in=[pk for pk, _, _ in left]).update(steer_run=None, steered=True)
    out: dict[str, list[dict[str, Any]]] = {}
    for pk, run, content in left:
        out.setdefault(str(run), []).append({"type": "queued", "queueId": str(pk), "content": content, "steered": True})
    return out


def steers_retake(*, run_id, logged: Iterable[Mapping[str, Any]]) -> None:
    """A run resumed by a take-over (in its transaction): the steers it claimed but whose
    `steer_applied` is not in its `logged` events are pending again."""
    applied = [e.get("queueId") for e in logged if e.get("type") == "steer_applied"]
    QueuedMessage.objects.filter(steer_run_id=run_id, taken=True).exclude(pk__in=applied).update(taken=False)
