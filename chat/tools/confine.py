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

Walking a whole tree (its size, a listing, its removal) is iterative and never follows a
symlink: what the bash tool leaves behind is hostile input, such as folders nested thousands
deep, which would overflow the recursion of `os.fwalk` and `shutil.rmtree`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from chat.agent.tools import ToolError

MAX_PATH_CHARS = 1024
MAX_NAME_CHARS = 255
# Folders nested deeper than this are refused by the file tools and make a workspace count as
# over its quota; no real task needs them, and a walk holds one descriptor per level.
MAX_DEPTH = 128
# Default quota of a workspace (AGENT_WORKSPACE_MAX_BYTES), kept by write_file and bash alike.
WORKSPACE_MAX_BYTES = 50_000_000


def workspace_path(root: Path | str, conversation_id) -> Path:
    """The workspace folder of a conversation below AGENT_WORKSPACE_ROOT (the id is checked to be a UUID)."""
    return Path(root) / str(uuid.UUID(str(conversation_id)))


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
    if len(parts) > MAX_DEPTH:
        raise ToolError(f"path {path!r} is nested deeper than {MAX_DEPTH} folders")
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
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:  # a workspace nothing was written to yet
        raise ToolError(f"{display or '/'.join(parts)!r} does not exist") from None
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

    def open_file(self, path: str) -> tuple[int, int]:
        """A blocking read-only descriptor of the regular file at path, and its size; the caller closes it."""
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
        except BaseException:
            os.close(fd)
            raise
        return fd, info.st_size

    def read_bytes(self, path: str, *, offset: int = 0, limit: int) -> tuple[bytes, int]:
        """Up to `limit` bytes from `offset`, and the file's size. Regular files only."""
        fd, size = self.open_file(path)
        try:
            os.lseek(fd, offset, os.SEEK_SET)
            chunks, remaining = [], limit
            while remaining > 0:
                chunk = os.read(fd, min(remaining, 65536))
                if not chunk:
                    break
                chunks.append(chunk)
                remaining -= len(chunk)
            return b"".join(chunks), size
        finally:
            os.close(fd)

    def write_bytes(self, path: str, data: bytes) -> None:
        self.write_chunks(path, [data])

    def write_chunks(self, path: str, chunks: Iterable[bytes]) -> None:
        """Create or replace the regular file at path with the chunks, one at a time (an upload
        need not be held in memory). They go to a hidden temporary file renamed over path at the
        end: a write that fails (a full disk) leaves the old file whole, and no reader sees half."""
        parts = self.locate(path)
        if not parts:
            raise ToolError("path is empty; give a file name relative to the workspace")
        self.root.mkdir(parents=True, exist_ok=True)
        name, temporary = parts[-1], f".writing-{uuid.uuid4().hex}.part"
        with open_dir(self.root, parts[:-1], create=True, display=path) as dir_fd:
            self._replaceable(name, dir_fd, path)
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
            try:
                try:
                    for data in chunks:
                        view = memoryview(data)
                        while view:
                            view = view[os.write(fd, view) :]
                finally:
                    os.close(fd)
                # rename replaces a name, never follows it: a symlink put there since is replaced, not written through.
                os.rename(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException as exc:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temporary, dir_fd=dir_fd)
                if not isinstance(exc, OSError):
                    raise
                if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                    raise ToolError(f"could not write {path!r}: the disk holding the {self.label} is full") from None
                if exc.errno == errno.EISDIR:
                    raise _walk_error(exc, path) from None
                raise ToolError(f"could not write {path!r}: {exc.strerror}") from None

    @staticmethod
    def _replaceable(name: str, dir_fd: int, display: str) -> None:
        """Refuse to replace anything but a regular file (a folder, a symlink, a device)."""
        try:
            mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISLNK(mode):
            raise _walk_error(OSError(errno.ELOOP, "symlink"), display)
        if stat.S_ISDIR(mode):
            raise _walk_error(OSError(errno.EISDIR, "folder"), display)
        if not stat.S_ISREG(mode):
            raise ToolError(f"{display!r} is not a regular file")

    def remove_file(self, path: str) -> None:
        """Delete the regular file at path (a symlink is removed as a link); folders are refused."""
        parts = self.locate(path)
        if not parts:
            raise ToolError(f"{path!r} is the {self.label} folder, not a file")
        with open_dir(self.root, parts[:-1], display=path) as dir_fd:
            try:
                info = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    raise ToolError(f"{path!r} is a folder, not a file")
                os.unlink(parts[-1], dir_fd=dir_fd)
            except OSError as exc:
                raise _walk_error(exc, path) from None

    def size_of(self, path: str) -> int:
        """The size of the regular file at path, 0 when there is none (what replacing it frees)."""
        parts = self.locate(path)
        try:
            info = os.stat(os.path.join(self.root, *parts), follow_symlinks=False)
        except OSError:
            return 0
        return info.st_size if stat.S_ISREG(info.st_mode) else 0

    def entries(self, path: str = ".", *, limit: int) -> tuple[list[tuple[str, int, float, bool]], bool]:
        """(relative path, size, mtime, is_dir) below `path`, recursively, without following symlinks."""
        parts = self.locate(path, allow_root=True)
        if not self.root.is_dir():
            return [], False
        found: list[tuple[str, int, float, bool]] = []
        with open_dir(self.root, parts, display=path) as start:
            for folder, _fd, listing in walk(start):
                prefix = "/".join([*parts, *folder])
                listing.sort(key=lambda item: (not stat.S_ISDIR(item[1].st_mode), item[0]))
                for name, info in listing:
                    rel = f"{prefix}/{name}" if prefix else name
                    found.append((rel, info.st_size, info.st_mtime, stat.S_ISDIR(info.st_mode)))
                    if len(found) >= limit:
                        return found, True
        return found, False

    def total_size(self) -> int:
        """Bytes in the regular files below the root; ToolError when folders are nested past MAX_DEPTH."""
        return tree_size(self.root)

    def room(self, path: str, quota: int) -> int:
        """Bytes a file written to `path` may hold within `quota` (what replacing it frees counted; below
        0 when the workspace is over). ToolError when folders are nested past MAX_DEPTH."""
        return quota - (self.total_size() - self.size_of(path))


