"""Images in the workspace, as a model and a browser are shown them (docs/protocol.md, "Images").

Pillow, because recognising an image by its content, applying EXIF orientation, taking a GIF's
first frame and scaling with a good filter are each a codec's job: it is the maintained
library for all four formats, with wheels that carry their codecs (no system libraries).

A file is an image when Pillow opens it as PNG, JPEG, GIF or WebP, whatever its name; a
`photo.png` holding text is not one. Every image the server opens is opened here: an upload's
and a /v1 request's (`describe`), what a model is sent (chat.runtime.image_parts), the thumbnails of
the chat page and of the run inspector (chat.conversations.thumbnails).

Memory. Decoding takes width x height x 3 or 4 bytes whatever the file's size: a 150 KB PNG of
one colour may declare 49 megapixels, 150-200 MB once decoded. So:
- a file whose header claims more than AGENT_IMAGE_MAX_INPUT_PIXELS is refused before anything
  decodes it (`describe`, which `scaled` calls first), and Pillow's own decompression-bomb check
  (Image.MAX_IMAGE_PIXELS) is given the same number, so that it refuses nothing this allows;
- a process decodes at most AGENT_IMAGE_DECODES images at once (`_decoding`, a semaphore): the
  others wait for their turn, in their worker threads (the views' threads, asyncio.to_thread),
  never on the event loop, which never decodes;
- the full-size pixels are decoded once and never copied: a JPEG is decoded at the smallest
  scale (1/2 to 1/8, `draft`) still twice the size asked for, the others are reduced by a whole
  factor (`reduce`) before the filter makes the final size, and everything after (orientation,
  transparency, metadata) is done on the small image.
"""

from __future__ import annotations

import io
import re
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import BinaryIO

from django.conf import settings
from PIL import ExifTags, Image, ImageOps, UnidentifiedImageError

# The formats a model is sent (what OpenAI-compatible vision endpoints accept), by Pillow's name.
FORMATS = {"PNG": "png", "JPEG": "jpeg", "GIF": "gif", "WEBP": "webp"}
THUMBNAIL_PIXELS = (320, 320)
# A JPEG is decoded, and any image reduced, to no less than this many times the size asked for:
# Pillow's `thumbnail` default, after which the filter's result cannot be told from a full one.
REDUCING_GAP = 2
_QUARTER_TURNS = (5, 6, 7, 8)  # EXIF orientations that swap width and height
_BOX = re.compile(r"^\s*(\d{1,5})\s*[x×]\s*(\d{1,5})\s*$", re.IGNORECASE)
# Pillow warns of an image over its limit as it opens it; `describe` then refuses it with a clear
# error, so the warning would only repeat that into the server's log, once for each size.
warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)


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


def _opened(source: BinaryIO) -> Image.Image:
    # Pillow warns past its limit and refuses past twice it: given ours (read now, so that a
    # changed setting holds), it never refuses an image `describe` lets through.
    Image.MAX_IMAGE_PIXELS = settings.AGENT_IMAGE_MAX_INPUT_PIXELS
    return Image.open(source, formats=tuple(FORMATS))  # no other parser sees the bytes


def describe(source: BinaryIO) -> ImageInfo | None:
    """What the file is as an image, from its header; None when it is none of FORMATS (or not an
    image at all); NotAnImage when it is one with more pixels than may be decoded."""
    try:
        with _opened(source) as image:
            name = FORMATS.get(image.format or "")
            if name is None:
                return None
            width, height = image.size
            if width * height > settings.AGENT_IMAGE_MAX_INPUT_PIXELS:
                raise NotAnImage(_too_big(width, height))
            return ImageInfo(name, width, height, bool(getattr(image, "is_animated", False)))
    except Image.DecompressionBombError:
        raise NotAnImage("the image has more pixels than may be decoded") from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        return None  # Pillow's ways of saying "not an image I can read"


def _too_big(width: int, height: int) -> str:
    limit = settings.AGENT_IMAGE_MAX_INPUT_PIXELS
    return f"the image is {width}x{height} pixels, more than the {limit:,} that may be decoded"


