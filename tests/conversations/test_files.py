"""Conversation files (docs/protocol.md, "Files"): upload, list, download, delete; ownership,
limits, hostile names, downloads that never render; PDF text; attachments on messages."""

from __future__ import annotations

import asyncio
import io
import json
import os
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor

import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connections
from django.test import Client

from chat.conversations.importing import ImportRefused, conversation_import, parse_import
from chat.conversations.services import conversation_create
from chat.conversations.uploads import pdf_text
from chat.tools.confine import tree_size, workspace_path
from tests.http_body import response_body

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


@pytest.fixture
def root(settings, tmp_path):
    settings.AGENT_WORKSPACE_ROOT = tmp_path / "workspaces"
    settings.AGENT_WORKSPACE_ROOT.mkdir()
    return settings.AGENT_WORKSPACE_ROOT


@pytest.fixture
def alice(make_user):
    return make_user("alice")


@pytest.fixture
def owned(alice, root):
    return conversation_create(owner=alice, title="files")


def client_of(user, **options) -> Client:
    client = Client(**options)
    client.force_login(user)
    return client


def upload(client, conversation, name: str, data: bytes, **fields):
    return client.post(
        f"/api/conversations/{conversation.pk}/files/", {"file": SimpleUploadedFile(name, data), **fields}
    )


def files_url(conversation, path: str = "") -> str:
    return f"/api/conversations/{conversation.pk}/files/{path}"


def minimal_pdf(text: str) -> bytes:
    """A one-page PDF showing `text` in Helvetica, with a correct cross-reference table."""
    stream = zlib.compress(f"BT /F1 24 Tf 72 720 Td ({text}) Tj ET".encode())
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


# -- upload, list, download, delete ---------------------------------------------------------------
def test_upload_list_download_delete(alice, owned, root):
    api = client_of(alice)
    response = upload(api, owned, "data.csv", b"a,b\n1,2\n")
    assert response.status_code == 201
    assert response.json() == {"path": "data.csv", "size": 8}
    assert (workspace_path(root, owned.pk) / "data.csv").read_bytes() == b"a,b\n1,2\n"
    # an explicit path may name a folder
    assert upload(api, owned, "x", b"notes", path="notes/today.md").json() == {"path": "notes/today.md", "size": 5}

    listed = api.get(files_url(owned)).json()["files"]
    assert [(f["path"], f["size"]) for f in listed] == [("data.csv", 8), ("notes/today.md", 5)]
    assert all(f["modified"].endswith("+00:00") for f in listed)

    download = api.get(files_url(owned, "notes/today.md"))
    assert download.status_code == 200
    assert b"".join(download.streaming_content) == b"notes"
    assert download["Content-Disposition"] == 'attachment; filename="today.md"'

    assert api.delete(files_url(owned, "data.csv")).status_code == 204
    assert not (workspace_path(root, owned.pk) / "data.csv").exists()
    assert [f["path"] for f in api.get(files_url(owned)).json()["files"]] == ["notes/today.md"]
    assert api.delete(files_url(owned, "data.csv")).status_code == 404
    assert api.get(files_url(owned, "data.csv")).status_code == 404


def test_uploading_again_replaces_the_file(alice, owned, root):
    api = client_of(alice)
    upload(api, owned, "a.txt", b"first version")
    assert upload(api, owned, "a.txt", b"second").status_code == 201
    assert (workspace_path(root, owned.pk) / "a.txt").read_bytes() == b"second"


def test_another_users_conversation_is_not_found_for_every_operation(alice, owned, make_user, root):
    upload(client_of(alice), owned, "secret.txt", b"alice's")
    mallory = client_of(make_user("mallory"))
    assert upload(mallory, owned, "x.txt", b"planted").status_code == 404
    assert mallory.get(files_url(owned)).status_code == 404
    assert mallory.get(files_url(owned, "secret.txt")).status_code == 404
    assert mallory.delete(files_url(owned, "secret.txt")).status_code == 404
    assert sorted(os.listdir(workspace_path(root, owned.pk))) == ["secret.txt"]
    assert Client().get(files_url(owned)).status_code == 401


