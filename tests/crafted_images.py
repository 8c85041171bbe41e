"""Images crafted for the tests of chat.conversations.images: large ones made cheaply, row by row
through zlib, so that a test never holds the pixels it sends."""

from __future__ import annotations

import struct
import zlib


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def plain_png(width: int, height: int, rgb: tuple[int, int, int] = (40, 90, 160)) -> bytes:
    """A valid RGB PNG of one colour: width x height pixels in a few hundred kilobytes at most
    (a 7000x7000 one is about 150 KB), never more than one row in memory."""
    row = b"\x00" + bytes(rgb) * width  # filter type 0 and the pixels
    packer = zlib.compressobj(9)
    data = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, not interlaced
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", data) + _chunk(b"IEND", b"")
