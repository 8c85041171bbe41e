"""Files in a real browser: the paperclip uploads into the conversation, a chip goes with the
message and stays on it after a reload, the demo model reads the CSV, the files panel lists,
downloads and deletes; a paste, and a refused upload shown on its chip."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.ui.conftest import SCREENSHOTS, PageWatch, sign_up
from tests.ui.test_timeline import assert_clean, conversation_id, send, unique

pytestmark = pytest.mark.browser

CSV = b"region,amount\nnorth,10\nsouth,32\n"


@pytest.fixture
def demo_page(new_context, demo_server):
    """A signed-up user's chat page on the offline demo model (its tools include read_file)."""
    page = new_context(base_url=demo_server.base).new_page()
    page.watch = PageWatch(page, demo_server.base)
    page.username = sign_up(page)
    return page


def save(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"files-{name}.png"), animations="disabled")


def test_paperclip_chip_message_answer_and_files_panel(demo_page):
    page = demo_page
    # A draft: attaching opens its conversation, so that the file has somewhere to go.
    page.set_input_files("#attach-input", files=[{"name": "sales.csv", "mimeType": "text/csv", "buffer": CSV}])
    chip = page.locator("#attachment-list .chip")
    expect(chip).to_have_count(1)
    expect(chip).to_have_attribute("data-status", "ready")
    expect(chip.locator(".chip-name")).to_have_text("sales.csv")
    expect(chip.locator(".chip-meta")).to_have_text("32 bytes")
    cid = conversation_id(page)
    page.fill("#message-input", "Summarise this table")
    save(page, "pending-chip")
    page.press("#message-input", "Enter")

    turn = page.locator("article.turn").last
    expect(page.locator("#attachment-list")).to_be_hidden()
    expect(turn.locator(".msg-attachments .chip-name")).to_have_text("sales.csv")
    expect(turn.locator(".answer")).to_contain_text("CSV with 2 columns: region, amount; 2 data rows", timeout=20000)
    expect(turn.locator(".tl-tool .tool-name")).to_have_text("read_file")
    # the bubble holds what the user typed; the note to the model is not shown as theirs
    expect(turn.locator(".bubble")).to_have_text("Summarise this table")
    save(page, "message-with-attachment")

    # After a reload the chip is drawn from the stored event, and it downloads the file.
    page.reload()
    turn = page.locator("article.turn").last
    link = turn.locator(".msg-attachments a.chip-name")
    expect(link).to_have_text("sales.csv")
    assert link.get_attribute("href") == f"/api/conversations/{cid}/files/sales.csv"
    with page.expect_download() as download:
        link.click()
    assert download.value.suggested_filename == "sales.csv"
    assert open(download.value.path(), "rb").read() == CSV

    # The files panel: the file, its size, download and delete.
    page.click("#files-toggle")
    rows = page.locator("#file-list .file-row")
    expect(rows).to_have_count(1)
    expect(rows.first.locator(".file-name")).to_have_text("sales.csv")
    expect(rows.first.locator(".file-size")).to_have_text("32 bytes")
    save(page, "files-panel")
    rows.first.locator(".file-delete").click()
    expect(page.locator("#confirm-title")).to_have_text("Delete file")
    page.locator("#confirm-dialog [value=confirm]").click()
    expect(rows).to_have_count(0)
    expect(page.locator(".files-empty")).to_be_visible()
    assert_clean(page)


def test_paste_and_a_refused_upload(user_page, replies, shot):
    page = user_page
    send(page, unique("hello"))
    expect(page.locator("article.turn .answer")).to_have_text("Hello from the fake model.")
    # A pasted file becomes a chip like a picked one.
    page.evaluate(
        """() => {
        const data = new DataTransfer();
        data.items.add(new File(["pasted text"], "clip.txt", { type: "text/plain" }));
        const input = document.getElementById("message-input");
        input.dispatchEvent(new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true }));
    }"""
    )
    chips = page.locator("#attachment-list .chip")
    expect(chips).to_have_count(1)
    expect(chips.first).to_have_attribute("data-status", "ready")
    # A file dropped onto the composer, likewise; while dragging, the composer shows it takes files.
    page.evaluate(
        """() => {
        const data = new DataTransfer();
        data.items.add(new File(["a,b\\n1,2\\n"], "dropped.csv", { type: "text/csv" }));
        const form = document.getElementById("composer");
        form.dispatchEvent(new DragEvent("dragenter", { dataTransfer: data, bubbles: true, cancelable: true }));
        window.dropping = form.classList.contains("is-dropping");
        form.dispatchEvent(new DragEvent("drop", { dataTransfer: data, bubbles: true, cancelable: true }));
    }"""
    )
    assert page.evaluate("window.dropping") is True
    expect(page.locator("#composer")).not_to_have_class(re.compile("is-dropping"))
    expect(chips).to_have_count(2)
    expect(chips.nth(1)).to_have_attribute("data-status", "ready")
    expect(chips.nth(1).locator(".chip-name")).to_have_text("dropped.csv")
    chips.nth(1).locator(".chip-remove").click()  # removed before sending: not attached
    expect(chips).to_have_count(1)
    # A hidden file's name is refused by the server: its chip says so and can be removed.
    page.set_input_files("#attach-input", files=[{"name": ".env", "mimeType": "text/plain", "buffer": b"KEY=1"}])
    expect(chips).to_have_count(2)
    failed = chips.nth(1)
    expect(failed).to_have_attribute("data-status", "failed")
    expect(page.locator("#notice-text")).to_contain_text("Could not upload .env")
    expect(page.locator("#notice-text")).to_contain_text("names starting with '.'")
    save(page, "refused-chip")
    # the browser logs the refused request itself; nothing else went wrong
    assert page.watch.console_errors == [
        "Failed to load resource: the server responded with a status of 400 (Bad Request)"
    ]
    page.watch.console_errors.clear()
    failed.locator(".chip-remove").click()
    expect(chips).to_have_count(1)

    message = unique("with a pasted file")
    replies.set(
        f"{message}\n\n[Attached files in your workspace (read them with read_file): clip.txt (11 bytes)]",
        {"chunks": [{"delta": {"content": "Got clip.txt."}}, {"delta": {}, "finish_reason": "stop"}]},
    )
    send(page, message)
    turn = page.locator("article.turn").last
    expect(turn.locator(".answer")).to_have_text("Got clip.txt.")
    expect(turn.locator(".msg-attachments .chip-name")).to_have_text("clip.txt")
    # On a phone: the chips and the file panel fit the width.
    page.set_viewport_size({"width": 390, "height": 800})
    page.click("#files-toggle")
    expect(page.locator("#file-list .file-row")).to_have_count(
        2
    )  # clip.txt, and the dropped file stays in the workspace
    box = page.locator("#files-panel").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390
    save(page, "phone-files-panel")
    assert_clean(page)