def test_unsafe_methods_need_the_csrf_token(alice, owned, root):
    api = client_of(alice, enforce_csrf_checks=True)
    assert upload(api, owned, "a.txt", b"x").status_code == 403
    assert api.delete(files_url(owned, "a.txt")).status_code == 403
    assert not workspace_path(root, owned.pk).exists()


# -- limits -----------------------------------------------------------------------------------------
def test_a_file_over_the_upload_limit_is_413(alice, owned, root, settings):
    settings.AGENT_MAX_UPLOAD_BYTES = 100
    api = client_of(alice)
    assert upload(api, owned, "ok.bin", b"x" * 100).status_code == 201
    response = upload(api, owned, "big.bin", b"x" * 101)
    assert response.status_code == 413
    assert "100-byte upload limit" in response.json()["message"]
    # a body far over the limit is refused from its Content-Length, before it is parsed
    response = upload(api, owned, "huge.bin", b"x" * 200_000)
    assert response.status_code == 413
    assert sorted(os.listdir(workspace_path(root, owned.pk))) == ["ok.bin"]


def test_the_conversations_files_together_are_held_to_the_workspace_quota(alice, owned, root, settings):
    settings.AGENT_WORKSPACE_MAX_BYTES = 250
    api = client_of(alice)
    assert upload(api, owned, "a.bin", b"a" * 200).status_code == 201
    response = upload(api, owned, "b.bin", b"b" * 100)
    assert response.status_code == 413
    assert "250-byte total" in response.json()["message"] and "50 bytes are left" in response.json()["message"]
    # replacing a file counts only the difference
    assert upload(api, owned, "a.bin", b"a" * 240).status_code == 201
    assert sorted(os.listdir(workspace_path(root, owned.pk))) == ["a.bin"]


def fill_with_small_files(workspace, folders: int = 40, per_folder: int = 50) -> int:
    """Many one-byte files in folders, as an agent's work leaves them: measuring the workspace then
    takes a moment, which is when a check that is not held with its write lets another one in."""
    for folder in range(folders):
        (workspace / f"work{folder:02d}").mkdir(parents=True)
        for n in range(per_folder):
            (workspace / f"work{folder:02d}" / f"{n}.txt").write_bytes(b"x")
    return folders * per_folder


def test_parallel_uploads_never_pass_the_quota(alice, owned, root, settings):
    """Twelve parallel 100 KB uploads into room for four: four are stored, eight are 413."""
    workspace = workspace_path(root, owned.pk)
    small = fill_with_small_files(workspace)
    settings.AGENT_WORKSPACE_MAX_BYTES = small + 400_000
    clients = [client_of(alice) for _ in range(12)]
    start = threading.Barrier(len(clients))

    def put(number: int) -> int:
        try:
            start.wait()
            return upload(clients[number], owned, f"part{number:02d}.bin", b"u" * 100_000).status_code
        finally:
            connections.close_all()  # this thread's own connection

    with ThreadPoolExecutor(len(clients)) as pool:
        codes = list(pool.map(put, range(len(clients))))
    assert sorted(codes) == [201] * 4 + [413] * 8
    assert tree_size(workspace) == small + 400_000
    assert len([name for name in os.listdir(workspace) if name.startswith("part")]) == 4


def test_parallel_uploads_and_write_file_calls_share_one_quota(alice, owned, root, settings):
    """Uploads and the agent's write_file (each call on an event loop of its own, as in several server
    processes) into room for four: four are written in all, and the rest are refused."""
    from chat.agent.tools import ToolError
    from chat.runtime.build import tool_context
    from chat.tools.files import write_file

    workspace = workspace_path(root, owned.pk)
    small = fill_with_small_files(workspace)
    settings.AGENT_WORKSPACE_MAX_BYTES = small + 400_000
    settings.AGENT_FILE_MAX_BYTES = 200_000
    clients = [client_of(alice) for _ in range(6)]
    start = threading.Barrier(12)

    def by_upload(number: int) -> bool:
        try:
            start.wait()
            return upload(clients[number], owned, f"up{number:02d}.bin", b"u" * 100_000).status_code == 201
        finally:
            connections.close_all()

    def by_tool(number: int) -> bool:
        context = tool_context(conversation_id=str(owned.pk), user_id=str(alice.pk))
        start.wait()
        try:
            asyncio.run(write_file(f"tool{number:02d}.txt", "t" * 100_000, context))
        except ToolError as exc:
            assert "quota" in str(exc)
            return False
        finally:
            connections.close_all()
        return True

    with ThreadPoolExecutor(12) as pool:
        written = [pool.submit(by_upload, n) for n in range(6)] + [pool.submit(by_tool, n) for n in range(6)]
        done = [future.result() for future in written]
    assert done.count(True) == 4
    assert tree_size(workspace) == small + 400_000


