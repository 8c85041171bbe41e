"""A re-encoded image carries nothing of its file but its pixels (docs/protocol.md, "Images"):
what a model is sent and every thumbnail are made by chat.conversations.images.scaled, and no
EXIF, XMP, ICC profile, comment or text chunk of the file reaches them, whatever the format, and
whether the copy is a JPEG or (with transparency) a PNG. Each file is crafted here with Pillow,
its metadata holding a marker that must not be found in the copy's bytes."""

from __future__ import annotations

import io

import pytest
from PIL import Image, ImageCms, PngImagePlugin

from chat.conversations import images
from tests.conversations.test_files import alice, client_of, owned, root, upload  # noqa: F401 (fixtures)

ICC = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
XMP = b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:Description>SECRET xmp</rdf:Description></x:xmpmeta>'
ENCODERS_OWN = {"jfif", "jfif_version", "jfif_unit", "jfif_density"}  # what Pillow's JPEG encoder writes


def exif() -> bytes:
    tags = Image.Exif()
    tags[0x010F] = "SECRET camera maker"
    tags[0x0112] = 1  # upright
    return tags.tobytes()


def png_text() -> PngImagePlugin.PngInfo:
    chunks = PngImagePlugin.PngInfo()
    chunks.add_text("Comment", "SECRET tEXt")
    chunks.add_itxt("Author", "SECRET iTXt", lang="en")
    chunks.add_text("Description", "SECRET zTXt " * 20, zip=True)
    return chunks


def saved(image: Image.Image, kind: str, **options) -> bytes:
    out = io.BytesIO()
    image.save(out, kind, **options)
    return out.getvalue()


def gif(transparent: bool) -> Image.Image:
    image = Image.new("P", (120, 80), 1)
    image.putpalette([0, 0, 0, 200, 30, 30] + [0, 0, 0] * 254)
    if transparent:
        image.paste(0, (0, 0, 40, 80))
        image.info["transparency"] = 0
    return image


SEE_THROUGH = (200, 30, 30, 120)

FILES = {
    "png tEXt/iTXt/zTXt + ICC + eXIf": lambda: saved(
        Image.new("RGB", (120, 80), "red"), "PNG", pnginfo=png_text(), icc_profile=ICC, exif=exif()
    ),
    "png with transparency, tEXt/iTXt/zTXt + ICC + eXIf": lambda: saved(
        Image.new("RGBA", (120, 80), SEE_THROUGH), "PNG", pnginfo=png_text(), icc_profile=ICC, exif=exif()
    ),
    "jpeg COM + ICC + EXIF + XMP": lambda: saved(
        Image.new("RGB", (120, 80), "red"), "JPEG", comment=b"SECRET COM", icc_profile=ICC, exif=exif(), xmp=XMP
    ),
    "gif comment": lambda: saved(gif(False), "GIF", comment=b"SECRET gif comment"),
    "gif with transparency, comment": lambda: saved(gif(True), "GIF", comment=b"SECRET gif comment"),
    "webp ICC + XMP + EXIF": lambda: saved(
        Image.new("RGB", (120, 80), "red"), "WEBP", icc_profile=ICC, xmp=XMP, exif=exif()
    ),
    "webp with transparency, ICC + XMP + EXIF": lambda: saved(
        Image.new("RGBA", (120, 80), SEE_THROUGH), "WEBP", icc_profile=ICC, xmp=XMP, exif=exif()
    ),
}


def assert_pixels_only(data: bytes) -> Image.Image:
    copy = Image.open(io.BytesIO(data))
    assert b"SECRET" not in data
    assert ICC not in data
    assert set(copy.info) <= ENCODERS_OWN, copy.info
    assert not copy.getexif()
    return copy


@pytest.mark.parametrize("name", FILES)
def test_a_re_encoded_image_keeps_nothing_of_its_files_metadata(name):
    data = FILES[name]()
    assert b"SECRET" in data  # the crafted file does hold its metadata
    for box in ((1568, 1568), (60, 60)):  # as sent to a model (the size kept), as a thumbnail
        copy = images.scaled(io.BytesIO(data), box=box)
        assert assert_pixels_only(copy.data).format == ("PNG" if "transparency" in name else "JPEG")


@pytest.mark.django_db(transaction=True)
def test_a_thumbnail_served_keeps_nothing_of_its_files_metadata(alice, owned, root):
    owner = client_of(alice)
    data = FILES["png with transparency, tEXt/iTXt/zTXt + ICC + eXIf"]()
    assert upload(owner, owned, "marked.png", data).status_code == 201
    answer = owner.get(f"/api/conversations/{owned.pk}/files/marked.png?thumbnail=1")
    assert answer.status_code == 200 and answer["Content-Type"] == "image/png"
    assert assert_pixels_only(b"".join(answer.streaming_content)).size == (120, 80)
