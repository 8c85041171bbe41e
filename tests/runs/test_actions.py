"""chat.runs.actions, the run engine's front door: a `message` frame read once for every door
(the socket and POST .../messages/), each field checked, files alone a message."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from chat.runs.actions import MessageRequest, message_request
from chat.runs.client_frames import ProtocolError
from chat.tools.confine import workspace_path

pytestmark = pytest.mark.django_db


@pytest.fixture
def with_file(conversation, settings, tmp_path):
    settings.AGENT_WORKSPACE_ROOT = str(tmp_path)
    workspace = workspace_path(str(tmp_path), conversation.pk)
    (workspace / "uploads").mkdir(parents=True)
    (workspace / "uploads" / "notes.txt").write_text("remember the milk")
    return conversation


def ask(frame, conversation) -> MessageRequest:
    return async_to_sync(message_request)(frame, conversation_id=conversation.pk)


def test_a_message_with_its_parent_and_files(with_file):
    asked = ask({"content": "read it", "parentSeq": 3, "attachments": ["uploads/notes.txt"]}, with_file)
    assert asked.content == "read it" and asked.parent_seq == 3
    assert [(a["path"], a["size"]) for a in asked.attachments] == [("uploads/notes.txt", 17)]


def test_files_alone_are_a_message_and_nothing_alone_is_not(with_file):
    assert ask({"content": "", "attachments": ["uploads/notes.txt"]}, with_file).content == ""
    with pytest.raises(ProtocolError) as empty:
        ask({"content": "  "}, with_file)
    assert (empty.value.code, empty.value.detail) == ("BAD_REQUEST", "empty content")


@pytest.mark.parametrize(
    ("frame", "detail"),
    [
        ({"content": "x", "attachments": "uploads/notes.txt"}, "wrong type: attachments"),
        ({"content": "x", "attachments": ["uploads/missing.txt"]}, None),
        ({"content": "x", "parentSeq": "3"}, None),
        ({"content": 3}, "wrong type: content"),
    ],
)
def test_each_field_is_checked(with_file, frame, detail):
    with pytest.raises(ProtocolError) as refused:
        ask(frame, with_file)
    assert refused.value.code == "BAD_REQUEST"
    if detail is not None:
        assert refused.value.detail == detail
