"""Thumbnails of a conversation's images, made once and kept (docs/protocol.md, "Files"): the chat
page's (`?thumbnail=1`) and the run inspector's.

Making one decodes the image (chat.conversations.images: up to AGENT_IMAGE_MAX_INPUT_PIXELS, some
hundred megabytes for a while) and a page asks for its thumbnails each time it is shown, so the
copy is kept on disk: <AGENT_WORKSPACE_ROOT>/.thumbnails/<conversation>/<digest of the path>/
<box>-<stamp>.<jpeg|png>, where the stamp is the file's inode, size and modification time, so a
file replaced or rewritten (by an upload or by the agent's tools) gets a new thumbnail, and the
old one of that box is removed. Beside the workspaces, not in one: a workspace is the agent's,
whose tools would list the copies, count them against the quota, and could write one.

One thread of the process makes a given thumbnail; the others asking for it meanwhile wait and
read it. A thumbnail is written to a temporary name and renamed, so a reader (of any process)
never reads half of one. The copies go with their file (`forget`, the files API's delete) and
with their conversation (chat.conversations.workspaces).
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from django.conf import settings

from chat.conversations import images
from chat.tools.removal import remove_tree

log = logging.getLogger(__name__)

FOLDER = ".thumbnails"  # a dot: never the name of a conversation's workspace (a UUID)
_SUFFIX = {"image/jpeg": ".jpeg", "image/png": ".png"}
_MIME = {suffix: mime for mime, suffix in _SUFFIX.items()}

_making: dict[Path, tuple[threading.Lock, list[int]]] = {}  # thumbnail -> its lock, its users
_guard = threading.Lock()


def conversation_folder(conversation_id) -> Path:
    """Where a conversation's thumbnails are (the conversation's id checked to be a UUID)."""
    return Path(settings.AGENT_WORKSPACE_ROOT) / FOLDER / str(uuid.UUID(str(conversation_id)))


def _file_folder(conversation_id, path: str) -> Path:
    return conversation_folder(conversation_id) / hashlib.sha256(path.encode()).hexdigest()[:32]


def thumbnail(conversation_id, path: str, handle: BinaryIO, *, box: tuple[int, int], quality: int) -> tuple[str, bytes]:
    """(mime, data) of the image open as `handle` (the workspace's `path`) fitted into `box`, read
    from disk when it was made before; NotAnImage when it is not one (or is too large to decode).
    Blocking: call it in a thread."""
    stat = os.fstat(handle.fileno())
    folder = _file_folder(conversation_id, path)
    stem = f"{box[0]}x{box[1]}q{quality}-{stat.st_ino}-{stat.st_size}-{stat.st_mtime_ns}"
    found = _read(folder, stem)
    if found:
        return found
    with _only_one(folder / stem):
        found = _read(folder, stem)  # made while this thread waited
        if found:
            return found
        small = images.scaled(handle, box=box, quality=quality)
        _keep(folder, stem, small)
    return small.mime, small.data


def _read(folder: Path, stem: str) -> tuple[str, bytes] | None:
    for suffix, mime in _MIME.items():
        try:
            return mime, (folder / (stem + suffix)).read_bytes()
        except OSError:  # not made (or not readable: made again)
            continue
    return None


def _keep(folder: Path, stem: str, small: images.Scaled) -> None:
    """Written under its name at once, whole; the same box's thumbnails of the file as it was removed."""
    box = stem.split("-", 1)[0]
    written = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".new-", delete=False) as out:
            written = Path(out.name)
            out.write(small.data)
        os.replace(written, folder / (stem + _SUFFIX[small.mime]))
        written = None
        for old in folder.glob(f"{box}-*"):
            if not old.name.startswith(stem):
                old.unlink(missing_ok=True)
    except OSError as exc:
        # A full or read-only disk: the thumbnail is still answered, and made again next time.
        log.warning("could not keep the thumbnail in %s: %s", folder, exc)
    finally:
        if written is not None:
            written.unlink(missing_ok=True)


@contextmanager
def _only_one(key: Path) -> Iterator[None]:
    """Held while the thumbnail `key` is made: by one thread of the process at a time."""
    with _guard:
        lock, users = _making.setdefault(key, (threading.Lock(), [0]))
        users[0] += 1
    try:
        with lock:
            yield
    finally:
        with _guard:
            users[0] -= 1
            if not users[0]:
                del _making[key]


def forget(conversation_id, path: str) -> None:
    """The thumbnails of the workspace's `path` removed (the file was deleted); a failure is
    logged: the file's deletion stands."""
    try:
        remove_tree(_file_folder(conversation_id, path))
    except OSError as exc:
        log.warning("could not remove the thumbnails of %s: %s", path, exc)
