"""A full disk under the workspaces: a tmpfs of 256 KiB mounted for the test as
AGENT_WORKSPACE_ROOT (the tests run as root, as CI does on this machine: `mount` needs it).
An upload and write_file get a clear error and leave no half file; the run, the socket and
the server go on; once there is room again everything works."""

from __future__ import annotations

import subprocess

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from chat.conversations.services import conversation_create
from tests.asgi_socket import Socket
from tests.fakellm import text_reply, tool_call_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]

DISK_BYTES = 256 * 1024


@pytest.fixture
def full_disk(settings, tmp_path):
    root = tmp_path / "workspaces"
    root.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(root)], check=True)
    settings.AGENT_WORKSPACE_ROOT = root
    settings.AGENT_WORKSPACE_MAX_BYTES = 10 * DISK_BYTES  # the disk fills before the quota does
    yield root
    subprocess.run(["umount", str(root)], check=True)


def upload(client, conversation, name: str, data: bytes):
    return client.post(f"/api/conversations/{conversation.pk}/files/", {"file": SimpleUploadedFile(name, data)})


async def test_a_full_disk_gives_uploads_and_write_file_a_clear_error_and_breaks_nothing(
    full_disk, make_user, registry, llm_settings, settings
):
    from asgiref.sync import sync_to_async

    settings.AGENT_TOOLS = ["write_file", "read_file"]
    alice = await sync_to_async(make_user)("alice")
    conversation = await sync_to_async(conversation_create)(owner=alice, title="disk")
    client = Client()
    await sync_to_async(client.force_login)(alice)

    too_big = await sync_to_async(upload)(client, conversation, "big.bin", b"x" * (2 * DISK_BYTES))
    assert too_big.status_code == 400
    assert "disk" in too_big.json()["message"] and "full" in too_big.json()["message"]
    listed = await sync_to_async(client.get)(f"/api/conversations/{conversation.pk}/files/")
    assert listed.status_code == 200 and listed.json()["files"] == []  # no half file

    llm_settings.script(
        tool_call_reply(("write_file", {"path": "out.txt", "content": "y" * (2 * DISK_BYTES)})),
        text_reply("The disk is full."),
    )
    sock = Socket(alice, conversation.pk)
    await sock.connect()
    await sock.history()
    await sock.send({"type": "message", "content": "write it"})
    frames = await sock.run_to_end()
    tool_end = next(f for f in frames if f["type"] == "tool_end")
    assert tool_end["isError"] is True and "disk" in tool_end["result"] and "full" in tool_end["result"]
    assert frames[-1]["status"] == "succeeded"
    assert not (full_disk / str(conversation.pk) / "out.txt").exists()

    # Room again (nothing was left behind to fill it): a small upload and the next run work.
    small = await sync_to_async(upload)(client, conversation, "small.txt", b"fits")
    assert small.status_code == 201
    llm_settings.script(text_reply("Still here."))
    await sock.send({"type": "message", "content": "hello"})
    assert (await sock.run_to_end())[-1]["status"] == "succeeded"
    await sock.close()


def test_a_failed_upload_over_an_existing_file_keeps_the_old_one(full_disk, make_user):
    """The bytes go to a temporary file renamed over the old one only when all were written."""
    alice = make_user("alice")
    conversation = conversation_create(owner=alice, title="disk")
    client = Client()
    client.force_login(alice)
    assert upload(client, conversation, "notes.txt", b"the old notes").status_code == 201
    refused = upload(client, conversation, "notes.txt", b"x" * (2 * DISK_BYTES))
    assert refused.status_code == 400 and "full" in refused.json()["message"]
    listed = client.get(f"/api/conversations/{conversation.pk}/files/").json()["files"]
    assert [(f["path"], f["size"]) for f in listed] == [("notes.txt", len(b"the old notes"))]
    assert (full_disk / str(conversation.pk) / "notes.txt").read_bytes() == b"the old notes"
    assert sorted(p.name for p in (full_disk / str(conversation.pk)).iterdir()) == ["notes.txt"]  # no .part left