def _listing(fd: int) -> list[tuple[str, os.stat_result]]:
    found = []
    for name in os.listdir(fd):
        try:
            found.append((name, os.stat(name, dir_fd=fd, follow_symlinks=False)))
        except OSError:
            continue  # removed meanwhile
    return found


def walk(
    top_fd: int, *, max_depth: int = MAX_DEPTH
) -> Iterator[tuple[list[str], int, list[tuple[str, os.stat_result]]]]:
    """Top-down, per folder: (its path parts below top, its descriptor, [(name, lstat)]).

    Symlinks are never followed and folders at `max_depth` are listed but not entered. One
    descriptor is held per level (at most max_depth); top_fd stays open.
    """
    stack: list[tuple[int, list[str], Iterator[str]]] = []
    fd: int | None = top_fd
    parts: list[str] = []
    try:
        while True:
            if fd is not None:
                listing = _listing(fd)
                yield parts, fd, listing
                below = len(parts) < max_depth
                subdirs = sorted(name for name, info in listing if below and stat.S_ISDIR(info.st_mode))
                stack.append((fd, parts, iter(subdirs)))
                fd = None
            if not stack:
                return
            parent, parent_parts, pending = stack[-1]
            name = next(pending, None)
            if name is None:
                stack.pop()
                if parent != top_fd:
                    os.close(parent)
                continue
            try:
                fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
            except OSError:
                continue  # removed, or swapped for a symlink, since it was listed
            parts = [*parent_parts, name]
    finally:
        for held, _parts, _pending in stack:
            if held != top_fd:
                os.close(held)
        if fd is not None and fd != top_fd:
            os.close(fd)


def tree_size(root: Path) -> int:
    """Bytes in the regular files below root, symlinks not followed; 0 when root does not exist.

    ToolError when folders are nested deeper than MAX_DEPTH: such a tree cannot be measured
    cheaply, so it counts as over any quota.
    """
    try:
        top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return 0
    total = 0
    try:
        for folder, _fd, listing in walk(top):
            for _name, info in listing:
                if stat.S_ISREG(info.st_mode):
                    total += info.st_size
                elif stat.S_ISDIR(info.st_mode) and len(folder) >= MAX_DEPTH:
                    raise ToolError(
                        f"the workspace has folders nested deeper than {MAX_DEPTH} levels; remove them first"
                    )
    finally:
        os.close(top)
    return total


def workspace_of(context) -> Confined:
    """The run's workspace, or ToolError when the run has none (no conversation)."""
    if context is None or context.workspace is None:
        raise ToolError("this run has no workspace (it does not belong to a conversation)")
    return Confined(Path(context.workspace))
