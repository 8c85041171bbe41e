"""Images through the programmatic doors, against a real daphne with a personal API token
(docs/protocol.md, "Images", "Runs over HTTP" and "OpenAI-compatible endpoint"): a program uploads
an image through the files API and posts a message attaching it, or sends it as OpenAI's
`image_url` part through the official SDK (async and sync). The fake model receives an `image_url`
part, a data URL of the image scaled into AGENT_IMAGE_MAX_PIXELS; the demo model answers with the
size it was sent; a profile that does not take images is told the file is in its workspace. Every
refusal is OpenAI's 400 (413 for a body over the limit) and leaves no conversation and no file."""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path

import openai
import pytest
from openai import AsyncOpenAI, OpenAI
from PIL import Image

from chat.eventlog.history import attachments_note
from tests.crafted_images import plain_png
from tests.fakellm import text_reply

from .harness import Client, SyncUser, shell
from .test_runs_http import bearer, read_sse

pytestmark = pytest.mark.services

UPLOAD_LIMIT, WORKSPACE_QUOTA = 300_000, 400_000


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("api-images-workspaces")


@pytest.fixture(scope="module")
def vision_server(databases, make_server, workspaces, e2e_llm):
    server = make_server(
        databases.new(),
        name="api-images",
        AGENT_VISION="1",
        AGENT_IMAGE_MAX_PIXELS="800x600",
        AGENT_MAX_UPLOAD_BYTES=str(UPLOAD_LIMIT),
        AGENT_WORKSPACE_MAX_BYTES=str(WORKSPACE_QUOTA),
        AGENT_WORKSPACE_ROOT=str(workspaces),
        AGENT_MESSAGES_PER_MINUTE="1000",
        AGENT_IMAGE_MAX_INPUT_PIXELS="20000000",
    )
    shell(
        server,
        "from chat.models import AgentProfile; AgentProfile.objects.create(slug='blind', name='Blind', "
        f"model='text-only', base_url={e2e_llm.base_url!r}, everyone=True, vision=False)",
    )
    return server


@pytest.fixture(scope="module")
def demo_server(databases, make_server):
    return make_server(databases.new(), name="api-images-demo", AGENT_MODEL="demo", AGENT_DEMO_CHUNK_DELAY="0")


def encoded(kind: str, size: tuple[int, int], colour: str = "red") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, kind)
    return out.getvalue()


def noise_png(side: int) -> bytes:
    """A PNG that does not compress: about side*side*3 bytes."""
    out = io.BytesIO()
    Image.frombytes("RGB", (side, side), os.urandom(side * side * 3)).save(out, "PNG")
    return out.getvalue()


def data_url(data: bytes, media: str = "image/png") -> str:
    return f"data:{media};base64,{base64.b64encode(data).decode()}"


def user_message(text: str, *images: str) -> dict:
    parts = [{"type": "image_url", "image_url": {"url": url, "detail": "high"}} for url in images]
    return {"role": "user", "content": [{"type": "text", "text": text}, *parts]}


def text_of(message: dict) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if part["type"] == "text")


def model_request(e2e_llm, text: str) -> dict:
    """The newest request the fake model received whose last message begins with `text`."""
    return next(body for body in reversed(e2e_llm.requests) if text_of(body["messages"][-1]).startswith(text))


def sent_images(message: dict) -> list[Image.Image]:
    """The images of a message as the model received them, decoded from their data URLs."""
    found = []
    for part in message["content"] if isinstance(message["content"], list) else []:
        if part["type"] == "image_url":
            url = part["image_url"]["url"]
            assert url.startswith("data:image/jpeg;base64,") or url.startswith("data:image/png;base64,")
            found.append(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))
    return found


async def sdk(server) -> tuple[Client, AsyncOpenAI]:
    owner = await Client(server).signup()
    r = await owner.api("POST", "/api/tokens/", json_body={"name": "images"})
    assert r.status_code == 201, r.text
    return owner, AsyncOpenAI(base_url=f"{server.base}/v1", api_key=r.json()["token"], max_retries=0, timeout=60)


