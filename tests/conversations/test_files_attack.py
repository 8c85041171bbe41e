"""Hostile values of every field of the files API (docs/protocol.md, "Files"): names, sizes, multipart
oddities, paths that try to leave the workspace, other users' files, a file deleted while it is
downloaded. Each answers a clear 4xx in JSON, never a 500, and nothing lands outside the workspace."""

from __future__ import annotations

import io
import os

import pytest
from django.test import Client

from chat.conversations.services import conversation_create, conversation_delete
from chat.tools.confine import workspace_path

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


@pytest.fixture
def api(alice):
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    return client


def files_url(conversation, path: str = "") -> str:
    return f"/api/conversations/{conversation.pk}/files/{path}"


def outside_untouched(root) -> None:
    assert sorted(os.listdir(root.parent)) == ["workspaces"]


def assert_json_error(response, status: int) -> dict:
    assert response.status_code == status, (response.status_code, response.content[:300])
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {"error", "message"} and body["message"]
    return body


BOUNDARY = "XyZ"


def multipart(*parts: tuple[str, str | None, bytes]) -> bytes:
    """A multipart body by hand: (field name, file name or None, content) per part."""
    out = b""
    for name, filename, content in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename is not None else "")
        out += f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + content + b"\r\n"
    return out + f"--{BOUNDARY}--\r\n".encode()


def post_raw(api, conversation, body: bytes, content_type: str = f"multipart/form-data; boundary={BOUNDARY}"):
    return api.generic("POST", files_url(conversation), body, content_type=content_type)


# -- names in the URL (download, delete) -------------------------------------------------------------
HOSTILE_URL_PATHS = [
    "..%2F..%2Fetc%2Fpasswd",
    "%2e%2e/%2e%2e/etc/passwd",
    "a/../../x",
    "%00",
    "a%00b.txt",
    "%ED%A0%80.txt",  # a UTF-8-encoded lone surrogate
    "%FF%FE.txt",  # not UTF-8 at all
    "x" * 2000,
    "a/" * 200 + "x",
    "%E2%80%AEgnp.exe",
    ".env",
    "a%5Cb",
    "~/x",
    "notes/",
    "%20",
]


@pytest.mark.parametrize("path", HOSTILE_URL_PATHS)
@pytest.mark.parametrize("method", ["get", "delete"])
def test_hostile_paths_in_the_url_are_4xx(api, owned, root, path, method):
    (root / str(owned.pk)).mkdir()
    (root / str(owned.pk) / "keep.txt").write_text("keep")
    response = getattr(api, method)(files_url(owned, path))
    assert_json_error(response, response.status_code)
    assert response.status_code in (400, 404)
    assert os.listdir(root / str(owned.pk)) == ["keep.txt"]
    outside_untouched(root)


# -- names in the upload -------------------------------------------------------------------------------
HOSTILE_NAMES = [
    "..",
    ".",
    "a/./b",
    "a/../b",
    "\x00",
    "a\x00b",
    "x" * 256,
    "é" * 128,  # 256 bytes
    "/".join(["a"] * 129),
    "a" * 1025,
    " ",
    "a /b",
    "\u2028x",
    "\u202ex",
    "\x7f",
    "a\\..\\b",
    "con/" * 0 + "//",
]


def test_a_url_path_holding_a_line_break_matches_no_route(api, owned, root):
    assert api.get(files_url(owned, "%0Aline")).status_code == 404


def test_a_path_field_that_is_not_utf8_is_stored_with_replacement_characters(api, owned, root):
    """Django decodes form fields with errors="replace": the bytes of a lone surrogate become U+FFFD."""
    body = multipart(("path", None, "\ud800.txt".encode("utf-8", "surrogatepass")), ("file", "x.txt", b"d"))
    response = post_raw(api, owned, body)
    assert response.status_code == 201 and response.json()["path"] == "\ufffd\ufffd\ufffd.txt"
    outside_untouched(root)


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_path_fields_are_a_clear_400(api, owned, root, name):
    body = multipart(("path", None, name.encode("utf-8", "surrogatepass")), ("file", "x.txt", b"data"))
    assert_json_error(post_raw(api, owned, body), 400)
    assert not workspace_path(root, owned.pk).exists()
    outside_untouched(root)


@pytest.mark.parametrize(
    "filename",
    ["..", ".", "../../x", "/etc/passwd", "a\\..\\..\\b", ".hidden", "", "x" * 300, "%2e%2e", "a\x01b"],
)
def test_hostile_browser_file_names_never_leave_the_workspace(api, owned, root, filename):
    response = post_raw(api, owned, multipart(("file", filename, b"data")))
    if response.status_code == 201:
        stored = response.json()["path"]
        assert "/" not in stored and not stored.startswith(".")
        assert (workspace_path(root, owned.pk) / stored).read_bytes() == b"data"
    else:
        assert_json_error(response, 400)
    outside_untouched(root)


