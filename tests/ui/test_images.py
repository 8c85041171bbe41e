"""Images in the chat page, in Chromium on the offline demo model (docs/protocol.md, "Images"):
chosen, pasted and dropped images get thumbnails in the composer and in the timeline, and the
demo model answers with the size it was sent; axe on the page with thumbnails."""

from __future__ import annotations

import base64
import io
import subprocess
import sys

import pytest
from PIL import Image
from playwright.sync_api import expect

from tests.e2e.harness import ROOT, Server, migrate, server_env
from tests.ui.axe import audit
from tests.ui.conftest import SCREENSHOTS, PageWatch, sign_up
from tests.ui.test_files import demo_page  # noqa: F401 (a fixture)
from tests.ui.test_timeline import assert_clean

pytestmark = pytest.mark.browser

SHOTS = SCREENSHOTS / "images"  # playwright makes the folder


def png(width: int, height: int, colour: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, "PNG")
    return out.getvalue()


def loaded(image) -> None:
    """The thumbnail really arrived and decoded (a broken image has naturalWidth 0)."""
    expect(image).to_be_visible()
    image.evaluate("(img) => img.decode()")
    assert image.evaluate("(img) => img.naturalWidth") > 0


def give(page, how: str, name: str, data: bytes) -> None:
    """A file pasted into the message box or dropped onto the composer, as the browser hands them over."""
    target, event = (
        ("message-input", "ClipboardEvent('paste', {clipboardData: data,")
        if how == "paste"
        else ("composer", "DragEvent('drop', {dataTransfer: data,")
    )
    page.evaluate(
        f"""([name, b64]) => {{
        const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
        const data = new DataTransfer();
        data.items.add(new File([bytes], name, {{ type: "image/png" }}));
        document.getElementById("{target}").dispatchEvent(new {event} bubbles: true, cancelable: true }}));
    }}""",
        [name, base64.b64encode(data).decode()],
    )


def test_choose_paste_and_drop_images_see_thumbnails_and_the_demos_answer(demo_page):
    page = demo_page
    page.set_viewport_size({"width": 1280, "height": 800})
    page.set_input_files(
        "#attach-input", files=[{"name": "wide.png", "mimeType": "image/png", "buffer": png(4000, 1000, "teal")}]
    )
    chip = page.locator("#attachment-list .chip")
    expect(chip).to_have_attribute("data-status", "ready")
    loaded(chip.locator("img.thumb"))
    expect(chip.locator("img.thumb")).to_have_attribute("alt", "Image: wide.png")
    # a text file named .png gets no thumbnail: the server knows images by their content
    page.set_input_files(
        "#attach-input", files=[{"name": "fake.png", "mimeType": "image/png", "buffer": b"not a picture"}]
    )
    expect(chip.nth(1)).to_have_attribute("data-status", "ready")
    expect(chip.nth(1).locator("img")).to_have_count(0)
    page.fill("#message-input", "How big is it?")
    page.screenshot(path=f"{SHOTS}/composer-1280.png", animations="disabled")
    page.press("#message-input", "Enter")

    turn = page.locator("article.turn").last
    expect(turn.locator(".answer")).to_contain_text("1568 × 392 pixels", timeout=20000)
    loaded(turn.locator(".msg-attachments img.thumb"))
    expect(turn.locator(".msg-attachments .chip")).to_have_count(2)
    expect(turn.locator(".msg-attachments img.thumb")).to_have_count(1)
    page.screenshot(path=f"{SHOTS}/answered-1280-light.png", animations="disabled")
    audit(page, "chat page with image thumbnails")

    # pasted and dropped images are uploaded like chosen ones
    give(page, "paste", "pasted.png", png(300, 600, "orange"))
    give(page, "drop", "dropped.png", png(50, 40, "purple"))
    chips = page.locator("#attachment-list .chip")
    expect(chips).to_have_count(2)
    for index in range(2):
        expect(chips.nth(index)).to_have_attribute("data-status", "ready")
        loaded(chips.nth(index).locator("img.thumb"))
    page.fill("#message-input", "And these?")
    page.press("#message-input", "Enter")
    turn = page.locator("article.turn").last
    expect(turn.locator(".answer")).to_contain_text("2 images: 300 × 600 pixels; 50 × 40 pixels", timeout=20000)
    expect(turn.locator(".msg-attachments img.thumb")).to_have_count(2)

    # after a reload the thumbnails come from the stored events
    page.reload()
    expect(page.locator("article.turn .msg-attachments img.thumb")).to_have_count(3)
    loaded(page.locator("article.turn .msg-attachments img.thumb").first)
    page.locator("article.turn").first.scroll_into_view_if_needed()
    page.emulate_media(color_scheme="dark")
    page.screenshot(path=f"{SHOTS}/answered-1280-dark.png", animations="disabled")
    audit(page, "chat page with image thumbnails, dark")
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=f"{SHOTS}/answered-390-dark.png", animations="disabled")
    page.emulate_media(color_scheme="light")
    page.screenshot(path=f"{SHOTS}/answered-390-light.png", animations="disabled")
    audit(page, "chat page with image thumbnails, narrow")
    assert_clean(page)


