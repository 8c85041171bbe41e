"""A server's memory under parallel requests decoding large images (docs/protocol.md, "Images"):
a real daphne, images just under AGENT_IMAGE_MAX_INPUT_PIXELS (7000x7000, 49 megapixels in about
150 KB of PNG each), four uploaded and then asked for their thumbnails at once, three sent at once
through /v1 (each request's own conversation, so each image is decoded for the model).
Decoding one takes about 200 MB; AGENT_IMAGE_DECODES bounds how many decode at once in a process,
so the process's peak resident memory (VmHWM, read from /proc) grows by about that many
decodings, not by one per request, and comes back down once they are done (serving.malloc).
The figures are printed (pytest -s): before the bound, the four thumbnails took the process from
168 MB to 2450 MB, the three /v1 requests from 184 MB to 1951 MB, where it stayed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.crafted_images import plain_png

from .harness import Client
from .test_api_images import data_url, sdk, user_message

SIDE = 7000  # 49,000,000 pixels: under the default limit of 50,000,000
DECODED_MB = SIDE * SIDE * 4 / 1e6  # one decoded image: 196 MB (Pillow keeps RGB in 4 bytes a pixel)
DECODES = 2  # AGENT_IMAGE_DECODES
SLACK_MB = 150  # the reduced copies, threads' stacks, the allocator


def reset_peak(pid: int) -> None:
    """VmHWM starts again from VmRSS (Linux's clear_refs, on a process of ours)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def memory_mb(pid: int) -> dict[str, float]:
    """VmRSS (resident now) and VmHWM (the peak resident since reset_peak), in MB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) * 1024 / 1e6  # kB
    return found


@pytest.fixture(scope="module")
def image_server(databases, make_server, tmp_path_factory):
    return make_server(
        databases.new(),
        name="image-memory",
        AGENT_WORKSPACE_ROOT=str(tmp_path_factory.mktemp("image-memory-workspaces")),
        AGENT_IMAGE_DECODES=str(DECODES),
        AGENT_VISION="1",
        AGENT_MESSAGES_PER_MINUTE="1000",
    )


async def test_parallel_thumbnails_of_large_images_keep_the_memory_bounded(image_server):
    owner = await Client(image_server).signup()
    conversation = await owner.create_conversation("large images")
    data = plain_png(SIDE, SIDE)
    files = f"/api/conversations/{conversation}/files/"
    for number in range(4):  # four files, so that no thumbnail is another's: four decodings asked for
        r = await owner.http.post(
            owner.url(files),
            files={"file": (f"large-{number}.png", data, "image/png")},
            headers=owner._unsafe_headers(),
        )
        assert r.status_code == 201, r.text
        assert r.json()["image"] == {"format": "png", "width": SIDE, "height": SIDE}
    pid = image_server.proc.pid
    reset_peak(pid)
    before = memory_mb(pid)
    answers = await asyncio.gather(*(owner.http.get(owner.url(f"{files}large-{n}.png?thumbnail=1")) for n in range(4)))
    after = memory_mb(pid)
    await owner.aclose()
    assert [r.status_code for r in answers] == [200] * 4, [r.text[:200] for r in answers]
    assert all(r.headers["Content-Type"] == "image/jpeg" for r in answers)
    growth = after["VmHWM"] - before["VmRSS"]
    print(
        f"\nthumbnails of 4 images of {SIDE}x{SIDE} at once: resident {before['VmRSS']:.0f} MB before, "
        f"peak {after['VmHWM']:.0f} MB, {after['VmRSS']:.0f} MB after; growth {growth:.0f} MB "
        f"(one decoded image: {DECODED_MB:.0f} MB)"
    )
    assert growth < DECODES * DECODED_MB + SLACK_MB, growth  # two decodings at once, not four
    assert after["VmRSS"] - before["VmRSS"] < SLACK_MB, after  # and their memory given back


async def test_parallel_v1_requests_with_large_images_keep_the_memory_bounded(image_server):
    owner, client = await sdk(image_server)
    image = data_url(plain_png(SIDE, SIDE))
    pid = image_server.proc.pid
    reset_peak(pid)
    before = memory_mb(pid)
    answers = await asyncio.gather(
        *(
            client.chat.completions.create(model="default", messages=[user_message(f"large {n}", image)])
            for n in range(3)
        )
    )
    after = memory_mb(pid)
    await client.close()
    await owner.aclose()
    assert all(answer.choices[0].message.content for answer in answers)
    growth = after["VmHWM"] - before["VmRSS"]
    print(
        f"\n/v1 with an image of {SIDE}x{SIDE}, 3 requests at once: resident {before['VmRSS']:.0f} MB before, "
        f"peak {after['VmHWM']:.0f} MB, {after['VmRSS']:.0f} MB after; growth {growth:.0f} MB"
    )
    # each decoding at most DECODED_MB and its reduced copy (3500x3500 for the default box, 1568x1568)
    assert growth < DECODES * DECODED_MB * 1.25 + SLACK_MB, growth
    assert after["VmRSS"] - before["VmRSS"] < SLACK_MB, after
