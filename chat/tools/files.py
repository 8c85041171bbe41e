"""`read_file`, `write_file`, `list_files`: the conversation's workspace, and nothing else.

Every path goes through chat.tools.confine (relative only, no `..`, no NUL,
no symlink out, opened without following a swapped-in symlink). Limits come
from the run's FilesSettings (chat.tools.config): the bytes one read_file call
returns (the rest by `offset`), the largest file write_file writes, and the
workspace quota (the bash tool keeps the same one).
"""

from __future__ import annotations

from chat.agent.tools import ToolContext, ToolError
from chat.tools.config import settings_of
from chat.tools.confine import workspace_of

MAX_LISTED = 500


def _human(size: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1000
    return str(size)


def _utf8_prefix(data: bytes) -> bytes:
    """Drop a multi-byte character cut at the end of a chunk."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return data
        if byte >= 0xC0:  # lead byte: is its sequence complete?
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return data if back >= need else data[:-back]
    return data


async def read_file(path: str, context: ToolContext, offset: int = 0) -> str:
    """Read a text file from the conversation's workspace. Long files come in chunks: when the
    result ends with a note giving a next offset, call again with that offset to continue."""
    chunk = settings_of(context).files.read_chunk
    if offset < 0:
        raise ToolError("offset must be 0 or more")
    data, size = workspace_of(context).read_bytes(path, offset=offset, limit=chunk)
    if offset > size:
        raise ToolError(f"offset {offset} is past the end of {path!r} ({size} bytes)")
    if b"\x00" in data:
        raise ToolError(f"{path!r} looks like a binary file; read_file returns text only")
    if offset + len(data) < size:
        data = _utf8_prefix(data)
    text = data.decode("utf-8", errors="replace")
    end = offset + len(data)
    if end < size:
        text += f"\n[... {size - end} more bytes of {size}; call read_file with offset={end} to continue]"
    return text


async def write_file(path: str, content: str, context: ToolContext) -> str:
    """Write a text file in the conversation's workspace (created, or replaced when it exists).
    Folders in the path are created."""
    limit = settings_of(context).files.max_file_bytes
    data = content.encode("utf-8")
    if len(data) > limit:
        raise ToolError(f"content is {_human(len(data))}, more than the {_human(limit)} write limit")
    await quota_write(context, path, data)
    return f"wrote {len(data)} bytes to {path}"


async def quota_write(context: ToolContext, path: str, data: bytes) -> None:
    """Create or replace `path` in the run's workspace with `data`; ToolError when that would pass the
    workspace quota. The measurement and the write are one step (FilesSettings.exclusive), so that
    parallel writers (uploads, other runs' tools, in any process) cannot all fit into the same room."""
    files = settings_of(context).files
    quota = files.workspace_max_bytes
    workspace = workspace_of(context)
    workspace.locate(path)  # refuse a bad path before measuring anything

    def write() -> None:
        room = workspace.room(path, quota)
        if len(data) > room:
            raise ToolError(
                f"the workspace holds {_human(quota - room)}; writing {_human(len(data))} would pass its "
                f"{_human(quota)} quota"
            )
        workspace.write_bytes(path, data)

    if files.exclusive is None:
        write()
    else:
        await files.exclusive(context, write)


async def list_files(context: ToolContext, path: str = ".") -> str:
    """List the files and folders in the conversation's workspace (recursively, with sizes).
    `path` narrows the listing to a folder."""
    entries, cut = workspace_of(context).entries(path, limit=MAX_LISTED)
    if not entries:
        return "the workspace is empty" if path.strip() in ("", ".") else f"{path!r} is empty"
    lines = [f"{rel}/" if is_dir else f"{rel}  ({_human(size)})" for rel, size, _mtime, is_dir in entries]
    if cut:
        lines.append(f"[... listing stopped at {MAX_LISTED} entries]")
    return "\n".join(lines)
