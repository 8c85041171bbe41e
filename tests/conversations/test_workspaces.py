"""A deleted conversation's workspace is removed after the deletion commits, never through a symlink."""

from __future__ import annotations

import os

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import Client

from chat.conversations.services import conversation_create, conversation_delete
from chat.models import Conversation
from chat.tools.confine import workspace_path

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


@pytest.fixture
def root(settings, tmp_path):
    settings.AGENT_WORKSPACE_ROOT = tmp_path / "workspaces"
    settings.AGENT_WORKSPACE_ROOT.mkdir()
    return settings.AGENT_WORKSPACE_ROOT


@pytest.fixture
def outside(tmp_path):
    """What symlinks in a workspace point to: must survive every removal."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "precious.txt").write_text("keep me")
    return path


def filled_workspace(root, conversation, outside, other=None):
    path = workspace_path(root, conversation.pk)
    (path / "notes").mkdir(parents=True)
    (path / "notes" / "a.txt").write_text("a")
    (path / "data.csv").write_text("1,2")
    os.symlink(outside, path / "to-outside")
    os.symlink(outside / "precious.txt", path / "notes" / "to-file")
    os.symlink("/etc", path / "to-etc")
    if other is not None:
        os.symlink(other, path / "to-other-workspace")
    locked = path / "locked"
    locked.mkdir()
    (locked / "x").write_text("x")
    locked.chmod(0)
    return path


def test_api_delete_removes_the_workspace_and_nothing_it_links_to(root, outside, make_user):
    alice = make_user("alice")
    mine = conversation_create(owner=alice)
    other = conversation_create(owner=alice)
    other_path = filled_workspace(root, other, outside)
    path = filled_workspace(root, mine, outside, other=other_path)
    api = Client()
    api.force_login(alice)
    assert api.delete(f"/api/conversations/{mine.pk}/").status_code == 204
    assert not os.path.lexists(path)
    assert (outside / "precious.txt").read_text() == "keep me"
    assert (other_path / "notes" / "a.txt").read_text() == "a"
    assert os.path.exists("/etc/passwd")


def test_a_rolled_back_delete_removes_nothing(root, outside, make_user):
    conversation = conversation_create(owner=make_user("alice"))
    conversation_id = conversation.pk
    path = filled_workspace(root, conversation, outside)
    with pytest.raises(RuntimeError), transaction.atomic():
        conversation_delete(conversation=conversation)
        raise RuntimeError("something later in the same transaction failed")
    assert Conversation.objects.filter(pk=conversation_id).exists()
    assert (path / "notes" / "a.txt").read_text() == "a"


def test_the_removal_waits_for_the_commit(root, outside, make_user):
    conversation = conversation_create(owner=make_user("alice"))
    path = filled_workspace(root, conversation, outside)
    with transaction.atomic():
        conversation_delete(conversation=conversation)
        assert (path / "data.csv").exists()
    assert not os.path.lexists(path)


def test_deleting_a_user_removes_every_workspace_of_theirs_only(root, outside, make_user):
    alice, bob = make_user("alice"), make_user("bob")
    hers = [conversation_create(owner=alice) for _ in range(3)]
    his = conversation_create(owner=bob)
    his_path = filled_workspace(root, his, outside)
    paths = [filled_workspace(root, conversation, outside, other=his_path) for conversation in hers]
    get_user_model().objects.get(pk=alice.pk).delete()  # the ORM cascade, as the admin does it
    assert not any(os.path.lexists(path) for path in paths)
    assert (his_path / "data.csv").read_text() == "1,2"
    assert (outside / "precious.txt").read_text() == "keep me"


def test_admin_bulk_delete_removes_the_workspaces(root, outside, make_user):
    admin = get_user_model().objects.create_superuser("root", password="pw-for-tests-123")
    alice = make_user("alice")
    conversations = [conversation_create(owner=alice) for _ in range(2)]
    paths = [filled_workspace(root, conversation, outside) for conversation in conversations]
    client = Client()
    client.force_login(admin)
    response = client.post(
        "/admin/chat/conversation/",
        {"action": "delete_selected", "_selected_action": [str(c.pk) for c in conversations], "post": "yes"},
    )
    assert response.status_code == 302
    assert not Conversation.objects.filter(owner=alice).exists()
    assert not any(os.path.lexists(path) for path in paths)
    assert (outside / "precious.txt").read_text() == "keep me"


def test_a_workspace_that_is_itself_a_symlink_loses_the_link_only(root, outside, make_user):
    conversation = conversation_create(owner=make_user("alice"))
    path = workspace_path(root, conversation.pk)
    os.symlink(outside, path)
    conversation_delete(conversation=conversation)
    assert not os.path.lexists(path)
    assert (outside / "precious.txt").read_text() == "keep me"


def test_a_conversation_without_a_workspace_deletes_fine(root, make_user):
    conversation = conversation_create(owner=make_user("alice"))
    conversation_delete(conversation=conversation)
    assert not Conversation.objects.exists()


def test_deleting_a_conversation_that_never_had_files_logs_nothing(settings, tmp_path, make_user, caplog):
    """A fresh server has no AGENT_WORKSPACE_ROOT folder until a first file is written: a workspace
    that was never created is nothing to remove, not an error."""
    settings.AGENT_WORKSPACE_ROOT = tmp_path / "never-made"
    alice = make_user("alice")
    conversation = conversation_create(owner=alice)
    api = Client()
    api.force_login(alice)
    with caplog.at_level("INFO"):
        assert api.delete(f"/api/conversations/{conversation.pk}/").status_code == 204
    assert [(r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= 30] == []
    assert not Conversation.objects.filter(pk=conversation.pk).exists()
    assert not settings.AGENT_WORKSPACE_ROOT.exists()
