"""Images in an OpenAI-compatible request (docs/protocol.md, "OpenAI-compatible endpoint"): the
`image_url` parts of its user messages become files of the call's new conversation, attached as
the chat page attaches an upload, so that the run sends them as it sends any attached image
(docs/protocol.md, "Images": scaled, turned upright, without metadata).

Only `data:` URLs. The server does not fetch a URL on a client's behalf: that would make it a
proxy into whatever network it sits in, reached at any client's word. The base64 is decoded
strictly (no stray character, the padding right) and the bytes are known by their content
(chat.conversations.images), whatever media type the URL declares. All of it is checked, and
decoded, before the conversation exists (`decoded_images`); the files are then written through
the files API's upload service (`stored`: its size limit, names and workspace quota).
"""

from __future__ import annotations

import base64
import binascii
import io
import math
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from chat.conversations import images, uploads
from chat.doors.openai.openai_shapes import BadRequest, CompletionRequest, ImageURL, RequestMessage


@dataclass(frozen=True)
class Decoded:
    path: str  # its name in the workspace: image-1.png, image-2.jpeg, ...
    data: bytes


def decoded_images(call: CompletionRequest) -> dict[str, Decoded]:
    """Each different image URL of the request, in the order of its messages, decoded and named;
    BadRequest for more images than a message may attach, or for one that is not a `data:` URL
    of a PNG, JPEG, GIF or WebP image within the upload limit. CPU work: call it in a thread."""
    first: dict[str, ImageURL] = {}
    for image in call.image_urls():
        first.setdefault(image.url, image)  # a client sending the same image again sends one file
    if len(first) > uploads.MAX_ATTACHMENTS:
        raise BadRequest(
            f"At most {uploads.MAX_ATTACHMENTS} images in a request (the attachments a message may have).",
            param="messages",
            code="too_many_images",
        )
    out: dict[str, Decoded] = {}
    for number, image in enumerate(first.values(), start=1):
        data = _data(image)
        info = _recognised(data, image.param)
        out[image.url] = Decoded(f"image-{number}.{info.format}", data)
    return out


def clear_of(decoded: dict[str, Decoded], *, conversation_id) -> dict[str, Decoded]:
    """The images named anew past the files the conversation's workspace already has (a request
    continuing a conversation: image-1.png of an earlier turn stays that turn's)."""
    taken = {entry["path"] for entry in uploads.files_list(conversation_id=conversation_id)}
    out: dict[str, Decoded] = {}
    number = 0
    for url, image in decoded.items():
        kind = image.path.rsplit(".", 1)[-1]
        number += 1
        while f"image-{number}.{kind}" in taken:
            number += 1
        out[url] = Decoded(f"image-{number}.{kind}", image.data)
    return out


def forget(*, conversation_id, attached: dict[str, dict[str, Any]]) -> None:
    """Remove the images a refused request stored (a refusal leaves nothing behind)."""
    for attachment in attached.values():
        try:
            uploads.file_remove(conversation_id=conversation_id, path=attachment["path"])
        except uploads.FileRefused:
            pass  # gone meanwhile


def _data(image: ImageURL) -> bytes:
    scheme = image.url[:8].lower()
    if scheme.startswith(("http://", "https://")):
        raise BadRequest(
            "This server does not fetch images from the internet on a client's behalf: send the image "
            "itself as a data: URL (data:image/png;base64,...).",
            param=image.param,
            code="invalid_image_url",
        )
    header, comma, payload = image.url.partition(",")
    if not scheme.startswith("data:") or not comma or not header.lower().endswith(";base64"):
        raise BadRequest(
            "An image URL must be a base64 data: URL (data:image/png;base64,...).",
            param=image.param,
            code="invalid_image_url",
        )
    limit = settings.AGENT_MAX_UPLOAD_BYTES
    if len(payload) > 4 * math.ceil(limit / 3):  # refused before anything is decoded
        raise _too_large(limit, image.param)
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest(
            "The image's data is not valid base64.", param=image.param, code="invalid_image_format"
        ) from None
    if len(data) > limit:
        raise _too_large(limit, image.param)
    return data


def _too_large(limit: int, param: str) -> BadRequest:
    return BadRequest(f"The image is larger than the {limit}-byte upload limit.", param=param, code="image_too_large")


def _recognised(data: bytes, param: str) -> images.ImageInfo:
    try:
        info = images.describe(io.BytesIO(data))
    except images.NotAnImage as exc:
        raise BadRequest(f"The image cannot be used: {exc}.", param=param, code="image_too_large") from None
    if info is None:
        raise BadRequest("The data is not a PNG, JPEG, GIF or WebP image.", param=param, code="invalid_image_format")
    return info


def stored(*, conversation_id, decoded: dict[str, Decoded]) -> dict[str, dict[str, Any]]:
    """The images written into the conversation's workspace, and the attachment each became (as a
    message naming it gets: chat.conversations.uploads.attachments_resolve), by URL; FileRefused
    when the upload service refuses one (the workspace quota)."""
    if not decoded:
        return {}
    for image in decoded.values():
        uploads.file_store(
            conversation_id=conversation_id,
            path=image.path,
            chunks=[image.data],
            size=len(image.data),
            source=io.BytesIO(image.data),
        )
    found = uploads.attachments_resolve(conversation_id=conversation_id, paths=[d.path for d in decoded.values()])
    by_path = {attachment["path"]: attachment for attachment in found}
    return {url: by_path[image.path] for url, image in decoded.items()}


def attachments_of(urls: tuple[ImageURL, ...], attached: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """A message's attachments: each of its images once."""
    return tuple({attached[image.url]["path"]: attached[image.url] for image in urls}.values())


def recorded_history(
    history: tuple[RequestMessage, ...], attached: dict[str, dict[str, Any]]
) -> tuple[dict[str, Any], ...]:
    """The request's earlier messages as the user_message records them (`history`): a user's with
    the `attachments` its images became (chat.eventlog.history shows them to the model)."""
    out: list[dict[str, Any]] = []
    for message in history:
        item: dict[str, Any] = {"role": message.role, "content": message.content}
        if message.images:
            item["attachments"] = list(attachments_of(message.images, attached))
        out.append(item)
    return tuple(out)