# -- names ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("../x", "'..'"),
        ("a/../../x", "'..'"),
        (".env", "'.env'"),
        ("notes/.hidden", "'.hidden'"),
        ("a\\b", "backslash"),
        ("a\x07b.txt", "control character (U+0007)"),
        ("line\nbreak", "control character (U+000A)"),
        ("evil\u202egnp.exe", "control character (U+202E)"),
        ("/etc/passwd", "relative"),
        ("~/x", "relative"),
        ("x" * 300, "longer than 255 bytes"),
        (" padded.txt", "space"),
    ],
)
def test_hostile_names_are_refused_with_a_clear_400(alice, owned, root, path, says, tmp_path):
    response = upload(client_of(alice), owned, "innocent.txt", b"x", path=path)
    assert response.status_code == 400
    assert says in response.json()["message"]
    assert not workspace_path(root, owned.pk).exists()
    assert sorted(os.listdir(tmp_path)) == ["workspaces"]


def test_a_browsers_file_name_keeps_only_its_last_part(alice, owned, root):
    response = upload(client_of(alice), owned, "../../escape.txt", b"x")
    assert response.status_code == 201 and response.json()["path"] == "escape.txt"
    assert os.listdir(root.parent) == ["workspaces"]


def test_unicode_names_are_fine_and_download_under_their_name(alice, owned, root):
    api = client_of(alice)
    response = upload(api, owned, "数据 café.csv", b"1,2")
    assert response.status_code == 201 and response.json()["path"] == "数据 café.csv"
    download = api.get(files_url(owned, "数据 café.csv"))
    assert download.status_code == 200
    assert download["Content-Disposition"] == "attachment; filename*=utf-8''%E6%95%B0%E6%8D%AE%20caf%C3%A9.csv"


def test_a_symlink_out_of_the_workspace_is_not_served(alice, owned, root, tmp_path):
    (tmp_path / "secret").write_text("outside")
    workspace_path(root, owned.pk).mkdir()
    os.symlink(tmp_path / "secret", workspace_path(root, owned.pk) / "link.txt")
    api = client_of(alice)
    assert api.get(files_url(owned, "link.txt")).status_code == 404
    assert api.delete(files_url(owned, "link.txt")).status_code == 404
    assert (tmp_path / "secret").read_text() == "outside"


