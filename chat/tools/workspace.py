"""Confinement of a tool's file access to one folder (a conversation's workspace, a skill).

A path the model sends is checked in two steps:

1. Lexically: relative, no `..` component, no NUL byte, no backslash, sane lengths.
2. Against the disk: `os.path.realpath` must stay inside the root (a symlink
   pointing out is refused), and the file is then opened by walking the *resolved*
   path one component at a time from a descriptor of the root with `O_NOFOLLOW`.
   Step 2's walk closes the race in which something running at the same time
   (the bash tool, in the same workspace) swaps a checked directory for a symlink
   between the check and the open: the walk then fails instead of following it.

Symlinks that stay inside the root are followed (their resolved target is walked).
"""

from __future__ import annotations

import errno
import os
import stat
from contextlib import contextmanager
from collections.abc import Iterator
from pathlib import Path

from chat.agent.tools import ToolError

MAX_PATH_CHARS = 1024
MAX_NAME_CHARS = 255


def check_relative(path: str, *, allow_root: bool = False) -> list[str]:
    """The path's components, or ToolError saying why the path is not acceptable."""
    if not isinstance(path, str):
        raise ToolError("path must be a string")
    if "\x00" in path:
        raise ToolError("path contains a NUL byte")
    if len(path) > MAX_PATH_CHARS:
        raise ToolError(f"path is longer than {MAX_PATH_CHARS} characters")
    if "\\" in path:
        raise ToolError("path contains a backslash; use / to separate folders")
    text = path.strip()
    if text.startswith("/") or text.startswith("~"):
        raise ToolError(f"absolute path {path!r} refused: use a path relative to the workspace, such as 'data.csv'")
    parts = [part for part in text.split("/") if part not in ("", ".")]
    if any(part == ".." for part in parts):
        raise ToolError(f"path {path!r} refused: '..' is not allowed, the workspace is the top folder")
    if any(len(part.encode()) > MAX_NAME_CHARS for part in parts):
        raise ToolError(f"a name in {path!r} is longer than {MAX_NAME_CHARS} bytes")
    if not parts and not allow_root:
        raise ToolError("path is empty; give a file name relative to the workspace")
    return parts


def _resolved_parts(root: Path, parts: list[str], display: str) -> list[str]:
    """The components of the path's real location below the root; refuses escapes."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(os.path.join(real_root, *parts))
    if real != real_root and not real.startswith(real_root + os.sep):
        raise ToolError(f"path {display!r} refused: it leads out of the workspace through a symlink")
    relative = os.path.relpath(real, real_root)
    return [] if relative == "." else relative.split(os.sep)


def _walk_error(exc: OSError, display: str) -> ToolError:
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        return ToolError(f"path {display!r} refused: a symlink appeared in it while it was being opened")
    if exc.errno == errno.ENOENT:
        return ToolError(f"{display!r} does not exist")
    if exc.errno == errno.ENOTDIR:
        return ToolError(f"{display!r}: a part of the path is not a folder")
    if exc.errno == errno.EISDIR:
        return ToolError(f"{display!r} is a folder, not a file")
    if exc.errno == errno.EACCES:
        return ToolError(f"{display!r}: permission denied")
    return ToolError(f"{display!r}: {exc.strerror or exc}")


def _is_symlink(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


@contextmanager
def open_dir(root: Path, parts: list[str], *, create: bool = False, display: str = "") -> Iterator[int]:
    """A descriptor of the folder `parts` below root, walked without following symlinks."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts:
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno == errno.ENOTDIR and _is_symlink(part, fd):
                    exc = OSError(errno.ELOOP, "symlink")
                raise _walk_error(exc, display or "/".join(parts)) from None
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


class Confined:
    """A root folder and the safe ways to reach what is below it."""

    def __init__(self, root: Path, *, label: str = "workspace"):
        self.root = Path(root)
        self.label = label

    def locate(self, path: str, *, allow_root: bool = False) -> list[str]:
        """The resolved components of an existing-or-not path inside the root."""
        parts = check_relative(path, allow_root=allow_root)
        if not self.root.is_dir():
            return parts
        return _resolved_parts(self.root, parts, path)

    def read_bytes(self, path: str, *, offset: int = 0, limit: int) -> tuple[bytes, int]:
        """Up to `limit` bytes from `offset`, and the file's size. Regular files only."""
        parts = self.locate(path)
        if not parts:
            raise ToolError(f"{path!r} is the {self.label} folder, not a file")
        with open_dir(self.root, parts[:-1], display=path) as dir_fd:
            try:
                # O_NONBLOCK: opening a FIFO someone left here must not hang the tool.
                fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
            except OSError as exc:
                raise _walk_error(exc, path) from None
        try:
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):
                raise ToolError(f"{path!r} is a folder, not a file; use list_files")
            if not stat.S_ISREG(info.st_mode):
                raise ToolError(f"{path!r} is not a regular file")
            os.set_blocking(fd, True)
            os.lseek(fd, offset, os.SEEK_SET)
            chunks, remaining = [], limit
            while remaining > 0:
                chunk = os.read(fd, min(remaining, 65536))
                if not chunk:
                    break
                chunks.append(chunk)
                remaining -= len(chunk)
            return b"".join(chunks), info.st_size
        finally:
            os.close(fd)

    def write_bytes(self, path: str, data: bytes) -> None:
        parts = self.locate(path)
        if not parts:
            raise ToolError("path is empty; give a file name relative to the workspace")
        self.root.mkdir(parents=True, exist_ok=True)
        with open_dir(self.root, parts[:-1], create=True, display=path) as dir_fd:
            try:
                fd = os.open(
                    parts[-1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644, dir_fd=dir_fd
                )
            except OSError as exc:
                raise _walk_error(exc, path) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ToolError(f"{path!r} is not a regular file")
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)

    def entries(self, path: str = ".", *, limit: int) -> tuple[list[tuple[str, int, float, bool]], bool]:
        """(relative path, size, mtime, is_dir) below `path`, recursively, without following symlinks."""
        parts = self.locate(path, allow_root=True)
        if not self.root.is_dir():
            return [], False
        found: list[tuple[str, int, float, bool]] = []
        with open_dir(self.root, parts, display=path) as start:
            for folder, dirs, files, dir_fd in os.fwalk(".", dir_fd=start, follow_symlinks=False):
                dirs.sort()
                prefix = "/".join([*parts, *[p for p in folder.split("/") if p not in ("", ".")]])
                for name in sorted(dirs) + sorted(files):
                    try:
                        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                    except OSError:
                        continue
                    rel = f"{prefix}/{name}" if prefix else name
                    found.append((rel, info.st_size, info.st_mtime, stat.S_ISDIR(info.st_mode)))
                    if len(found) >= limit:
                        return found, True
        return found, False

    def total_size(self) -> int:
        total = 0
        if not self.root.is_dir():
            return 0
        for _folder, _dirs, files, dir_fd in os.fwalk(self.root, follow_symlinks=False):
            for name in files:
                try:
                    total += os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_size
                except OSError:
                    pass
        return total


def workspace_of(context) -> Confined:
    """The run's workspace, or ToolError when the run has none (no conversation)."""
    if context is None or context.workspace is None:
        raise ToolError("this run has no workspace (it does not belong to a conversation)")
    return Confined(Path(context.workspace))
