"""Files a user puts into a conversation's workspace (docs/protocol.md, "Files"): upload, list,
download, delete, and the attachments a message names.

The workspace is the one the agent's file tools work in (chat.tools.confine), so an
uploaded file is read with `read_file` like any other. Every path goes through that
module's confinement (relative, no `..`, no symlink out, opened without following a
swapped-in symlink) after the stricter name rules of `upload_path`: a user names files
that other people's browsers will download, so names that hide (`.env`), spoof (bidi
controls) or break lines are refused with a clear message rather than rewritten.

One quota for the workspace: AGENT_WORKSPACE_MAX_BYTES, the one write_file and bash keep,
so the tools never find a workspace that uploads filled past their own limit. The quota check
and the write are one step under chat.conversations.workspaces.workspace_locked (a database lock), so that
parallel uploads, through any number of server processes, cannot all fit into the same room.

PDF: the text of an uploaded `x.pdf` is extracted once, at upload, into `x.pdf.txt` next
to it (pypdf). Extracting once means the model reads it with plain read_file (in chunks,
by offset) or greps it with bash, a broken PDF is reported to the uploader rather than to
the model on every read, and the agent's tools stay format-agnostic.
"""

from __future__ import annotations

import logging
import os
import unicodedata
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, BinaryIO

from django.conf import settings

from chat.agent.text import clean, invalid_reason
from chat.agent.tools import ToolError
from chat.conversations import images, thumbnails
from chat.conversations.workspaces import workspace_locked
from chat.models import Conversation
from chat.tools.confine import MAX_DEPTH, MAX_NAME_CHARS, MAX_PATH_CHARS, Confined, workspace_path

log = logging.getLogger(__name__)

MAX_LISTED = 1_000
MAX_ATTACHMENTS = 20
PDF_TEXT_SUFFIX = ".txt"
PDF_MAX_PAGES = 500
# Bidirectional overrides and isolates make "cod.exe" display as "exe.doc" and the like.
_BIDI_CONTROLS = frozenset("\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class FileRefused(Exception):
    """The request cannot be done: `status` is the HTTP status to answer (400, 404, 413)."""

    def __init__(self, message: str, *, status: int = 400):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Stored:
    path: str
    size: int
    text_path: str | None = None  # a PDF's extracted text, when there was any
    image: images.ImageInfo | None = None  # what it is as an image, known by its content

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "size": self.size}
        if self.text_path:
            out["textPath"] = self.text_path
        if self.image:
            out["image"] = self.image.to_json()
        return out


def upload_path(raw: Any) -> str:
    """The workspace-relative path a user gave, normalised ("a//b" -> "a/b"), or FileRefused (400)."""
    if not isinstance(raw, str) or not raw.strip():
        raise FileRefused("the file needs a name")
    if len(raw) > MAX_PATH_CHARS:
        raise FileRefused(f"the name is longer than {MAX_PATH_CHARS} characters")
    reason = invalid_reason(raw)
    if reason:
        raise FileRefused(f"the name contains {reason}")
    for char in raw:
        if unicodedata.category(char) in ("Cc", "Zl", "Zp") or char in _BIDI_CONTROLS:
            raise FileRefused(f"the name contains a control character (U+{ord(char):04X})")
    if "\\" in raw:
        raise FileRefused("the name contains a backslash; use / to separate folders")
    if raw.startswith("/") or raw.startswith("~"):
        raise FileRefused("the name must be relative to the conversation's files, not absolute")
    parts = [part for part in raw.split("/") if part]
    if not parts:
        raise FileRefused("the file needs a name")
    if len(parts) > MAX_DEPTH:
        raise FileRefused(f"the name is nested deeper than {MAX_DEPTH} folders")
    for part in parts:
        if part.startswith("."):
            raise FileRefused(f"{part!r}: names starting with '.' (hidden files, '..') are not allowed")
        if part != part.strip():
            raise FileRefused(f"{part!r}: a name may not begin or end with a space")
        if len(part.encode()) > MAX_NAME_CHARS:
            raise FileRefused(f"a name in the path is longer than {MAX_NAME_CHARS} bytes")
    return "/".join(parts)


def _workspace(conversation_id) -> Confined:
    return Confined(workspace_path(settings.AGENT_WORKSPACE_ROOT, conversation_id))


def _refused(exc: ToolError, *, status: int = 400) -> FileRefused:
    return FileRefused(str(exc), status=status)


def _quota_room(workspace: Confined, path: str) -> int:
    """Bytes the workspace may still take when `path` is replaced."""
    try:
        return workspace.room(path, settings.AGENT_WORKSPACE_MAX_BYTES)
    except ToolError as exc:  # folders nested past MAX_DEPTH: over any quota
        raise _refused(exc, status=413) from None


@contextmanager
def _locked(conversation_id) -> Iterator[None]:
    try:
        with workspace_locked(conversation_id):
            yield
    except Conversation.DoesNotExist:
        raise FileRefused("the conversation was deleted", status=404) from None