# -- multipart oddities ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"", f"multipart/form-data; boundary={BOUNDARY}"),
        (b'--XyZ\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\nunterminated', None),
        (b"garbage without any boundary", None),
        (b'{"file": "x"}', "application/json"),
        (b"file=x", "application/x-www-form-urlencoded"),
        (multipart(("path", None, b"a.txt")), None),  # no file part
        (multipart(("file", None, b"not a file, a field")), None),
    ],
)
def test_multipart_oddities_are_a_clear_400(api, owned, root, body, content_type):
    response = post_raw(api, owned, body, **({"content_type": content_type} if content_type else {}))
    assert_json_error(response, 400)
    assert not workspace_path(root, owned.pk).exists() or os.listdir(workspace_path(root, owned.pk)) == []


@pytest.mark.parametrize(
    "body, content_type",
    [
        (b"--XyZ--\r\n", "multipart/form-data"),  # no boundary parameter
        (b"--XyZ--\r\n", "multipart/form-data; boundary="),
        (multipart(*[("file", f"f{n}.txt", b"x") for n in range(150)]), None),  # past DATA_UPLOAD_MAX_NUMBER_FILES
    ],
)
def test_bodies_django_cannot_parse_are_its_400(api, owned, root, body, content_type):
    """Refused by Django's parser, which runs before the view (the CSRF check reads the form): a 400."""
    response = post_raw(api, owned, body, **({"content_type": content_type} if content_type else {}))
    assert response.status_code == 400
    assert not workspace_path(root, owned.pk).exists()


@pytest.mark.parametrize("length", ["-1", "abc", "99999999999999999999999", ""])
def test_a_hostile_content_length_is_no_500(api, owned, root, length):
    body = multipart(("file", "a.txt", b"data"))
    response = api.generic(
        "POST", files_url(owned), body, content_type=f"multipart/form-data; boundary={BOUNDARY}",
        headers={"content-length": length},
    )  # fmt: skip
    assert response.status_code < 500


def test_an_empty_file_is_stored(api, owned, root):
    response = post_raw(api, owned, multipart(("file", "empty.txt", b"")))
    assert response.status_code == 201 and response.json() == {"path": "empty.txt", "size": 0}


# -- what is already there ----------------------------------------------------------------------------
def test_a_name_that_crosses_an_existing_file_or_folder_is_a_clear_400(api, owned, root):
    assert post_raw(api, owned, multipart(("file", "a.txt", b"x"))).status_code == 201
    assert post_raw(api, owned, multipart(("path", None, b"notes/b.txt"), ("file", "b", b"y"))).status_code == 201
    assert_json_error(post_raw(api, owned, multipart(("path", None, b"a.txt/c"), ("file", "c", b"z"))), 400)
    assert_json_error(post_raw(api, owned, multipart(("path", None, b"notes"), ("file", "n", b"z"))), 400)
    assert_json_error(api.get(files_url(owned, "notes")), 404)
    assert_json_error(api.delete(files_url(owned, "notes")), 404)
    assert_json_error(api.get(files_url(owned, "a.txt/c")), 404)
    assert sorted(os.listdir(workspace_path(root, owned.pk))) == ["a.txt", "notes"]


def test_a_symlinked_folder_out_of_the_workspace_takes_no_upload(api, owned, root, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace_path(root, owned.pk).mkdir()
    os.symlink(outside, workspace_path(root, owned.pk) / "out")
    assert_json_error(post_raw(api, owned, multipart(("path", None, b"out/x.txt"), ("file", "x", b"z"))), 400)
    assert os.listdir(outside) == []


# -- other users, deletion during a download -------------------------------------------------------------
def test_other_users_cannot_reach_a_file_by_any_path(api, owned, root, make_user):
    assert post_raw(api, owned, multipart(("file", "secret.txt", b"alice's"))).status_code == 201
    mallory = Client()
    mallory.force_login(make_user("mallory"))
    theirs = conversation_create(owner=make_user("mallory2"))
    for path in ("secret.txt", f"../{owned.pk}/secret.txt", f"..%2F{owned.pk}%2Fsecret.txt"):
        assert mallory.get(files_url(owned, path)).status_code == 404
        assert mallory.delete(files_url(owned, path)).status_code == 404
    own = Client()
    own.force_login(theirs.owner)
    for path in (f"../{owned.pk}/secret.txt", f"..%2F{owned.pk}%2Fsecret.txt"):
        assert own.get(files_url(theirs, path)).status_code in (400, 404)
    assert (workspace_path(root, owned.pk) / "secret.txt").read_bytes() == b"alice's"


def test_a_file_deleted_during_its_download_still_downloads_whole(api, owned, root):
    data = os.urandom(300_000)
    assert post_raw(api, owned, multipart(("file", "big.bin", data))).status_code == 201
    download = api.get(files_url(owned, "big.bin"))
    assert download.status_code == 200
    stream = iter(download.streaming_content)
    first = next(stream)
    assert api.delete(files_url(owned, "big.bin")).status_code == 204
    assert first + b"".join(stream) == data
    assert api.get(files_url(owned, "big.bin")).status_code == 404


def test_a_conversation_deleted_before_the_upload_lands_takes_no_file(api, owned, root):
    from chat.conversations import uploads

    conversation_id = owned.pk
    conversation_delete(conversation=owned)
    with pytest.raises(uploads.FileRefused) as refused:
        uploads.file_store(
            conversation_id=conversation_id, path="late.txt", chunks=[b"x"], size=1, source=io.BytesIO(b"x")
        )
    assert refused.value.status == 404
    assert not workspace_path(root, conversation_id).exists()