async def test_a_program_uploads_an_image_and_posts_a_message_attaching_it(vision_server, e2e_llm):
    owner = await Client(vision_server).signup()
    http = await bearer(owner)
    r = await http.post("/api/conversations/", json={"title": "images"})
    assert r.status_code == 201, r.text
    conversation = r.json()["id"]
    wide = encoded("PNG", (4000, 1000))
    r = await http.post(f"/api/conversations/{conversation}/files/", files={"file": ("wide.png", wide, "image/png")})
    assert r.status_code == 201, r.text
    assert r.json()["image"] == {"format": "png", "width": 4000, "height": 1000}
    r = await http.post(
        f"/api/conversations/{conversation}/messages/", json={"content": "http image", "attachments": ["wide.png"]}
    )
    assert r.status_code == 202, r.text
    items = await read_sse(http, f"/api/conversations/{conversation}/stream/?after=0&until=complete")
    frames = [data for event, _, data in items if event != "sync"]
    assert frames[0]["attachments"] == [
        {"path": "wide.png", "size": len(wide), "image": {"format": "png", "width": 4000, "height": 1000}}
    ]
    assert frames[-1]["type"] == "complete" and frames[-1]["status"] == "succeeded"
    last = model_request(e2e_llm, "http image")["messages"][-1]
    assert text_of(last) == "http image" + attachments_note(frames[0])
    [sent] = sent_images(last)
    assert (sent.format, sent.size) == ("JPEG", (800, 200))  # into 800x600, its 4:1 kept
    await http.aclose()
    await owner.aclose()


async def test_an_openai_client_sends_images_now_and_in_the_history(vision_server, replies, e2e_llm):
    owner, client = await sdk(vision_server)
    photo, square = encoded("JPEG", (1600, 1200), "blue"), encoded("PNG", (300, 300))
    attached = {"attachments": [{"path": "image-1.jpeg", "size": len(photo)}]}
    replies.set("v1 image" + attachments_note(attached), text_reply("A blue photo."))
    raw = await client.chat.completions.with_raw_response.create(
        model="default", messages=[user_message("v1 image", data_url(photo, "image/jpeg"))]
    )
    assert raw.parse().choices[0].message.content == "A blue photo."
    conversation = raw.headers["x-agentsite-conversation"]
    [first] = [e for e in await owner.events(conversation) if e["type"] == "user_message"]
    assert first["content"] == "v1 image"
    assert first["attachments"] == [
        {"path": "image-1.jpeg", "size": len(photo), "image": {"format": "jpeg", "width": 1600, "height": 1200}}
    ]
    [sent] = sent_images(model_request(e2e_llm, "v1 image")["messages"][-1])
    assert sent.size == (800, 600)
    r = await owner.http.get(owner.url(f"/api/conversations/{conversation}/files/image-1.jpeg"))
    assert r.content == photo  # the upload is the client's bytes; only what the model is sent is scaled
    # A client asks again with the earlier turn (and its image) as history, and a new image: the
    # earlier image is shown to the model where it was, and both are files of the new conversation.
    raw = await client.chat.completions.with_raw_response.create(
        model="default",
        messages=[
            user_message("first look", data_url(square)),
            {"role": "assistant", "content": "A red square."},
            user_message("v1 and this one?", data_url(photo, "image/png")),  # a JPEG declared as PNG
        ],
    )
    conversation = raw.headers["x-agentsite-conversation"]
    [event] = [e for e in await owner.events(conversation) if e["type"] == "user_message"]
    square_entry = {"path": "image-1.png", "size": len(square), "image": {"format": "png", "width": 300, "height": 300}}
    assert event["history"] == [
        {"role": "user", "content": "first look", "attachments": [square_entry]},
        {"role": "assistant", "content": "A red square."},
    ]
    assert [a["path"] for a in event["attachments"]] == ["image-2.jpeg"]
    *_, earlier, answer, last = model_request(e2e_llm, "v1 and this one?")["messages"]
    assert text_of(earlier) == "first look" + attachments_note({"attachments": [square_entry]})
    assert [image.size for image in sent_images(earlier)] == [(300, 300)]
    assert answer == {"role": "assistant", "content": "A red square."}
    assert [image.size for image in sent_images(last)] == [(800, 600)]
    r = await owner.http.get(owner.url(f"/api/conversations/{conversation}/files/"))
    assert sorted(f["path"] for f in r.json()["files"]) == ["image-1.png", "image-2.jpeg"]
    await client.close()
    await owner.aclose()