def file_store(*, conversation_id, path: str, chunks: Iterable[bytes], size: int, source: BinaryIO) -> Stored:
    """Write an upload of `size` bytes to `path` (already checked by upload_path); 413 over
    AGENT_MAX_UPLOAD_BYTES or the workspace quota. `source` is the upload's file, read again
    for a PDF's text."""
    limit = settings.AGENT_MAX_UPLOAD_BYTES
    if size > limit:
        raise FileRefused(f"the file is {size} bytes, more than the {limit}-byte upload limit", status=413)
    image = _image_of(source)
    workspace = _workspace(conversation_id)
    try:
        workspace.locate(path)  # a path out of the workspace is a bad name (400), not a full workspace (413)
    except ToolError as exc:
        raise _refused(exc) from None
    with _locked(conversation_id):
        room = _quota_room(workspace, path)
        if size > room:
            raise FileRefused(
                f"the conversation's files would pass their {settings.AGENT_WORKSPACE_MAX_BYTES}-byte total: "
                f"{max(room, 0)} bytes are left; delete some files first",
                status=413,
            )
        try:
            workspace.write_chunks(path, chunks)
        except ToolError as exc:
            raise _refused(exc) from None
    thumbnails.forget(conversation_id, path)  # of the file it replaced
    text_path = _store_pdf_text(conversation_id, workspace, path, source) if path.lower().endswith(".pdf") else None
    return Stored(path=path, size=size, text_path=text_path, image=image)


def _image_of(source: BinaryIO) -> images.ImageInfo | None:
    """The upload as an image (its header only), or None; a decompression bomb is refused (400)."""
    try:
        source.seek(0)
        return images.describe(source)
    except images.NotAnImage as exc:
        raise FileRefused(f"{exc}; scale it down before uploading it") from None
    finally:
        source.seek(0)


def pdf_text(source: BinaryIO, *, max_chars: int) -> str:
    """The text of a PDF's pages (at most PDF_MAX_PAGES), a marker line before each page."""
    from pypdf import PdfReader  # imported on first use: most servers never see a PDF

    reader = PdfReader(source)
    if reader.is_encrypted:
        reader.decrypt("")  # many PDFs are "encrypted" with an empty user password
    pages: list[str] = []
    length = 0
    for number, page in enumerate(reader.pages[:PDF_MAX_PAGES], start=1):
        text = f"--- page {number} ---\n{page.extract_text() or ''}".rstrip()
        pages.append(text)
        length += len(text) + 2
        if length >= max_chars:
            break
    return clean("\n\n".join(pages)[:max_chars]) + "\n"


def _store_pdf_text(conversation_id, workspace: Confined, path: str, source: BinaryIO) -> str | None:
    """The PDF's text written next to it when it fits the quota; extracted before the workspace is
    locked (pypdf may take seconds), measured and written under the lock."""
    text_path = path + PDF_TEXT_SUFFIX
    try:
        source.seek(0)
        text = pdf_text(source, max_chars=settings.AGENT_MAX_UPLOAD_BYTES)
    except Exception as exc:
        # pypdf raises many kinds on a malformed (or hostile) file; the upload itself stands. One line
        # and no traceback: anyone can upload a broken PDF, and the log is for the operators.
        log.warning("could not extract the text of %s: %s: %s", path, type(exc).__name__, exc)
        return None
    data = text.encode()
    try:
        with _locked(conversation_id):
            if len(data) > _quota_room(workspace, text_path):
                return None
            workspace.write_bytes(text_path, data)
    except (ToolError, FileRefused):
        return None
    return text_path


def _visible(path: str) -> bool:
    return not any(part.startswith(".") for part in path.split("/"))


def files_list(*, conversation_id) -> list[dict[str, Any]]:
    """The workspace's regular files (what the agent wrote too), hidden ones left out."""
    entries, _cut = _workspace(conversation_id).entries(".", limit=MAX_LISTED)
    return [
        {"path": rel, "size": size, "modified": datetime.fromtimestamp(mtime, tz=UTC).isoformat()}
        for rel, size, mtime, is_dir in entries
        if not is_dir and _visible(rel)
    ]


def file_open(*, conversation_id, path: str) -> tuple[BinaryIO, int]:
    """The file at `path` opened for reading, and its size; 404 when there is none."""
    try:
        fd, size = _workspace(conversation_id).open_file(path)
    except ToolError as exc:
        raise _refused(exc, status=404) from None
    return os.fdopen(fd, "rb"), size


def file_remove(*, conversation_id, path: str) -> None:
    """Delete the file at `path`, its thumbnails, and a PDF's extracted text; 404 when there is none."""
    workspace = _workspace(conversation_id)
    try:
        workspace.remove_file(path)
    except ToolError as exc:
        raise _refused(exc, status=404) from None
    thumbnails.forget(conversation_id, path)
    if path.lower().endswith(".pdf") and workspace.size_of(path + PDF_TEXT_SUFFIX):
        try:
            workspace.remove_file(path + PDF_TEXT_SUFFIX)
        except ToolError:
            pass  # removed meanwhile


def attachments_resolve(*, conversation_id, paths: list[str]) -> list[dict[str, Any]]:
    """The `attachments` of a user_message for the files a message names: [{"path", "size"}]
    (plus "textPath" for a PDF whose text was extracted, "image" for an image, known by its
    content as it is now); FileRefused when one is not there."""
    if len(paths) > MAX_ATTACHMENTS:
        raise FileRefused(f"at most {MAX_ATTACHMENTS} attachments per message")
    workspace = _workspace(conversation_id)
    found: list[dict[str, Any]] = []
    for raw in dict.fromkeys(paths):  # the same file named twice is attached once
        path = upload_path(raw)
        try:
            fd, size = workspace.open_file(path)
        except ToolError as exc:
            raise FileRefused(f"attachment {path!r}: {exc}") from None
        with os.fdopen(fd, "rb") as handle:
            try:
                image = images.describe(handle)
            except images.NotAnImage:
                image = None  # too large to decode: the model is told where the file is, as for any file
        attachment: dict[str, Any] = {"path": path, "size": size}
        if image:
            attachment["image"] = image.to_json()
        if path.lower().endswith(".pdf") and workspace.size_of(path + PDF_TEXT_SUFFIX):
            attachment["textPath"] = path + PDF_TEXT_SUFFIX
        found.append(attachment)
    return found
