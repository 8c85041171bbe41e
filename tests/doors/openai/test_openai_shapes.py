"""The OpenAI-compatible endpoint's request reading and answer shapes, without a server
(docs/protocol.md, "OpenAI-compatible endpoint"); tests/e2e/test_openai_api.py runs them for real."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import io
from concurrent.futures import ThreadPoolExecutor

import orjson
import pytest
from PIL import Image

from chat.agent.approval import DENIED, Unattended
from chat.agent.turns import ModelOptions
from chat.agents import profiles
from chat.conversations import uploads
from chat.doors.openai import openai_images
from chat.doors.openai import openai_shapes as shapes
from chat.eventlog import history
from chat.models import API_SOURCE


def test_the_last_user_message_is_the_content_and_the_rest_its_history():
    call = shapes.completion_request(
        {
            "model": "default",
            "messages": [
                {"role": "developer", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                {"role": "assistant", "content": "c"},
                {"role": "user", "content": "d"},
            ],
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": 0.5,
        }
    )
    assert call.content == "d" and call.stream and call.include_usage
    assert call.history == (
        shapes.RequestMessage("system", "Be brief."),
        shapes.RequestMessage("user", "ab"),
        shapes.RequestMessage("assistant", "c"),
    )
    assert call.images == () and call.image_urls() == ()
    assert call.options == ModelOptions(temperature=0.5)
    both = shapes.completion_request(
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 90, "max_completion_tokens": 70}
    )
    assert both.options == ModelOptions(max_tokens=70)  # both given: the lower


def test_a_requests_options_replace_the_temperature_and_cap_max_tokens_under_the_agents():
    agent = profiles.default_config()
    capped = dataclasses.replace(agent, options=ModelOptions(temperature=0.7, max_tokens=50, top_p=0.9))
    got = profiles.with_request_options(capped, ModelOptions(temperature=0.2, max_tokens=100)).options
    assert (got.temperature, got.max_tokens, got.top_p) == (0.2, 50, 0.9)  # the agent's cap is lower: it stays
    got = profiles.with_request_options(capped, ModelOptions(max_tokens=20)).options
    assert (got.temperature, got.max_tokens) == (0.7, 20)
    uncapped = dataclasses.replace(agent, options=ModelOptions())
    assert profiles.with_request_options(uncapped, ModelOptions(max_tokens=20)).options.max_tokens == 20
    assert profiles.with_request_options(uncapped, ModelOptions()).options == ModelOptions()


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        ([], None, "invalid_request"),
        ({"messages": [{"role": "user", "content": "x"}]}, "model", "invalid_request"),
        ({"model": "default", "messages": []}, "messages", "invalid_request"),
        ({"model": "default", "messages": [{"role": "assistant", "content": "x"}]}, "messages[0]", "invalid_request"),
        ({"model": "default", "messages": [{"role": "tool", "content": "x"}]}, "messages[0]", "invalid_request"),
        ({"model": "default", "messages": [{"role": "user", "content": 3}]}, "messages[0].content", "invalid_content"),
        (
            {"model": "default", "messages": [{"role": "user", "content": [{"type": "input_audio"}]}]},
            "messages[0].content[0]",
            "invalid_content",
        ),
        (
            {"model": "default", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
            "messages[0].content[0].image_url",
            "invalid_content",
        ),
        (
            {"model": "default", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}]},
            "messages[0].content[0].image_url",
            "invalid_content",
        ),
        (
            {
                "model": "default",
                "messages": [
                    {"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]},
                    {"role": "user", "content": "x"},
                ],
            },
            "messages[0].content[0]",
            "invalid_content",
        ),
        (
            {
                "model": "default",
                "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}],
            },
            "messages[0].content",
            "invalid_content",
        ),
        (
            {"model": "default", "messages": [{"role": "user", "content": "x"}], "tools": [{}]},
            "tools",
            "tools_not_supported",
        ),
        (
            {"model": "default", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"},
            "temperature",
            "invalid_request",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 2.5},
            "temperature",
            "invalid_request",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
            "max_tokens",
            "invalid_request",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 10**30},
            "max_tokens",
            "invalid_request",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 1.5},
            "max_tokens",
            "invalid_request",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_completion_tokens": -1},
            "max_completion_tokens",
            "invalid_request",
        ),
    ],
)
def test_bad_requests_are_400_with_their_param(body, param, code):
    with pytest.raises(shapes.BadRequest) as caught:
        shapes.completion_request(body)
    assert (caught.value.param, caught.value.code) == (param, code)
    response = caught.value.response()
    error = orjson.loads(response.content)["error"]
    assert response.status_code == 400 and error["type"] == "invalid_request_error" and error["code"] == code


def encoded(kind: str, size: tuple[int, int] = (30, 20), colour: str = "red") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, kind)
    return out.getvalue()


def data_url(data: bytes, media: str = "image/png") -> str:
    return f"data:{media};base64,{base64.b64encode(data).decode()}"


def asked(*messages) -> shapes.CompletionRequest:
    return shapes.completion_request({"model": "default", "messages": list(messages)})


def with_images(text: str, *urls: str, role: str = "user") -> dict:
    parts = [{"type": "image_url", "image_url": {"url": url, "detail": "low"}} for url in urls]
    return {"role": role, "content": [{"type": "text", "text": text}, *parts]}


PNG, GIF = data_url(encoded("PNG")), data_url(encoded("GIF"), media="image/png")  # a GIF that says it is a PNG


def test_image_parts_of_user_messages_are_read_where_they_are():
    call = asked(with_images("first", PNG), {"role": "assistant", "content": "ok"}, with_images("What now?", GIF, PNG))
    assert call.content == "What now?"
    assert call.images == (
        shapes.ImageURL(GIF, "messages[2].content[1].image_url.url"),
        shapes.ImageURL(PNG, "messages[2].content[2].image_url.url"),
    )
    assert call.history[0] == shapes.RequestMessage(
        "user", "first", (shapes.ImageURL(PNG, "messages[0].content[1].image_url.url"),)
    )
    assert [image.url for image in call.image_urls()] == [PNG, GIF, PNG]


def test_images_are_decoded_once_each_and_known_by_their_content():
    call = asked(with_images("first", PNG), {"role": "assistant", "content": "ok"}, with_images("What now?", GIF, PNG))
    decoded = openai_images.decoded_images(call)
    assert list(decoded) == [PNG, GIF]  # the same image sent again is one file
    assert [d.path for d in decoded.values()] == ["image-1.png", "image-2.gif"]  # by content, not by "image/png"
    assert decoded[GIF].data == encoded("GIF")


@pytest.mark.parametrize(
    ("url", "code", "says"),
    [
        ("https://example.com/cat.png", "invalid_image_url", "does not fetch images from the internet"),
        ("HTTP://example.com/cat.png", "invalid_image_url", "does not fetch images from the internet"),
        ("file:///etc/passwd", "invalid_image_url", "base64 data: URL"),
        ("data:image/png,%89PNG", "invalid_image_url", "base64 data: URL"),
        ("data:image/png;base64", "invalid_image_url", "base64 data: URL"),
        ("data:image/png;base64,iVBOR@@@", "invalid_image_format", "not valid base64"),
        (PNG[:-4] + "\n" + PNG[-4:], "invalid_image_format", "not valid base64"),  # a line break: not strict base64
        (data_url(b"ab").rstrip("="), "invalid_image_format", "not valid base64"),  # its padding cut
        (data_url(b"I am text pretending to be a picture"), "invalid_image_format", "not a PNG, JPEG, GIF or WebP"),
        (data_url(b""), "invalid_image_format", "not a PNG, JPEG, GIF or WebP"),
        (data_url(encoded("BMP")), "invalid_image_format", "not a PNG, JPEG, GIF or WebP"),
    ],
)
def test_image_urls_that_are_refused(url, code, says):
    with pytest.raises(shapes.BadRequest) as caught:
        openai_images.decoded_images(asked(with_images("look", url)))
    assert caught.value.code == code and says in caught.value.message
    assert caught.value.param == "messages[0].content[1].image_url.url"


def test_an_image_over_the_upload_limit_is_refused_before_and_after_decoding(settings):
    settings.AGENT_MAX_UPLOAD_BYTES = len(encoded("PNG")) - 1
    with pytest.raises(shapes.BadRequest) as caught:
        openai_images.decoded_images(asked(with_images("look", PNG)))
    assert caught.value.code == "image_too_large" and f"{settings.AGENT_MAX_UPLOAD_BYTES}-byte" in caught.value.message
    settings.AGENT_MAX_UPLOAD_BYTES = 100
    huge = "data:image/png;base64," + "A" * 10_000_000  # refused by its length: never decoded
    with pytest.raises(shapes.BadRequest) as caught:
        openai_images.decoded_images(asked(with_images("look", huge)))
    assert caught.value.code == "image_too_large"


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")  # Pillow's own, before ours
def test_a_decompression_bomb_and_too_many_images_are_refused():
    out = io.BytesIO()
    Image.new("1", (10_000, 10_000)).save(out, "PNG")
    bomb = data_url(out.getvalue())
    with pytest.raises(shapes.BadRequest) as caught:
        openai_images.decoded_images(asked(with_images("look", bomb)))
    assert caught.value.code == "image_too_large" and "10000x10000 pixels" in caught.value.message
    many = [data_url(encoded("PNG", size=(n + 1, 1))) for n in range(uploads.MAX_ATTACHMENTS + 1)]
    with pytest.raises(shapes.BadRequest) as caught:
        openai_images.decoded_images(asked(with_images("look", *many[:-1], many[0]), with_images("more", many[-1])))
    assert caught.value.code == "too_many_images" and str(uploads.MAX_ATTACHMENTS) in caught.value.message
    # as many as a message may attach pass
    assert len(openai_images.decoded_images(asked(with_images("look", *many[:-1])))) == uploads.MAX_ATTACHMENTS


def test_earlier_images_are_recorded_as_attachments_and_shown_by_the_memory():
    call = asked(with_images("first", PNG, PNG), {"role": "assistant", "content": "ok"}, with_images("now?", GIF))
    attached = {
        PNG: {"path": "image-1.png", "size": 90, "image": {"format": "png", "width": 30, "height": 20}},
        GIF: {"path": "image-2.gif", "size": 80, "image": {"format": "gif", "width": 30, "height": 20}},
    }
    recorded = openai_images.recorded_history(call.history, attached)
    assert recorded == (
        {"role": "user", "content": "first", "attachments": [attached[PNG]]},  # the image sent twice, attached once
        {"role": "assistant", "content": "ok"},
    )
    assert openai_images.attachments_of(call.images, attached) == (attached[GIF],)
    event = {
        "type": "user_message",
        "content": "now?",
        "history": list(recorded),
        "attachments": [attached[GIF]],
        "runId": "r",
        "seq": 1,
    }
    first, answer, last = history.run_messages([event])
    note = "\n\n[Attached files in your workspace (read them with read_file): image-1.png (90 bytes)]"
    assert first == {"role": "user", "content": "first" + note, "images": [{"path": "image-1.png"}]}
    assert answer == {"role": "assistant", "content": "ok"}
    assert last["images"] == [{"path": "image-2.gif"}]


def _outcome(*frames):
    outcome = shapes.RunOutcome("r")
    for seq, frame in enumerate(frames, 1):
        outcome.add({**frame, "seq": seq, "runId": "r"})
    return outcome


USAGE = {"promptTokens": 3, "completionTokens": 4, "totalTokens": 7}


def test_the_answer_is_the_text_after_the_last_failed_attempt():
    outcome = _outcome(
        {"type": "user_message", "content": "q"},
        {"type": "thinking", "content": "hm"},
        {"type": "text", "content": "lost"},
        {"type": "error", "code": "LLM_CALL_FAILED", "message": "x", "detail": ""},
        {"type": "text", "content": "kept"},
        {"type": "complete", "status": "succeeded", "usage": USAGE},
    )
    body = shapes.completion(outcome, completion_id="c", model="default", created=1)
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "kept", "reasoning_content": "hm"}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    assert outcome.failure() is None


def test_the_iteration_limit_is_length_and_a_failed_model_call_502():
    stopped = _outcome(
        {"type": "error", "code": "MAX_ITERATIONS", "message": "x", "detail": ""},
        {"type": "complete", "status": "failed", "usage": USAGE},
    )
    assert stopped.finish_reason == "length" and stopped.failure() is None
    failed = _outcome(
        {"type": "error", "code": "LLM_CALL_FAILED", "message": "boom", "detail": ""},
        {"type": "complete", "status": "failed", "usage": USAGE},
    )
    assert failed.failure() == (502, "model_call_failed", "boom")
    other = shapes.RunOutcome("r")
    other.add({"type": "text", "content": "not mine", "runId": "s", "seq": 1})
    assert other.answer.text == ""


def test_chunks_are_openai_chunks_and_the_usage_chunk_has_no_choices():
    line = shapes.chunk(completion_id="c", model="m", created=1, delta={"content": "x"})
    assert line.startswith(b"data: ") and line.endswith(b"\n\n")
    body = orjson.loads(line[6:])
    assert body["object"] == "chat.completion.chunk" and body["choices"][0]["delta"] == {"content": "x"}
    usage = orjson.loads(shapes.chunk(completion_id="c", model="m", created=1, usage={"total_tokens": 1})[6:])
    assert usage["choices"] == [] and usage["usage"] == {"total_tokens": 1}


def test_an_api_run_is_unattended_and_its_approvals_denied_at_once():
    config = profiles.default_config()
    assert not profiles.for_source(config, source="").unattended
    assert profiles.for_source(config, source=API_SOURCE).unattended

    async def decide():
        return Unattended().expect(["call_0"])["call_0"].result()

    # A loop of its own, in a thread of its own: the browser tests (Playwright's sync API) leave a
    # loop running in the main thread, where asyncio.run() refuses to start.
    with ThreadPoolExecutor(max_workers=1) as thread:
        assert thread.submit(asyncio.run, decide()).result().decision == DENIED
