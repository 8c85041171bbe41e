"""Images attached to a message, as the model receives them (docs/protocol.md, "Images"): real
uploads over HTTP, real runs over the WebSocket, the request read at the fake OpenAI-compatible
server (tests/fakellm.py)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import time

import pytest
from asgiref.sync import sync_to_async
from PIL import Image

from chat.conversations import images
from chat.models import AgentProfile, ModelCall
from chat.runtime.image_parts import image_parts
from tests.conversations.test_files import _run, alice, aupload, client_of, owned, root, upload  # noqa: F401 (fixtures)
from tests.fakellm import text_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def encoded(image: Image.Image, kind: str, **options) -> bytes:
    out = io.BytesIO()
    image.save(out, kind, **options)
    return out.getvalue()


def sent_images(request: dict) -> list[Image.Image]:
    """The images of the last user message of a request, decoded from their data URLs."""
    content = request["messages"][-1]["content"]
    found = []
    for part in content if isinstance(content, list) else []:
        if part["type"] == "image_url":
            url = part["image_url"]["url"]
            assert url.startswith("data:image/")
            found.append(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))
    return found


async def ask(alice, conversation, content: str, attachments: list[str]) -> list[dict]:
    from tests.asgi_socket import Socket

    socket = Socket(alice, conversation.pk)
    await socket.connect()
    await socket.history()
    frames = await _run(socket, {"type": "message", "content": content, "attachments": attachments})
    await socket.close()
    assert frames[-1]["status"] == "succeeded", frames[-1]
    return frames


@pytest.fixture
def vision(settings, llm_settings):
    settings.AGENT_VISION = True
    settings.AGENT_TRACE_REQUESTS = True
    llm_settings.responder = lambda body: text_reply("seen")
    return llm_settings


async def test_a_big_png_is_scaled_into_the_box_with_its_ratio(alice, owned, root, registry, vision, settings):
    settings.AGENT_IMAGE_MAX_PIXELS = "800x600"
    stored = await aupload(alice, owned, "wide.png", encoded(Image.new("RGB", (4000, 1000), "red"), "PNG"))
    assert stored.status_code == 201
    assert stored.json()["image"] == {"format": "png", "width": 4000, "height": 1000}
    frames = await ask(alice, owned, "What is this?", ["wide.png"])
    assert frames[0]["attachments"][0]["image"] == {"format": "png", "width": 4000, "height": 1000}
    request = vision.requests[0]
    content = request["messages"][-1]["content"]
    assert content[0]["type"] == "text" and content[0]["text"].startswith("What is this?")
    [sent] = sent_images(request)
    assert sent.size == (800, 200)  # the width fills the box; 4:1 kept
    assert sent.format == "JPEG"
    # the event log and the trace keep no base64
    stored_events = json.dumps(frames)
    assert "base64" not in stored_events
    calls = await sync_to_async(lambda: list(ModelCall.objects.values_list("request_messages", flat=True)))()
    recorded = json.dumps(calls)
    assert "base64" not in recorded and '"path": "wide.png"' in recorded


async def test_a_jpeg_is_turned_by_its_exif_orientation_and_sent_without_exif(alice, owned, root, registry, vision):
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise to display
    exif[0x010F] = "SecretCam"  # the maker: metadata that must not leave
    photo = encoded(Image.new("RGB", (300, 200), "blue"), "JPEG", exif=exif.tobytes())
    await aupload(alice, owned, "photo.jpg", photo)
    await ask(alice, owned, "Describe", ["photo.jpg"])
    [sent] = sent_images(vision.requests[0])
    assert sent.size == (200, 300)  # the sides swapped: it is shown upright
    assert not sent.getexif() and "exif" not in sent.info


async def test_an_animated_gif_is_sent_as_its_first_frame_and_the_model_is_told(alice, owned, root, registry, vision):
    frames_ = [Image.new("RGB", (64, 48), colour) for colour in ("red", "green", "blue")]
    gif = encoded(frames_[0], "GIF", save_all=True, append_images=frames_[1:], duration=100, loop=0)
    stored = await aupload(alice, owned, "moving.gif", gif)
    assert stored.json()["image"] == {"format": "gif", "width": 64, "height": 48, "animated": True}
    await ask(alice, owned, "What moves?", ["moving.gif"])
    content = vision.requests[0]["messages"][-1]["content"]
    [sent] = sent_images(vision.requests[0])
    assert sent.size == (64, 48)
    assert any(p["type"] == "text" and "only its first frame" in p["text"] for p in content)


async def test_a_text_file_named_png_is_never_sent_as_an_image(alice, owned, root, registry, vision):
    stored = await aupload(alice, owned, "fake.png", b"I am text pretending to be a picture\n")
    assert stored.status_code == 201 and "image" not in stored.json()
    frames = await ask(alice, owned, "Look", ["fake.png"])
    assert "image" not in frames[0]["attachments"][0]
    told = vision.requests[0]["messages"][-1]["content"]
    assert isinstance(told, str) and "image_url" not in json.dumps(vision.requests[0])
    assert "[Attached files in your workspace" in told and "fake.png" in told


async def test_the_image_stays_in_the_memory_of_the_next_turn(alice, owned, root, registry, vision):
    await aupload(alice, owned, "cat.webp", encoded(Image.new("RGB", (120, 90), "gray"), "WEBP"))
    await ask(alice, owned, "What animal?", ["cat.webp"])
    await ask(alice, owned, "And its colour?", [])
    second = vision.requests[1]["messages"]
    earlier = next(m for m in second if m["role"] == "user" and isinstance(m["content"], list))
    assert earlier["content"][0]["text"].startswith("What animal?")
    assert [p["type"] for p in earlier["content"]] == ["text", "image_url"]
    assert second[-1] == {"role": "user", "content": "And its colour?"}
    assert not any("images" in m for m in second)  # the memory's references never reach the model


async def test_a_profile_without_images_gets_the_workspace_note(alice, root, registry, vision):
    from chat.conversations.services import conversation_create

    profile = await sync_to_async(AgentProfile.objects.create)(
        slug="blind", name="Blind", model="text-only", base_url=vision.base_url, everyone=True, vision=False
    )
    conversation = await sync_to_async(conversation_create)(owner=alice, agent=profile)
    await aupload(alice, conversation, "chart.png", encoded(Image.new("RGB", (50, 50)), "PNG"))
    await ask(alice, conversation, "Read the chart", ["chart.png"])
    request = vision.requests[0]
    assert request["model"] == "text-only"
    told = request["messages"][-1]["content"]
    assert isinstance(told, str) and "chart.png" in told and "image_url" not in json.dumps(request)
    # switched on, the same profile is sent the image
    await sync_to_async(AgentProfile.objects.filter(pk=profile.pk).update)(vision=True)
    await ask(alice, conversation, "Now?", ["chart.png"])
    assert len(sent_images(vision.requests[1])) == 1


async def test_the_demo_model_answers_an_image_with_its_size(alice, owned, root, registry, settings):
    settings.AGENT_MODEL = "demo"
    settings.AGENT_DEMO_CHUNK_DELAY = 0
    await aupload(alice, owned, "tall.png", encoded(Image.new("RGB", (3000, 4000), "white"), "PNG"))
    frames = await ask(alice, owned, "What is this?", ["tall.png"])
    answer = "".join(f["content"] for f in frames if f["type"] == "text")
    assert "1176 × 1568 pixels" in answer  # 3000x4000 into 1568x1568


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")  # Pillow's own, before ours
def test_a_decompression_bomb_is_refused_at_upload_with_a_clear_error(alice, owned, root):
    bomb = encoded(Image.new("1", (10_000, 10_000)), "PNG")  # 100 megapixels in a few kilobytes
    assert len(bomb) < 100_000
    answer = upload(client_of(alice), owned, "bomb.png", bomb)
    assert answer.status_code == 400
    assert answer.json()["error"] == "bad_request"
    assert "10000x10000 pixels" in answer.json()["message"]


def test_the_box_setting_is_parsed_or_refused():
    assert images.parse_box("1568x1568") == (1568, 1568)
    assert images.parse_box(" 800 X 600 ") == (800, 600)
    for bad in ("1568", "0x10", "axb", "10x10x10", ""):
        with pytest.raises(ValueError):
            images.parse_box(bad)


async def test_scaling_a_20_megapixel_image_does_not_block_the_event_loop(root, settings, tmp_path):
    settings.AGENT_IMAGE_MAX_PIXELS = "1568x1568"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    noise = Image.effect_noise((5472, 3648), 64).convert("RGB")  # 20 megapixels, as a camera takes them
    (workspace / "big.jpg").write_bytes(encoded(noise, "JPEG", quality=70))
    assert (workspace / "big.jpg").stat().st_size < settings.AGENT_MAX_UPLOAD_BYTES
    lags: list[float] = []

    async def ticker():
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append(time.perf_counter() - before - 0.01)

    from chat.agent.hooks import AgentState
    from chat.agent.tools import ToolContext
    from chat.runtime.image_parts import ImageParts

    state = AgentState(
        messages=[{"role": "user", "content": "hi", "images": [{"path": "big.jpg"}]}],
        context=ToolContext(workspace=workspace),
    )
    tick = asyncio.create_task(ticker())
    started = time.perf_counter()
    await ImageParts(vision=True).before_model(state)
    took = time.perf_counter() - started
    tick.cancel()
    assert took > 0.1, "the scaling was too quick to show anything"
    assert len(lags) >= 5 and max(lags) < 0.1, (took, max(lags))
    assert [p["type"] for p in state.messages[0]["content"]] == ["text", "image_url"]
    # done once: the next model call is served from the cache
    assert (
        image_parts(workspace, "big.jpg")[0]["image_url"]["url"] == state.messages[0]["content"][1]["image_url"]["url"]
    )


async def test_the_inspector_shows_a_thumbnail_and_never_the_base64(alice, owned, root, registry, vision, make_user):
    import re

    await aupload(alice, owned, "chart.png", encoded(Image.new("RGB", (900, 300), "green"), "PNG"))
    frames = await ask(alice, owned, "Explain", ["chart.png"])

    def page() -> str:
        staff = make_user("staff")
        staff.is_staff = True
        staff.save(update_fields=["is_staff"])
        answer = client_of(staff).get(f"/inspect/runs/{frames[0]['runId']}/")
        assert answer.status_code == 200
        return answer.content.decode()

    html = await sync_to_async(page)()
    [src] = re.findall(r'<img src="(data:image/[^"]+)" alt="chart.png"', html)
    thumb = Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1])))
    assert thumb.size == (160, 53)  # a thumbnail, not the image sent
    assert "chart.png, sent as 900×300" in html
    request_view = html[html.index('<pre class="payload"') :]
    assert "base64" not in request_view.split("</pre>")[0] and "elided" in request_view


def test_thumbnails_are_served_to_the_owner_only_and_for_images_only(alice, owned, root, make_user):
    owner = client_of(alice)
    upload(owner, owned, "pic.jpg", encoded(Image.new("RGB", (1000, 500), "red"), "JPEG"))
    upload(owner, owned, "fake.png", b"<svg onload=alert(1)>")
    url = f"/api/conversations/{owned.pk}/files/"
    answer = owner.get(url + "pic.jpg?thumbnail=1")
    assert answer.status_code == 200 and answer["Content-Type"] == "image/jpeg"
    assert answer["X-Content-Type-Options"] == "nosniff" and "sandbox" in answer["Content-Security-Policy"]
    assert Image.open(io.BytesIO(b"".join(answer.streaming_content))).size == (320, 160)
    refused = owner.get(url + "fake.png?thumbnail=1")
    assert refused.status_code == 400 and "no thumbnail" in refused.json()["message"]
    assert owner.get(url + "gone.png?thumbnail=1").status_code == 404
    assert client_of(make_user("mallory")).get(url + "pic.jpg?thumbnail=1").status_code == 404
    from django.test import Client

    assert Client().get(url + "pic.jpg?thumbnail=1").status_code in (401, 403)


def test_a_forged_reference_shows_nothing(root, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "note.png").write_text("text, not an image")
    (tmp_path / "secret.png").write_bytes(encoded(Image.new("RGB", (10, 10)), "PNG"))
    assert image_parts(workspace, "note.png") == []  # a memory naming a file that is not an image
    assert image_parts(workspace, "../secret.png") == []  # or one outside the workspace
    assert image_parts(workspace, "gone.png") == []