def test_an_uploaded_html_file_downloads_as_an_inert_attachment(alice, owned, root):
    api = client_of(alice)
    page = b"<html><script>alert(document.cookie)</script></html>"
    upload(api, owned, "page.html", page)
    upload(api, owned, "image.svg", b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>')
    for name in ("page.html", "image.svg"):
        response = api.get(files_url(owned, name))
        assert response.status_code == 200
        assert response["Content-Type"] == "application/octet-stream"
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["Content-Disposition"] == f'attachment; filename="{name}"'
        assert "sandbox" in response["Content-Security-Policy"]
    assert b"".join(api.get(files_url(owned, "page.html")).streaming_content) == page


# -- PDF --------------------------------------------------------------------------------------------
def test_a_pdfs_text_is_extracted_next_to_it(alice, owned, root):
    api = client_of(alice)
    response = upload(api, owned, "report.pdf", minimal_pdf("Quarterly revenue 4711 EUR"))
    assert response.status_code == 201
    assert response.json()["textPath"] == "report.pdf.txt"
    text = (workspace_path(root, owned.pk) / "report.pdf.txt").read_text()
    assert "--- page 1 ---" in text and "Quarterly revenue 4711 EUR" in text
    # deleting the PDF takes its text along
    assert api.delete(files_url(owned, "report.pdf")).status_code == 204
    assert api.get(files_url(owned)).json()["files"] == []


def test_a_broken_pdf_is_stored_without_text(alice, owned, root):
    response = upload(client_of(alice), owned, "broken.pdf", b"%PDF-1.4 this is not really a pdf")
    assert response.status_code == 201 and "textPath" not in response.json()
    assert os.listdir(workspace_path(root, owned.pk)) == ["broken.pdf"]


def test_pdf_text_is_cut_at_the_limit():
    assert len(pdf_text(io.BytesIO(minimal_pdf("A long line of text")), max_chars=20)) == 21  # and a newline


# -- attachments on messages -----------------------------------------------------------------------
async def aupload(user, conversation, name: str, data: bytes):
    return await sync_to_async(lambda: upload(client_of(user), conversation, name, data))()


async def _run(socket, frame) -> list[dict]:
    await socket.send(frame)
    return await socket.run_to_end()


async def test_a_run_reads_an_attached_file(alice, owned, root, registry, llm_settings, settings):
    from tests.asgi_socket import Socket
    from tests.fakellm import text_reply, tool_call_reply

    settings.AGENT_TOOLS = ["read_file", "load_skill"]
    await aupload(alice, owned, "sales.csv", b"region,amount\nnorth,10\nsouth,32\n")
    llm_settings.script(tool_call_reply(("read_file", {"path": "sales.csv"})), text_reply("Two regions, 42 in all."))
    socket = Socket(alice, owned.pk)
    await socket.connect()
    await socket.history()
    frames = await _run(socket, {"type": "message", "content": "Summarise this", "attachments": ["sales.csv"]})
    assert frames[0]["type"] == "user_message"
    assert frames[0]["content"] == "Summarise this"
    assert frames[0]["attachments"] == [{"path": "sales.csv", "size": 32}]
    tool_end = next(f for f in frames if f["type"] == "tool_end")
    assert tool_end["isError"] is False and "north,10" in tool_end["result"]
    assert frames[-1]["status"] == "succeeded"
    told = llm_settings.requests[0]["messages"][-1]
    assert told["role"] == "user"
    assert told["content"].startswith("Summarise this\n\n[Attached files in your workspace")
    assert "sales.csv (32 bytes)" in told["content"]
    # the csv skill is offered in the system message
    assert "csv-data-summary" in llm_settings.requests[0]["messages"][0]["content"]

    # a regenerate keeps the attachments, and so does the model's note
    regenerated = await _run(socket, {"type": "regenerate", "seq": frames[0]["seq"]})
    assert regenerated[0]["attachments"] == [{"path": "sales.csv", "size": 32}]
    assert "sales.csv (32 bytes)" in llm_settings.requests[-1]["messages"][-1]["content"]
    edited = await _run(socket, {"type": "edit", "seq": frames[0]["seq"], "content": "Only the north?"})
    assert edited[0]["attachments"] == [{"path": "sales.csv", "size": 32}]
    await socket.close()

    # replay after a reconnect carries them too
    again = Socket(alice, owned.pk)
    await again.connect()
    replayed = [f for f in await again.history() if f["type"] == "user_message"]
    assert [f.get("attachments") for f in replayed] == [[{"path": "sales.csv", "size": 32}]] * 3
    await again.close()


async def test_a_pdf_attachment_points_the_model_at_its_text(alice, owned, root, registry, llm_settings, settings):
    from tests.asgi_socket import Socket
    from tests.fakellm import text_reply, tool_call_reply

    settings.AGENT_TOOLS = ["read_file"]
    await aupload(alice, owned, "memo.pdf", minimal_pdf("Meet at noon"))
    llm_settings.script(tool_call_reply(("read_file", {"path": "memo.pdf.txt"})), text_reply("At noon."))
    socket = Socket(alice, owned.pk)
    await socket.connect()
    await socket.history()
    frames = await _run(socket, {"type": "message", "content": "When?", "attachments": ["memo.pdf"]})
    assert frames[0]["attachments"][0]["textPath"] == "memo.pdf.txt"
    assert "its text is in memo.pdf.txt" in llm_settings.requests[0]["messages"][-1]["content"]
    assert "Meet at noon" in next(f for f in frames if f["type"] == "tool_end")["result"]
    await socket.close()


async def test_files_alone_are_a_message(alice, make_user, root, registry, llm_settings):
    """A message of files with no text is a valid message (docs/protocol.md, "Attachments"): the model
    is told of the files alone; an untitled conversation is named after them. No text and no
    file is still an empty message."""
    from chat.models import Conversation, Run
    from tests.asgi_socket import Socket
    from tests.fakellm import text_reply

    untitled = await sync_to_async(conversation_create)(owner=alice, title="")
    await aupload(alice, untitled, "notes.txt", b"buy milk")
    llm_settings.script(text_reply("A shopping list."))
    socket = Socket(alice, untitled.pk)
    await socket.connect()
    await socket.history()
    for empty in ({"content": "  "}, {"content": "", "attachments": []}):
        await socket.send({"type": "message", **empty})
        refused = await socket.recv()
        assert (refused["type"], refused["code"], refused["detail"]) == ("error", "BAD_REQUEST", "empty content")
    assert not await Run.objects.filter(conversation=untitled).aexists()
    frames = await _run(socket, {"type": "message", "content": "", "attachments": ["notes.txt"]})
    assert frames[0]["type"] == "user_message" and frames[0]["content"] == ""
    assert frames[0]["attachments"] == [{"path": "notes.txt", "size": 8}]
    assert frames[-1]["status"] == "succeeded"
    told = llm_settings.requests[0]["messages"][-1]
    assert told["content"] == "[Attached files in your workspace (read them with read_file): notes.txt (8 bytes)]"
    assert (await Conversation.objects.aget(pk=untitled.pk)).title == "notes.txt"
    await socket.close()


@pytest.mark.parametrize(
    ("attachments", "detail"),
    [
        (["missing.csv"], "does not exist"),
        (["../etc/passwd"], "'..'"),
        ("data.csv", "wrong type: attachments"),
        ([1], "wrong type: attachments"),
        (["a.csv"] * 0 + [f"f{i}" for i in range(21)], "at most 20"),
    ],
)
async def test_attachments_that_are_not_there_are_bad_requests(alice, owned, root, registry, attachments, detail):
    from chat.models import Run
    from tests.asgi_socket import Socket

    await aupload(alice, owned, "data.csv", b"1")
    socket = Socket(alice, owned.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "hi", "attachments": attachments})
    frame = await socket.recv()
    assert frame["type"] == "error" and frame["code"] == "BAD_REQUEST" and "seq" not in frame
    assert detail in frame["detail"]
    assert not await Run.objects.filter(conversation=owned).aexists()
    await socket.close()


