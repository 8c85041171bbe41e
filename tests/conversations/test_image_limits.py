"""Images cannot exhaust a server's memory (docs/protocol.md, "Images"): one pixel limit,
AGENT_IMAGE_MAX_INPUT_PIXELS, refuses an image before anything decodes it; a thumbnail is made
once and kept; at most AGENT_IMAGE_DECODES images are decoded at once in a process. Decodings
are counted at Pillow's ImageFile.load, where every format's pixels are read from its file.
(tests/e2e/test_image_memory.py measures a real server's memory.)"""

from __future__ import annotations

import io
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from PIL import Image, ImageFile

from chat.checks import check_agent_settings
from chat.conversations import images
from chat.conversations.services import conversation_delete
from chat.tools.confine import workspace_path
from tests.conversations.test_files import alice, client_of, owned, root, upload  # noqa: F401 (fixtures)
from tests.crafted_images import plain_png

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


@pytest.fixture
def decodes(monkeypatch) -> list[str]:
    """The names of the threads that decoded an image, one entry per decoding."""
    seen: list[str] = []
    load = ImageFile.ImageFile.load

    def counted(image):
        if image.tile:  # pixels still to read from the file: a decoding (not a load of loaded pixels)
            seen.append(threading.current_thread().name)
        return load(image)

    monkeypatch.setattr(ImageFile.ImageFile, "load", counted)
    return seen


def encoded(image: Image.Image, kind: str) -> bytes:
    out = io.BytesIO()
    image.save(out, kind)
    return out.getvalue()


def thumbnail_url(conversation, path: str) -> str:
    return f"/api/conversations/{conversation.pk}/files/{path}?thumbnail=1"


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")  # Pillow's own, before ours
def test_an_image_over_the_pixel_limit_is_refused_at_upload_before_it_is_decoded(alice, owned, root, settings, decodes):
    settings.AGENT_IMAGE_MAX_INPUT_PIXELS = 40_000_000
    large = plain_png(7000, 7000)  # 49 megapixels in 150 KB: under the upload limit by far
    answer = upload(client_of(alice), owned, "large.png", large)
    assert answer.status_code == 400, answer.content
    assert answer.json()["error"] == "bad_request"
    assert "7000x7000 pixels, more than the 40,000,000 that may be decoded" in answer.json()["message"]
    assert decodes == []
    assert not (workspace_path(root, owned.pk) / "large.png").exists()


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
def test_an_image_over_the_limit_written_by_the_agent_has_no_thumbnail_and_is_not_decoded(
    alice, owned, root, settings, decodes
):
    settings.AGENT_IMAGE_MAX_INPUT_PIXELS = 40_000_000
    workspace = workspace_path(root, owned.pk)
    workspace.mkdir(exist_ok=True)
    (workspace / "drawn.png").write_bytes(plain_png(7000, 7000))  # as write_file or bash would
    answer = client_of(alice).get(thumbnail_url(owned, "drawn.png"))
    assert answer.status_code == 400
    assert "no thumbnail: the image is 7000x7000 pixels" in answer.json()["message"]
    assert decodes == []


def test_a_thumbnail_is_made_once_and_kept_until_its_file_changes_or_goes(alice, owned, root, decodes):
    owner = client_of(alice)
    assert upload(owner, owned, "pic.png", encoded(Image.new("RGB", (1200, 600), "red"), "PNG")).status_code == 201
    first = owner.get(thumbnail_url(owned, "pic.png"))
    assert first.status_code == 200 and first["Content-Type"] == "image/jpeg"
    data = b"".join(first.streaming_content)
    assert Image.open(io.BytesIO(data)).size == (320, 160)
    again = owner.get(thumbnail_url(owned, "pic.png"))
    assert b"".join(again.streaming_content) == data
    assert len(decodes) == 1, "the second request decoded the image again"
    folder = root / ".thumbnails" / str(owned.pk)  # beside the workspaces, not in one
    [kept] = [p for p in folder.rglob("*") if p.is_file()]
    assert kept.read_bytes() == data
    made = kept.stat().st_mtime_ns
    listed = owner.get(f"/api/conversations/{owned.pk}/files/").json()["files"]
    assert [f["path"] for f in listed] == ["pic.png"]  # the agent's workspace holds no copy
    assert owner.get(thumbnail_url(owned, "pic.png")).status_code == 200
    assert len(decodes) == 1 and kept.stat().st_mtime_ns == made
    # The file replaced: a new thumbnail, the old one removed.
    assert upload(owner, owned, "pic.png", encoded(Image.new("RGB", (600, 1200), "blue"), "PNG")).status_code == 201
    replaced = owner.get(thumbnail_url(owned, "pic.png"))
    assert Image.open(io.BytesIO(b"".join(replaced.streaming_content))).size == (160, 320)
    assert len(decodes) == 2
    assert [p.name for p in folder.rglob("*") if p.is_file()] != [kept.name]
    assert len([p for p in folder.rglob("*") if p.is_file()]) == 1
    # The file deleted: its thumbnails with it; the conversation deleted: its folder with it.
    assert owner.delete(f"/api/conversations/{owned.pk}/files/pic.png").status_code == 204
    assert [p for p in folder.rglob("*") if p.is_file()] == []
    assert upload(owner, owned, "other.png", encoded(Image.new("RGB", (50, 50)), "PNG")).status_code == 201
    assert owner.get(thumbnail_url(owned, "other.png")).status_code == 200
    assert folder.exists()
    conversation_delete(conversation=owned)
    assert not folder.exists()