@cache
def _gate(size: int) -> threading.BoundedSemaphore:
    return threading.BoundedSemaphore(size)


@contextmanager
def _decoding() -> Iterator[None]:
    """Held while an image is decoded: at most AGENT_IMAGE_DECODES at once in the process."""
    with _gate(max(1, settings.AGENT_IMAGE_DECODES)):
        yield


@dataclass(frozen=True)
class Scaled:
    mime: str  # image/jpeg, or image/png for an image with transparency
    data: bytes
    width: int  # as sent: oriented and scaled
    height: int
    animated: bool  # only the first frame was kept


def scaled(source: BinaryIO, *, box: tuple[int, int], quality: int = 85) -> Scaled:
    """The image fitted into `box` with its ratio kept (never enlarged), EXIF orientation applied,
    the first frame of an animation, re-encoded from its pixels alone: no EXIF, XMP, ICC profile,
    comment or text chunk of the file reaches the copy. Blocks for as long as decoding takes, and
    while AGENT_IMAGE_DECODES other images are decoded: call it in a thread."""
    info = describe(source)
    if info is None:
        raise NotAnImage("the file is not a PNG, JPEG, GIF or WebP image")
    source.seek(0)
    with _decoding():
        try:
            with _opened(source) as image:
                frame = _fitted(image, box)
        except Image.DecompressionBombError:
            raise NotAnImage("the image has more pixels than may be decoded") from None
        except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
            raise NotAnImage(f"the image could not be decoded: {exc}") from None
    out = io.BytesIO()
    if frame.mode == "RGBA":
        frame.save(out, "PNG", optimize=True)
    else:
        frame.save(out, "JPEG", quality=quality, optimize=True)
    return Scaled("image/png" if frame.mode == "RGBA" else "image/jpeg", out.getvalue(), *frame.size, info.animated)


def _fitted(image: Image.Image, box: tuple[int, int]) -> Image.Image:
    """The first frame of the open `image`, small (fitted into `box` once oriented), upright, RGB
    or RGBA (RGBA only when some pixel is not opaque), and with no metadata."""
    image.seek(0)
    orientation = image.getexif().get(ExifTags.Base.Orientation, 1)
    if orientation in _QUARTER_TURNS:
        box = (box[1], box[0])  # the stored image is fitted into the box as it will be turned
    width, height = image.size
    scale = min(1.0, box[0] / width, box[1] / height)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    image.draft(None, (size[0] * REDUCING_GAP, size[1] * REDUCING_GAP))  # JPEG only; others ignore it
    mode = "RGBA" if image.has_transparency_data else "RGB"
    image.load()  # the one full-size decoding
    frame = _replaced(image, image.convert(mode)) if image.mode != mode else image
    factor = int(min(frame.width / size[0], frame.height / size[1]) / REDUCING_GAP)
    if factor > 1:
        frame = _replaced(frame, frame.reduce(factor))  # box averages: fast, and small for the filter
    frame = _replaced(frame, frame.resize(size, Image.Resampling.LANCZOS))
    frame = ImageOps.exif_transpose(frame)  # the orientation read above, applied to the small copy
    if frame.mode == "RGBA" and frame.getextrema()[3][0] == 255:
        frame = frame.convert("RGB")  # an alpha band with nothing transparent: a JPEG is smaller
    return _pixels_only(frame)


def _replaced(old: Image.Image, new: Image.Image) -> Image.Image:
    """`new`, with `old`'s pixels freed at once rather than when the caller's `with` ends: at
    full size, they are most of the memory a decoding takes. Image's close, not ImageFile's,
    which would close the caller's file too."""
    Image.Image.close(old)
    return new


def _pixels_only(frame: Image.Image) -> Image.Image:
    """A new image holding the pixels and nothing else: Pillow's encoders write an ICC profile,
    a comment or EXIF they find in the image's `info`, which every copy, conversion and resize
    carries over from the file."""
    clean = Image.new(frame.mode, frame.size)
    clean.paste(frame)
    return clean
