"""Removing a workspace (a deleted conversation's) without following a symlink out of it and
without recursion, however deep or hostile the tree inside: descriptors, not paths."""

from __future__ import annotations

import logging
import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)


# Removal moves a subtree found this deep up to the top folder instead of descending further,
# so any depth is removed with a bounded number of open descriptors.
_REMOVE_DEPTH = 32


def remove_tree(path: Path) -> None:
    """Delete path and everything below it, like `shutil.rmtree` on Linux but iterative.

    Nothing is ever followed through a symlink: a symlink (the path itself, or anything below
    it, pointing to /etc or another workspace) is removed as a link, its target untouched. A
    missing path is fine, and so is a missing parent (AGENT_WORKSPACE_ROOT before any file was
    written). Folders the server's user may not read or write (chmod 000 by a command the bash
    tool ran as the same user) are made writable first, through descriptors opened without
    following symlinks.
    """
    path = Path(path)
    try:
        parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return
    try:
        try:
            info = os.stat(path.name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(info.st_mode):
            os.unlink(path.name, dir_fd=parent)
            return
        top = _open_for_removal(parent, path.name)
        try:
            while _empty_pass(top):
                pass
        finally:
            os.close(top)
        os.rmdir(path.name, dir_fd=parent)
    finally:
        os.close(parent)


def _open_for_removal(dir_fd: int, name: str) -> int:
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
    except PermissionError:
        # Our own folder without r/x for us: O_PATH opens it without reading it (and, with
        # O_NOFOLLOW and O_DIRECTORY, only a real folder), and chmod through /proc acts on
        # exactly that inode.
        handle = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
        try:
            os.chmod(f"/proc/self/fd/{handle}", 0o700)
            return os.open(".", os.O_RDONLY | os.O_DIRECTORY, dir_fd=handle)
        finally:
            os.close(handle)


def _remove_entry(dir_fd: int, name: str, *, is_dir: bool) -> None:
    remove = os.rmdir if is_dir else os.unlink
    try:
        remove(name, dir_fd=dir_fd)
    except PermissionError:
        os.fchmod(dir_fd, 0o700)  # our own folder without w for us
        remove(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def _empty_pass(top: int) -> bool:
    """Remove what is below top, moving subtrees deeper than _REMOVE_DEPTH up to top first.
    True when some were moved (another pass is needed)."""
    moved = False
    stack: list[tuple[int, str | None, Iterator[tuple[str, bool]]]] = [(top, None, iter(_kinds(top)))]
    try:
        while stack:
            fd, name_in_parent, pending = stack[-1]
            entry = next(pending, None)
            if entry is None:
                stack.pop()
                if stack:
                    os.close(fd)
                    _remove_entry(stack[-1][0], name_in_parent, is_dir=True)
                continue
            name, is_dir = entry
            if not is_dir:
                _remove_entry(fd, name, is_dir=False)
            elif len(stack) >= _REMOVE_DEPTH:
                os.rename(name, f".removing-{uuid.uuid4().hex}", src_dir_fd=fd, dst_dir_fd=top)
                moved = True
            else:
                try:
                    child = _open_for_removal(fd, name)
                except FileNotFoundError:
                    continue
                stack.append((child, name, iter(_kinds(child))))
    finally:
        for held, _name, _pending in stack[1:]:
            os.close(held)
    return moved


def _kinds(fd: int) -> list[tuple[str, bool]]:
    """(name, is a real folder) of a folder's entries."""
    with os.scandir(fd) as entries:
        return [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]


def remove_workspace(path: Path) -> None:
    """remove_tree for a deleted conversation's workspace: a failure is logged, never raised
    (the deletion it follows has committed)."""
    try:
        remove_tree(path)
    except OSError:
        log.exception("could not remove the workspace %s", path)