def test_parallel_requests_for_one_thumbnail_decode_it_once(alice, owned, root, decodes, monkeypatch):
    owner = client_of(alice)
    assert upload(owner, owned, "one.png", encoded(Image.new("RGB", (2000, 1000), "green"), "PNG")).status_code == 201
    scaled = images.scaled

    def slow(*args, **kwargs):  # long enough for the others to arrive meanwhile
        time.sleep(0.3)
        return scaled(*args, **kwargs)

    monkeypatch.setattr(images, "scaled", slow)
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: owner.get(thumbnail_url(owned, "one.png")), range(4)))
    assert [a.status_code for a in answers] == [200] * 4
    assert len({b"".join(a.streaming_content) for a in answers}) == 1
    assert len(decodes) == 1


@pytest.mark.parametrize("at_once", [1, 2])
def test_a_process_decodes_at_most_AGENT_IMAGE_DECODES_images_at_once(settings, monkeypatch, at_once):
    settings.AGENT_IMAGE_DECODES = at_once
    inside: set[str] = set()
    most = [0]
    guard = threading.Lock()
    load = ImageFile.ImageFile.load

    def watched(image):
        if not image.tile:  # its pixels already read: not a decoding
            return load(image)
        me = threading.current_thread().name
        with guard:
            inside.add(me)
            most[0] = max(most[0], len(inside))
        try:
            time.sleep(0.1)  # a decoding that takes a while: the others arrive meanwhile
            return load(image)
        finally:
            with guard:
                inside.discard(me)

    monkeypatch.setattr(ImageFile.ImageFile, "load", watched)
    files = [encoded(Image.new("RGB", (800 + n, 600), "red"), "PNG") for n in range(5)]
    with ThreadPoolExecutor(5) as pool:
        done = list(pool.map(lambda data: images.scaled(io.BytesIO(data), box=(100, 100)), files))
    assert [d.mime for d in done] == ["image/jpeg"] * 5
    assert most[0] == at_once


def test_a_jpeg_is_decoded_at_a_fraction_of_its_size(settings, monkeypatch):
    photo = encoded(Image.effect_noise((4000, 3000), 64).convert("RGB"), "JPEG")
    sizes: list[tuple[int, int]] = []
    load = ImageFile.ImageFile.load

    def seen(image):
        sizes.append(image.size)
        return load(image)

    monkeypatch.setattr(ImageFile.ImageFile, "load", seen)
    small = images.scaled(io.BytesIO(photo), box=(320, 320))
    assert (small.width, small.height) == (320, 240)
    assert sizes and max(sizes) == (1000, 750)  # drafted at 1/4: still twice the box, not 12 megapixels


def test_the_limit_settings_are_checked(settings):
    settings.AGENT_IMAGE_MAX_INPUT_PIXELS = 0
    settings.AGENT_IMAGE_DECODES = 0
    messages = [e.msg for e in check_agent_settings(None)]
    assert "AGENT_IMAGE_MAX_INPUT_PIXELS must be at least 1, not 0." in messages
    assert "AGENT_IMAGE_DECODES must be at least 1, not 0." in messages
