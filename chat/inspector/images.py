"""The images a recorded request showed the model, as thumbnails for the run page (docs/protocol.md,
"Images"): the trace keeps each image's path in place of its data URL (chat.runtime.image_parts.elided),
and the page shows a small copy made from the conversation's file now (made once and kept:
chat.conversations.thumbnails), never the base64."""

from __future__ import annotations

import base64
import os
from typing import Any

from django.conf import settings

from chat.agent.tools import ToolError
from chat.conversations import images, thumbnails
from chat.tools.confine import Confined, workspace_path

INSPECTOR_THUMBNAIL = (160, 160)
MAX_SHOWN = 20  # per model call: a page stays quick to render


def shown_images(conversation_id: str, messages: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """[{"path", "width", "height", "src"}] of the images a request's messages carried; `src` is a
    data URL of a thumbnail, or "" when the file is gone or no longer an image."""
    found: list[dict[str, Any]] = []
    for message in messages or []:
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else []:
            image = part.get("image") if isinstance(part, dict) else None
            if isinstance(image, dict) and isinstance(image.get("path"), str) and len(found) < MAX_SHOWN:
                found.append({**image, "src": _thumbnail(conversation_id, image["path"])})
    return found


def _thumbnail(conversation_id: str, path: str) -> str:
    try:
        fd, _ = Confined(workspace_path(settings.AGENT_WORKSPACE_ROOT, conversation_id)).open_file(path)
    except ToolError:
        return ""
    with os.fdopen(fd, "rb") as handle:
        try:
            mime, data = thumbnails.thumbnail(conversation_id, path, handle, box=INSPECTOR_THUMBNAIL, quality=75)
        except images.NotAnImage:
            return ""
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"
