"""read_file / write_file / list_files called directly: happy paths, limits, and the hostile corpus."""

from __future__ import annotations

import os
import uuid

import pytest

from chat.agent.tools import ToolError
from chat.conversations.workspaces import workspace_listing
from chat.tools.files import list_files, read_file, write_file
from chat.tools.removal import remove_tree

from .helpers import configure
from .hostile_paths import ESCAPES, SYMLINK_ESCAPES


async def test_write_read_list_round_trip(context, workspace):
    assert await write_file("notes/todo.txt", "buy milk\n", context) == "wrote 9 bytes to notes/todo.txt"
    assert (workspace / "notes" / "todo.txt").read_text() == "buy milk\n"
    assert await read_file("notes/todo.txt", context) == "buy milk\n"
    assert await read_file("./notes//todo.txt", context) == "buy milk\n"
    listing = await list_files(context)
    assert "notes/" in listing and "notes/todo.txt  (9 bytes)" in listing


async def test_read_in_chunks_with_offsets(context, workspace):
    configure(context, files={"read_chunk": 9})
    (workspace / "long.txt").write_text("héllo wörld, this is long")
    first = await read_file("long.txt", context)
    assert first.startswith("héllo w\n[... 19 more bytes of 27")  # the cut never splits the ö
    offset = int(first.rsplit("offset=", 1)[1].split(" ")[0])
    assert offset == 8
    second = await read_file("long.txt", context, offset=offset)
    assert second.startswith("örld, th\n")


async def test_in_workspace_symlink_is_followed(context, workspace):
    (workspace / "real.txt").write_text("data")
    os.symlink("real.txt", workspace / "alias.txt")
    assert await read_file("alias.txt", context) == "data"


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda ctx: read_file("missing.txt", ctx), "does not exist"),
        (lambda ctx: read_file("", ctx), "path is empty"),
        (lambda ctx: read_file(".", ctx), "path is empty"),
        (lambda ctx: read_file("sub", ctx), "is a folder"),
        (lambda ctx: read_file("bin.dat", ctx), "binary file"),
        (lambda ctx: read_file("fifo", ctx), "not a regular file"),
        (lambda ctx: read_file("a.txt", ctx, offset=-1), "offset must be"),
        (lambda ctx: read_file("a.txt", ctx, offset=99), "past the end"),
        (lambda ctx: write_file("big.txt", "x" * 101, ctx), "more than the 100 bytes write limit"),
        (lambda ctx: write_file("sub", "x", ctx), "is a folder"),
        (lambda ctx: write_file("a.txt/child", "x", ctx), "not a folder"),
        (lambda ctx: list_files(ctx, "missing"), "does not exist"),
    ],
)
async def test_errors_say_what_was_wrong(context, workspace, call, message):
    configure(context, files={"max_file_bytes": 100})
    (workspace / "sub").mkdir()
    (workspace / "a.txt").write_text("abc")
    (workspace / "bin.dat").write_bytes(b"\x89PNG\x00\x00")
    os.mkfifo(workspace / "fifo")
    with pytest.raises(ToolError, match=message):
        await call(context)


async def test_workspace_quota(context, workspace):
    configure(context, files={"workspace_max_bytes": 50})
    await write_file("a.txt", "x" * 40, context)
    with pytest.raises(ToolError, match="quota"):
        await write_file("b.txt", "x" * 20, context)


