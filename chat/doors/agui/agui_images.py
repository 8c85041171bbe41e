"""Images in an AG-UI user message (docs/protocol.md, "AG-UI"): its `image` parts with a `data`
source become files of the thread's conversation, attached as the chat page attaches an upload,
so that the run shows them to the model as any attached image (docs/protocol.md, "Images").
Taken as the OpenAI-compatible endpoint takes its `data:` URLs: the base64 decoded strictly, the
bytes known by their content whatever `mimeType` says, within the upload limit, all of it checked
before anything is made; the files are then written through the upload service (its names and
workspace quota). The server fetches no URL on a client's behalf: a `url` source is refused."""

from __future__ import annotations

import base64
import binascii
import io
import math
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from chat.conversations import images, uploads
from chat.runs.client_frames import ProtocolError


@dataclass(frozen=True)
class Picture:
    kind: str  # its format: png, jpeg, gif or webp
    data: bytes


def _refused(message: str, detail: str) -> ProtocolError:
    return ProtocolError("BAD_REQUEST", message, detail)


def _too_large(limit: int) -> ProtocolError:
    return ProtocolError("TOO_LARGE", f"An image is larger than the {limit}-byte upload limit.", "image too large")


def decoded(payloads: tuple[str, ...]) -> list[Picture]:
    """Each image's bytes and format; ProtocolError for too many, or for one that is no PNG,
    JPEG, GIF or WebP image in valid base64 within the upload limit. CPU work: run it in a thread."""
    if len(payloads) > uploads.MAX_ATTACHMENTS:
        raise _refused(f"At most {uploads.MAX_ATTACHMENTS} images in a message.", "too many images")
    limit = settings.AGENT_MAX_UPLOAD_BYTES
    out = []
    for payload in dict.fromkeys(payloads):  # the same image twice is one file
        if len(payload) > 4 * math.ceil(limit / 3):  # refused before anything is decoded
            raise _too_large(limit)
        try:
            data = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise _refused("An image's data is not valid base64.", "invalid base64") from None
        if len(data) > limit:
            raise _too_large(limit)
        try:
            info = images.describe(io.BytesIO(data))
        except images.NotAnImage as exc:
            raise _refused(f"An image cannot be used: {exc}.", "image refused") from None
        if info is None:
            raise _refused("An image is not a PNG, JPEG, GIF or WebP image.", "not an image")
        out.append(Picture(info.format, data))
    return out


def stored(*, conversation_id, pictures: list[Picture]) -> tuple[dict[str, Any], ...]:
    """The images written into the conversation's workspace as image-<n>.<format>, clear of the
    files it has, and the attachments they became; FileRefused past the workspace quota."""
    if not pictures:
        return ()
    taken = {entry["path"] for entry in uploads.files_list(conversation_id=conversation_id)}
    paths, number = [], 0
    for picture in pictures:
        number += 1
        while f"image-{number}.{picture.kind}" in taken:
            number += 1
        path = f"image-{number}.{picture.kind}"
        uploads.file_store(
            conversation_id=conversation_id,
            path=path,
            chunks=[picture.data],
            size=len(picture.data),
            source=io.BytesIO(picture.data),
        )
        paths.append(path)
    return tuple(uploads.attachments_resolve(conversation_id=conversation_id, paths=paths))


def forget(*, conversation_id, attachments: tuple[dict[str, Any], ...]) -> None:
    """Remove the images of a refused run (a refusal leaves nothing behind)."""
    for attachment in attachments:
        try:
            uploads.file_remove(conversation_id=conversation_id, path=attachment["path"])
        except uploads.FileRefused:
            pass  # gone meanwhile
