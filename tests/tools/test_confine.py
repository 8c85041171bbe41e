"""remove_tree: what a hostile command can leave in a workspace never breaks or escapes the removal."""

from __future__ import annotations

import os
import tempfile
import traceback
from pathlib import Path

import pytest

from chat.tools.removal import remove_tree

from .test_files import nest


@pytest.fixture
def outside(tmp_path):
    path = tmp_path / "outside"
    path.mkdir()
    (path / "precious.txt").write_text("keep me")
    return path


def test_symlinks_are_removed_not_followed(workspace, outside):
    (workspace / "sub").mkdir()
    os.symlink(outside, workspace / "dir-link")
    os.symlink(outside / "precious.txt", workspace / "sub" / "file-link")
    os.symlink("/etc", workspace / "etc")
    os.symlink("../../..", workspace / "sub" / "up")
    os.symlink("loop", workspace / "loop")
    os.mkfifo(workspace / "fifo")
    remove_tree(workspace)
    assert not os.path.lexists(workspace)
    assert (outside / "precious.txt").read_text() == "keep me"
    assert os.path.exists("/etc/passwd")


def test_folders_nested_thousands_deep(workspace, outside):
    nest(workspace, 3000)
    os.symlink(outside, workspace / "link")
    before = len(os.listdir("/proc/self/fd"))
    remove_tree(workspace)  # shutil.rmtree and os.fwalk overflow Python's recursion here
    assert not os.path.lexists(workspace)
    assert len(os.listdir("/proc/self/fd")) == before
    assert (outside / "precious.txt").exists()


def test_a_missing_workspace_is_fine(tmp_path):
    """Removing a workspace that was never made raises nothing and makes nothing."""
    remove_tree(tmp_path / "never-created")
    assert list(tmp_path.iterdir()) == []


def test_folders_locked_by_their_owner(outside):
    """A command run as the server's own user (a server not running as root) chmods folders to 000."""
    top = Path(tempfile.mkdtemp(prefix="agentsite-remove-"))  # reachable by the unprivileged child
    workspace = top / "workspace"
    (workspace / "a" / "b").mkdir(parents=True)
    (workspace / "a" / "b" / "f.txt").write_text("x")
    (workspace / "ro").mkdir()
    (workspace / "ro" / "g.txt").write_text("y")
    os.symlink(outside, workspace / "a" / "link")
    outside.chmod(0o500)  # what the link points to: its mode must not change
    (workspace / "a" / "b").chmod(0)
    (workspace / "a").chmod(0o500)
    (workspace / "ro").chmod(0o500)
    if os.geteuid() == 0:  # root ignores modes: remove as an unprivileged owner, in a child
        uid = 65534
        for folder, dirs, files in os.walk(top):
            for name in [folder] + [os.path.join(folder, n) for n in dirs + files]:
                os.chown(name, uid, uid, follow_symlinks=False)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.setgid(uid)
                os.setuid(uid)
                remove_tree(workspace)
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        assert os.waitpid(pid, 0)[1] == 0
    else:
        remove_tree(workspace)
    assert not os.path.lexists(workspace)
    assert (outside.stat().st_mode & 0o777) == 0o500
    outside.chmod(0o700)
    os.rmdir(top)
