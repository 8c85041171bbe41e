"""What a conversation's deletion ends, by every path that deletes one (chat.realtime.deletion): its
running run closed `cancelled` (and counted so by /metrics), its process asked to stop it, and the
deletion pushed to the conversation's group once committed. The pushes reaching sockets, streams
and /v1 calls on other processes are tested end to end (tests/e2e/test_deletion.py)."""

from __future__ import annotations

import pytest
from django.db import transaction

from chat.conversations.services import conversation_create, conversation_delete
from chat.models import Conversation, MetricTally, Run
from chat.realtime import deletion
from chat.runs.starts import run_start
from chat.runtime.doorbell import conversation_group

pytestmark = pytest.mark.django_db

CANCELLED_RUNS = 'agentsite_runs_total{"status":"cancelled"}'


@pytest.fixture
def told(monkeypatch):
    """What the deletions asked of the layer: the runs to stop, then the groups pushed to."""
    said: list[tuple] = []

    async def ring_cancel(*, run_id, worker):
        said.append(("cancel", str(run_id), worker))

    monkeypatch.setattr(deletion, "ring_cancel", ring_cancel)
    monkeypatch.setattr(deletion, "push", lambda group, message: said.append(("push", group, message)))
    return said


def running(conversation, worker: str = "runs.elsewhere") -> Run:
    run, _ = run_start(conversation=conversation, user=conversation.owner, content="hi", model="m", worker=worker)
    return run


def test_deleting_a_conversation_cancels_its_run_and_pushes_after_the_commit(
    make_user, told, django_capture_on_commit_callbacks
):
    conversation = conversation_create(owner=make_user("alice"), title="doomed")
    run, group = running(conversation), conversation_group(conversation.pk)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        conversation_delete(conversation=conversation)
        assert told == []  # nothing before the commit
    assert len(callbacks) >= 1
    assert told == [("cancel", str(run.pk), "runs.elsewhere"), ("push", group, {"type": deletion.DELETED})]
    # What /metrics keeps of the deleted run is its cancelled status (folded after this receiver).
    assert MetricTally.objects.get(series=CANCELLED_RUNS).value == 1
    assert not Run.objects.filter(pk=run.pk).exists()


def test_the_admins_and_a_users_deletion_and_a_rolled_back_one(make_user, told, django_capture_on_commit_callbacks):
    alice = make_user("alice")
    idle = conversation_create(owner=alice, title="idle")
    busy = conversation_create(owner=alice, title="busy")
    run = running(busy, worker="")  # released by a stopping process: no process to ask
    with pytest.raises(RuntimeError), django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic():
            conversation_delete(conversation=Conversation.objects.get(pk=busy.pk))
            raise RuntimeError("rolled back")
    assert told == []
    assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING

    with django_capture_on_commit_callbacks(execute=True):
        Conversation.objects.filter(pk=idle.pk).delete()  # the admin's bulk delete
    assert told == [("push", conversation_group(idle.pk), {"type": deletion.DELETED})]

    with django_capture_on_commit_callbacks(execute=True):
        alice.delete()  # cascades to her conversations without the service
    # Her revocation closes everything of hers (4401, chat.accounts.revocation): no 4404 before it.
    assert told == [("push", conversation_group(idle.pk), {"type": deletion.DELETED})]
    assert MetricTally.objects.get(series=CANCELLED_RUNS).value == 1
    assert not Run.objects.filter(pk=run.pk).exists()