def test_the_sync_client_streams_an_answer_to_an_image(vision_server, e2e_llm):
    person = SyncUser(vision_server)
    client = OpenAI(base_url=f"{vision_server.base}/v1", api_key=person.token(), max_retries=0, timeout=60)
    gif = encoded("GIF", (64, 48), "green")
    chunks = client.chat.completions.create(
        model="default", messages=[user_message("sync image", data_url(gif, "image/webp"))], stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello from the fake model."
    [sent] = sent_images(model_request(e2e_llm, "sync image")["messages"][-1])
    assert sent.size == (64, 48)  # small already: never enlarged
    client.close()
    person.close()


async def test_an_agent_that_does_not_take_images_is_told_where_the_file_is(vision_server, e2e_llm):
    owner, client = await sdk(vision_server)
    chart = encoded("PNG", (50, 50))
    await client.chat.completions.create(model="blind", messages=[user_message("blind chart", data_url(chart))])
    request = model_request(e2e_llm, "blind chart")
    assert request["model"] == "text-only"
    note = attachments_note({"attachments": [{"path": "image-1.png", "size": len(chart)}]})
    assert request["messages"][-1]["content"] == "blind chart" + note  # text alone, no image part
    await client.close()
    await owner.aclose()


async def test_the_demo_model_answers_an_image_with_its_size_through_v1(demo_server):
    owner, client = await sdk(demo_server)
    tall = encoded("PNG", (3000, 4000), "white")
    completion = await client.chat.completions.create(
        model="default", messages=[user_message("What is this?", data_url(tall))]
    )
    assert "1176 × 1568 pixels" in completion.choices[0].message.content  # 3000x4000 into 1568x1568
    await client.close()
    await owner.aclose()


def refusal(error: openai.APIStatusError) -> tuple[int, str, str | None]:
    assert error.body["type"] == "invalid_request_error" and error.body["message"]
    return error.status_code, error.code, error.body["param"]


async def test_refused_images_are_openais_400s_and_leave_nothing_behind(vision_server, workspaces):
    owner, client = await sdk(vision_server)
    before = sorted(workspaces.iterdir())
    png = data_url(encoded("PNG", (10, 10)))
    at = "messages[0].content[1].image_url.url"
    cases = [
        ([user_message("x", "https://example.com/cat.png")], (400, "invalid_image_url", at)),
        ([user_message("x", data_url(b"just some text"))], (400, "invalid_image_format", at)),
        ([user_message("x", "data:image/png;base64,iVBOR\n@@")], (400, "invalid_image_format", at)),
        ([user_message("x", data_url(noise_png(330)))], (400, "image_too_large", at)),  # over the upload limit
        # 25 megapixels in 60 KB: over AGENT_IMAGE_MAX_INPUT_PIXELS, refused before it is decoded
        ([user_message("x", data_url(plain_png(5000, 5000)))], (400, "image_too_large", at)),
        (
            [user_message("x", *(data_url(encoded("PNG", (n, 1))) for n in range(1, 22)))],
            (400, "too_many_images", "messages"),
        ),
        ([user_message("", png)], (400, "invalid_content", "messages[0].content")),
        (
            [{"role": "system", "content": [{"type": "image_url", "image_url": {"url": png}}]}, user_message("x")],
            (400, "invalid_content", "messages[0].content[0]"),
        ),
        # Each image within the upload limit, together over the workspace's quota: refused when the
        # second is written, and the conversation made for them is deleted with the first.
        ([user_message("x", data_url(noise_png(290)), data_url(noise_png(290)))], (400, "image_too_large", "messages")),
    ]
    for messages, expected in cases:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(model="default", messages=messages)
        assert refusal(caught.value) == expected, messages[0]["content"][0]
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(model="default", messages=[user_message("x", "http://10.0.0.1/a.png")])
    assert "does not fetch images from the internet" in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(
            model="default", messages=[user_message("x", data_url(plain_png(5000, 5000)))]
        )
    assert "5000x5000 pixels, more than the 20,000,000 that may be decoded" in caught.value.message
    with pytest.raises(openai.APIStatusError) as caught:  # over the body limit: its messages and one image
        await client.chat.completions.create(
            model="default", messages=[user_message("x", "data:image/png;base64," + "A" * 3_200_000)]
        )
    assert (caught.value.status_code, caught.value.code) == (413, "request_too_large")
    r = await owner.api("GET", "/api/conversations/")
    assert r.json()["conversations"] == []
    assert sorted(workspaces.iterdir()) == before
    await client.close()
    await owner.aclose()