def nest(folder, depth: int) -> None:
    """`depth` folders named d, one in the other (by descriptors: the path would be too long)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)


async def test_replacing_a_file_counts_its_new_size_only(context, workspace):
    configure(context, files={"workspace_max_bytes": 50})
    await write_file("a.txt", "x" * 40, context)
    assert await write_file("a.txt", "y" * 45, context) == "wrote 45 bytes to a.txt"
    with pytest.raises(ToolError, match="quota"):
        await write_file("a.txt", "z" * 51, context)
    assert (workspace / "a.txt").read_text() == "y" * 45


async def test_folders_nested_too_deep(context, workspace):
    with pytest.raises(ToolError, match="nested deeper than 128 folders"):
        await write_file("d/" * 200 + "f.txt", "x", context)
    # Made by something else (the bash tool): the workspace counts as over its quota, and
    # listing it neither recurses nor fails.
    nest(workspace, 1500)
    with pytest.raises(ToolError, match="nested deeper than 128 levels"):
        await write_file("small.txt", "x", context)
    listing = await list_files(context)
    assert listing.startswith("d/\nd/d/\n") and "listing stopped" not in listing
    assert len(listing.splitlines()) == 129
    remove_tree(workspace / "d")  # (pytest's own clean-up would overflow its recursion)


async def test_no_workspace_is_an_error(context):
    context.workspace = None
    with pytest.raises(ToolError, match="no workspace"):
        await read_file("a.txt", context)


@pytest.mark.parametrize("path, message", ESCAPES, ids=[repr(p)[:40] for p, _ in ESCAPES])
async def test_hostile_paths_are_refused(context, workspace, tmp_path, path, message):
    (tmp_path / "secret.txt").write_text("TOP SECRET")
    for call in (read_file(path, context), write_file(path, "pwned", context), list_files(context, path)):
        with pytest.raises(ToolError, match=message):
            await call
    assert (tmp_path / "secret.txt").read_text() == "TOP SECRET"
    assert not any(p.name == "pwned" for p in tmp_path.rglob("*"))


@pytest.mark.parametrize("name, target", SYMLINK_ESCAPES, ids=[n for n, _ in SYMLINK_ESCAPES])
async def test_symlinks_out_of_the_workspace_are_refused(context, workspace, tmp_path, name, target):
    other = tmp_path / "other-workspace"
    other.mkdir()
    (other / "secret.txt").write_text("OTHER USER'S DATA")
    link = workspace / name
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, link)
    if name == "chain-a":
        os.symlink("/etc", workspace / "chain-b")
    for path in (name, f"{name}/secret.txt", f"{name}/passwd"):
        for call in (read_file(path, context), write_file(path, "pwned", context)):
            with pytest.raises(ToolError, match="leads out of the workspace through a symlink"):
                await call
    assert (other / "secret.txt").read_text() == "OTHER USER'S DATA"
    listing = await list_files(context)
    assert "OTHER USER'S DATA" not in listing and "secret.txt" not in listing


async def test_symlink_swapped_in_during_the_walk_is_not_followed(context, workspace, tmp_path, monkeypatch):
    """The race a concurrent bash command could try: a checked folder becomes a symlink out."""
    from chat.tools import confine as ws

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("OUTSIDE")
    (workspace / "d").mkdir()
    (workspace / "d" / "f.txt").write_text("inside")
    real_resolved = ws._resolved_parts

    def swap_after_check(root, parts, display):
        result = real_resolved(root, parts, display)
        (workspace / "d" / "f.txt").unlink()
        (workspace / "d").rmdir()
        os.symlink(outside, workspace / "d")
        return result

    monkeypatch.setattr(ws, "_resolved_parts", swap_after_check)
    with pytest.raises(ToolError, match="symlink appeared"):
        await read_file("d/f.txt", context)


async def test_bash_made_symlink_to_sandbox_path_is_refused(context, workspace):
    # Inside the sandbox the workspace is /workspace; on the host that path leads elsewhere.
    os.symlink("/workspace/data.txt", workspace / "data-link")
    with pytest.raises(ToolError, match="leads out of the workspace"):
        await read_file("data-link", context)


def test_workspace_listing_for_the_admin(settings, tmp_path):
    conversation_id = uuid.uuid4()
    settings.AGENT_WORKSPACE_ROOT = tmp_path
    root = tmp_path / str(conversation_id)
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("12345")
    (root / "sub" / "b.csv").write_text("x")
    os.symlink("/etc/passwd", root / "link")
    rows = workspace_listing(conversation_id)
    assert [(rel, size) for rel, size, _ in rows] == [("a.txt", 5), ("link", len("/etc/passwd")), ("sub/b.csv", 1)]
    assert all(modified.tzinfo is not None for _, _, modified in rows)
    assert workspace_listing(uuid.uuid4()) == []
    with pytest.raises(ValueError):
        workspace_listing("../../etc")
