"""Images in the workspace, as a model and a browser are shown them (docs/protocol.md, "Images").

Pillow, because recognising an image by its content, applying EXIF orientation, taking a GIF's
first frame and scaling with a good filter are each a codec's job: it is the maintained
library for all four formats, with wheels that carry their codecs (no system libraries).

A file is an image when Pillow opens it as PNG, JPEG, GIF or WebP, whatever its name; a
`photo.png` holding text is not one. Pillow decodes lazily: `describe` reads the header only,
`scaled` decodes, always in a worker thread (chat.agents.images), never on the event loop.

Decompression bombs: a few kilobytes of PNG may claim 100,000 x 100,000 pixels. Pillow refuses
past Image.MAX_IMAGE_PIXELS (set here to DECODE_MAX_PIXELS, where Pillow's own default only
warns below twice its limit), and `describe` refuses such a file before anything decodes it.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import BinaryIO

from PIL import Image, ImageOps, UnidentifiedImageError

# The formats a model is sent (what OpenAI-compatible vision endpoints accept), by Pillow's name.
FORMATS = {"PNG": "png", "JPEG": "jpeg", "GIF": "gif", "WEBP": "webp"}
# 50 megapixels: a 20-megapixel phone photo and an 8K frame pass; a bomb's claimed size does not.
DECODE_MAX_PIXELS = 50_000_000
Image.MAX_IMAGE_PIXELS = DECODE_MAX_PIXELS
THUMBNAIL_PIXELS = (320, 320)
_BOX = re.compile(r"^\s*(\d{1,5})\s*[x×]\s*(\d{1,5})\s*$", re.IGNORECASE)


class NotAnImage(Exception):
    """The file is not an image this module handles, or is one too large to decode (the message says)."""


@dataclass(frozen=True)
class ImageInfo:
    format: str  # "png", "jpeg", "gif" or "webp"
    width: int  # as stored, before EXIF orientation
    height: int
    animated: bool = False

    def to_json(self) -> dict:
        out: dict = {"format": self.format, "width": self.width, "height": self.height}
        if self.animated:
            out["animated"] = True
        return out


def parse_box(text: str) -> tuple[int, int]:
    """AGENT_IMAGE_MAX_PIXELS, "WIDTHxHEIGHT" (e.g. "1568x1568"), as (width, height); ValueError otherwise."""
    match = _BOX.match(str(text))
    if not match or not all(int(n) > 0 for n in match.groups()):
        raise ValueError(f"{text!r} is not WIDTHxHEIGHT, e.g. 1568x1568")
    return int(match.group(1)), int(match.group(2))


def describe(source: BinaryIO) -> ImageInfo | None:
    """What the file is as an image, from its header; None when it is none of FORMATS (or not an
    image at all); NotAnImage when it is one with more pixels than may be decoded."""
    try:
        with Image.open(source) as image:
            name = FORMATS.get(image.format or "")
            if name is None:
                return None
            width, height = image.size
            if width * height > DECODE_MAX_PIXELS:
                raise NotAnImage(_too_big(width, height))
            return ImageInfo(name, width, height, bool(getattr(image, "is_animated", False)))
    except Image.DecompressionBombError:
        raise NotAnImage("the image has more pixels than may be decoded") from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        return None  # Pillow's ways of saying "not an image I can read"


def _too_big(width: int, height: int) -> str:
    return f"the image is {width}x{height} pixels, more than the {DECODE_MAX_PIXELS:,} that may be decoded"


@dataclass(frozen=True)
class Scaled:
    mime: str  # image/jpeg, or image/png for an image with transparency
    data: bytes
    width: int  # as sent: oriented and scaled
    height: int
    animated: bool  # only the first frame was kept


def scaled(source: BinaryIO, *, box: tuple[int, int], quality: int = 85) -> Scaled:
    """The image fitted into `box` with its ratio kept (never enlarged), EXIF orientation applied,
    the first frame of an animation, re-encoded without metadata (EXIF, XMP, ICC, text chunks:
    a new image carries none of them). Blocks for as long as decoding takes: call it in a thread."""
    info = describe(source)
    if info is None:
        raise NotAnImage("the file is not a PNG, JPEG, GIF or WebP image")
    source.seek(0)
    try:
        with Image.open(source) as image:
            image.seek(0)
            frame = ImageOps.exif_transpose(image)  # a copy: the orientation tag applied and dropped
            if frame.mode in ("P", "PA"):
                frame = frame.convert("RGBA")
            alpha = frame.mode in ("RGBA", "LA") and frame.getextrema()[-1][0] < 255
            frame = frame.convert("RGBA" if alpha else "RGB")
            frame.thumbnail(box, Image.Resampling.LANCZOS)
            out = io.BytesIO()
            if alpha:
                frame.save(out, "PNG", optimize=True)
            else:
                frame.save(out, "JPEG", quality=quality, optimize=True)
            return Scaled("image/png" if alpha else "image/jpeg", out.getvalue(), *frame.size, info.animated)
    except Image.DecompressionBombError:
        raise NotAnImage("the image has more pixels than may be decoded") from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise NotAnImage(f"the image could not be decoded: {exc}") from None