@pytest.fixture(scope="module")
def traced(ui_tmp):
    """The demo model with AGENT_TRACE_REQUESTS on: the inspector keeps what each model call was sent."""
    env = server_env(
        database_url=f"sqlite:///{ui_tmp / 'traced.sqlite3'}",
        llm_base_url="http://127.0.0.1:9/unused",
        AGENT_MODEL="demo",
        AGENT_DEMO_CHUNK_DELAY="0",
        AGENT_TRACE_REQUESTS="true",
        AGENT_WORKSPACE_ROOT=str(ui_tmp / "traced-workspaces"),
    )
    migrate(env)
    server = Server(env, log_dir=ui_tmp, name="daphne-traced").start()
    yield server, env
    server.stop()


def test_the_inspector_shows_the_image_sent_as_a_thumbnail(traced, new_context):
    server, env = traced
    page = new_context(base_url=server.base, viewport={"width": 1280, "height": 800}).new_page()
    page.watch = PageWatch(page, server.base)
    username = sign_up(page)
    page.set_input_files(
        "#attach-input", files=[{"name": "tall.png", "mimeType": "image/png", "buffer": png(600, 1200, "navy")}]
    )
    expect(page.locator("#attachment-list .chip")).to_have_attribute("data-status", "ready")
    # The upload opened the conversation: its socket must be live before Enter sends anything.
    expect(page.locator("#connection-status")).to_have_attribute("data-mode", "live")
    page.fill("#message-input", "Size?")
    page.press("#message-input", "Enter")
    expect(page.locator("article.turn .answer")).to_contain_text("600 × 1200 pixels", timeout=20000)
    staff = (
        f"from django.contrib.auth.models import User; User.objects.filter(username={username!r}).update(is_staff=True)"
    )
    subprocess.run([sys.executable, "manage.py", "shell", "-c", staff], cwd=ROOT, env=env, check=True, timeout=120)
    page.goto("/inspect/")
    page.locator("tr.run-row a").first.click()
    page.locator("details.request-messages summary").first.click()
    thumb = page.locator(".sent-images img").first
    loaded(thumb)
    assert thumb.evaluate("(img) => img.naturalWidth") == 80  # 160 high at most: a thumbnail, 1:2 kept
    expect(page.locator(".sent-images li").first).to_contain_text("tall.png, sent as 600×1200")
    request = page.locator("details.request-messages pre.payload").first.inner_text()
    assert "base64" not in request and "elided" in request
    page.locator(".sent-images").first.scroll_into_view_if_needed()
    page.screenshot(path=f"{SHOTS}/inspector-1280.png", animations="disabled")
    audit(page, "run page with a sent image")
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=f"{SHOTS}/inspector-390.png", animations="disabled")