def test_another_users_file_cannot_be_attached(alice, owned, make_user, root):
    """Attachments are looked up in the socket's own conversation only."""
    from chat.conversations.uploads import FileRefused, attachments_resolve

    upload(client_of(alice), owned, "mine.txt", b"x")
    theirs = conversation_create(owner=make_user("bob"))
    with pytest.raises(FileRefused):
        attachments_resolve(conversation_id=theirs.pk, paths=["mine.txt"])


# -- export and import ------------------------------------------------------------------------------
def _export_with_attachments(attachments) -> bytes:
    return json.dumps(
        {
            "conversation": {"title": "t"},
            "events": [
                {"seq": 1, "runId": "r", "type": "user_message", "content": "hi", "attachments": attachments},
                {"seq": 2, "runId": "r", "type": "complete", "status": "succeeded"},
            ],
        }
    ).encode()


def test_import_keeps_attachments_and_refuses_malformed_ones(alice):
    good = [{"path": "data.csv", "size": 3}]
    imported = parse_import(_export_with_attachments(good))
    assert imported.runs[0].events[0][1]["attachments"] == good
    for bad in ("data.csv", [{"path": "x"}], [{"path": "", "size": 1}], [{"path": "x", "size": True}], ["x"]):
        with pytest.raises(ImportRefused, match="attachments"):
            parse_import(_export_with_attachments(bad))


def test_export_keeps_attachments(alice, owned, root):
    api = client_of(alice)
    upload(api, owned, "data.csv", b"1,2")
    conversation = conversation_import(
        owner=alice, imported=parse_import(_export_with_attachments([{"path": "data.csv", "size": 3}]))
    )
    exported = json.loads(response_body(api.get(f"/api/conversations/{conversation.pk}/export/?format=json")))
    assert exported["events"][0]["attachments"] == [{"path": "data.csv", "size": 3}]
    markdown = api.get(f"/api/conversations/{conversation.pk}/export/?format=markdown").content.decode()
    assert "- Attached: `data.csv` (3 bytes)" in markdown
