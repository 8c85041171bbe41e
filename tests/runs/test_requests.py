"""chat.runs.requests: a client's frame read once, for every door, into the front door's typed
request (the socket and POST .../messages/), each field checked, files alone a message."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from chat.runs.client_frames import ProtocolError
from chat.runs.requests import ApproveRun, StartRun, approve_request, start_request
from chat.tools.confine import workspace_path

pytestmark = pytest.mark.django_db


@pytest.fixture
def with_file(conversation, settings, tmp_path):
    settings.AGENT_WORKSPACE_ROOT = str(tmp_path)
    workspace = workspace_path(str(tmp_path), conversation.pk)
    (workspace / "uploads").mkdir(parents=True)
    (workspace / "uploads" / "notes.txt").write_text("remember the milk")
    return conversation


def ask(frame, conversation, kind="message") -> StartRun:
    return async_to_sync(start_request)(kind, frame, conversation=conversation, user=conversation.owner, first=False)


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


def test_an_edit_and_a_regenerate_name_the_message_they_replace(with_file):
    edit = ask({"content": "better", "seq": 4}, with_file, kind="edit")
    assert (edit.content, edit.edits, edit.regenerates, edit.follows_newest) == ("better", 4, None, False)
    again = ask({"seq": 4, "content": "ignored"}, with_file, kind="regenerate")
    assert (again.content, again.regenerates, again.edits) == ("", 4, None)
    with pytest.raises(ProtocolError) as no_seq:
        ask({"content": "x"}, with_file, kind="edit")
    assert no_seq.value.detail == "missing field: seq"


def test_a_new_message_follows_the_newest_turn_and_a_branch_does_not(with_file):
    assert ask({"content": "hi"}, with_file).follows_newest
    assert not ask({"content": "hi", "parentSeq": 2}, with_file).follows_newest


def test_an_approve_frame_becomes_the_answer_the_engine_takes(with_file):
    asked = approve_request(
        {"toolCallId": "call_1", "decision": "deny", "reason": " not now "},
        conversation_id=with_file.pk,
        reply_to=("socket.1", 7),
    )
    assert isinstance(asked, ApproveRun) and asked.tool_call_id == "call_1"
    assert (asked.decision.decision, asked.decision.reason, asked.reply_to) == ("denied", "not now", ("socket.1", 7))
    with pytest.raises(ProtocolError) as wrong:
        approve_request({"toolCallId": "call_1", "decision": "maybe"}, conversation_id=with_file.pk, reply_to=None)
    assert wrong.value.detail == "wrong field: decision"
