"""The images of a run's memory, made into the parts a model is sent (docs/protocol.md, "Images").

The memory (chat.eventlog.history) keeps an image as a reference, {"path"} in a user message's
`images`: the event log and the memory checkpoints stay small, and an image is sent as the file
is now. This hook, the last before each model call, replaces a message's references with
`image_url` parts (a data URL of the scaled image) when the agent accepts images, and only
drops them otherwise: the text note of chat.eventlog.history already tells the model where
the file is. The agent core receives content parts; it never reads a file.

Scaling decodes the image: it runs in a worker thread (asyncio.to_thread), and its result is
kept (keyed by the file's size and modification time), so the model calls of a run, and the
next turns, do not decode the same image again.
"""

from __future__ import annotations

import asyncio
import base64
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from django.conf import settings

from chat.agent.hooks import AgentHook, AgentState
from chat.agent.tools import ToolError
from chat.conversations import images
from chat.tools.confine import Confined

# Scaled images kept per process: a few runs' worth (each at most a few hundred kilobytes).
CACHED = 32
_cache: OrderedDict[tuple[str, int, int, tuple[int, int]], images.Scaled] = OrderedDict()
# The data URLs sent lately, so that a recorded request (chat.runtime.sink) stores which file
# each was rather than its base64: {url: {"path", "width", "height"}}.
_sent: OrderedDict[str, dict[str, Any]] = OrderedDict()
_lock = threading.Lock()  # the worker threads share both


def max_box() -> tuple[int, int]:
    return images.parse_box(settings.AGENT_IMAGE_MAX_PIXELS)


def _keep(table: OrderedDict, key: Any, value: Any) -> None:
    with _lock:
        table[key] = value
        table.move_to_end(key)
        while len(table) > CACHED:
            table.popitem(last=False)


def image_parts(workspace: Path, path: str) -> list[dict[str, Any]]:
    """The parts showing the workspace's `path` (the image, and a note when only an animation's
    first frame is shown); none when it cannot be shown (deleted, or no longer an image).
    Blocking: decodes on a cache miss."""
    try:
        fd, _ = Confined(workspace).open_file(path)  # confined: a forged path cannot leave the workspace
    except ToolError:
        return []
    with os.fdopen(fd, "rb") as handle:
        stat = os.fstat(handle.fileno())
        key = (str(workspace / path), stat.st_size, stat.st_mtime_ns, max_box())
        with _lock:
            done = _cache.get(key)
        if done is None:
            try:
                done = images.scaled(handle, box=key[3])
            except images.NotAnImage:
                return []
            _keep(_cache, key, done)
    url = f"data:{done.mime};base64,{base64.b64encode(done.data).decode()}"
    _keep(_sent, url, {"path": path, "width": done.width, "height": done.height})
    parts: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": url}}]
    if done.animated:
        parts.append({"type": "text", "text": f"[{path} is animated: only its first frame is shown]"})
    return parts


class ImageParts(AgentHook):
    """Runs after the trimming hook: only the images of the messages kept are built."""

    def __init__(self, *, vision: bool):
        self.vision = vision

    async def before_model(self, state: AgentState) -> None:
        workspace = state.context.workspace
        for index, message in enumerate(state.messages):
            refs = message.get("images")
            if refs is None:
                continue
            plain = {key: value for key, value in message.items() if key != "images"}
            if self.vision and workspace is not None:
                parts: list[dict[str, Any]] = [{"type": "text", "text": plain.get("content") or ""}]
                for ref in refs:
                    if isinstance(ref, dict) and isinstance(ref.get("path"), str):
                        parts.extend(await asyncio.to_thread(image_parts, workspace, ref["path"]))
                if len(parts) > 1:
                    plain["content"] = parts
            state.messages[index] = plain


def elided(messages: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """A recorded request's messages with each data URL replaced by what it showed: the trace
    keeps {"path", "width", "height"} of the image (the inspector shows a thumbnail of it)."""
    if not messages:
        return messages
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            message = {**message, "content": [_elided_part(part) for part in content]}
        out.append(message)
    return out


def _elided_part(part: Any) -> Any:
    if not isinstance(part, dict) or part.get("type") != "image_url":
        return part
    url = (part.get("image_url") or {}).get("url")
    if not isinstance(url, str) or not url.startswith("data:"):
        return part
    with _lock:
        shown = _sent.get(url)
    placeholder = f"(a data URL of {len(url)} characters, elided)"
    return {"type": "image_url", "image_url": {"url": placeholder}, **({"image": shown} if shown else {})}
