"""The composer in a real browser (issue 47): it never blocks (an answer streams while the user
writes the next message, which then waits its turn; Escape stops it), files alone are a message, an image attached for an
agent that cannot see it is said beforehand, a suggestion is sent, and on a phone the composer
keeps to a third of the screen with nothing overlapping and no line broken word by word, in
every state: at rest, typing long text, a file attached, streaming, an error, offline."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from playwright.sync_api import expect

from tests.e2e.harness import answer_text, slow_text_reply
from tests.fakellm import text_reply
from tests.ui.conftest import ROOT, SCREENSHOTS
from tests.ui.test_images import png
from tests.ui.test_timeline import assert_clean, last_turn, send, unique

pytestmark = pytest.mark.browser

SHOTS = SCREENSHOTS / "composer"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
LONG_TEXT = "\n".join(f"Line {i}: a long message that goes on and on about many things" for i in range(40))

# The boxes of the composer's parts that are shown, by name: {x, y, width, height}.
BOXES = """() => {
  const parts = {
    composer: "#composer", input: "#message-input", files: "#attachment-list", note: "#attach-note",
    reason: "#composer-reason", attach: ".attach-btn", picker: "#agent-pick", stop: "#stop-button",
    steer: "#steer-button", send: "#send-button", notice: "#notice", gauge: "#context-gauge",
  };
  const out = {};
  for (const [name, selector] of Object.entries(parts)) {
    const el = document.querySelector(selector);
    if (!el || !el.checkVisibility()) continue;
    const r = el.getBoundingClientRect();
    const style = getComputedStyle(el);
    out[name] = {x: r.x, y: r.y, width: r.width, height: r.height,
                 lines: Math.round((r.height - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom))
                                   / (parseFloat(style.lineHeight) || parseFloat(style.fontSize) * 1.2))};
  }
  out.viewport = {width: innerWidth, height: innerHeight};
  return out;
}"""


def overlap(a: dict, b: dict) -> bool:
    return (
        a["x"] < b["x"] + b["width"] - 0.5
        and b["x"] < a["x"] + a["width"] - 0.5
        and (a["y"] < b["y"] + b["height"] - 0.5 and b["y"] < a["y"] + a["height"] - 0.5)
    )


def check_layout(page, state: str) -> dict:
    """Nothing of the composer overlaps, nothing leaves the screen, the composer keeps to a third
    of its height, and its lines of text are lines, not a word each."""
    boxes = page.evaluate(BOXES)
    viewport = boxes.pop("viewport")
    where = f"{state} at {viewport['width']}x{viewport['height']}: {boxes}"
    composer = boxes["composer"]
    assert composer["height"] <= viewport["height"] / 3, where
    assert composer["x"] >= 0 and composer["x"] + composer["width"] <= viewport["width"], where
    # The bar's controls and the picker side by side, none over another.
    bar = [name for name in ("attach", "picker", "gauge", "stop", "steer", "send") if name in boxes]
    for i, first in enumerate(bar):
        for second in bar[i + 1 :]:
            assert not overlap(boxes[first], boxes[second]), f"{first} overlaps {second}: {where}"
        box = boxes[first]
        assert box["x"] >= composer["x"] and box["x"] + box["width"] <= composer["x"] + composer["width"], where
    # The lines of text above the bar: over none of it, within the composer.
    for line in ("reason", "note", "files", "input"):
        if line in boxes:
            for control in bar:
                assert not overlap(boxes[line], boxes[control]), f"{line} overlaps {control}: {where}"
    for line in ("reason", "note"):
        if line in boxes:
            assert boxes[line]["lines"] <= 2, f"{line} wraps over {boxes[line]['lines']} lines: {where}"
            assert boxes[line]["width"] >= 0.6 * composer["width"], where
    if "notice" in boxes:
        assert not overlap(boxes["notice"], composer), where
    return boxes


def shoot(page, state: str) -> None:
    """The state at 390x844 (where it was brought about) and 1280x800: checked, and a screenshot of each."""
    size = page.viewport_size
    for name, viewport in (("phone", PHONE), ("desktop", DESKTOP)):
        page.set_viewport_size(viewport)
        page.evaluate("() => document.getElementById('message-input').dispatchEvent(new Event('input'))")
        check_layout(page, state)
        page.screenshot(path=str(SHOTS / f"{state}-{name}.png"), animations="disabled")
    page.set_viewport_size(size)


def with_agents(page, env, llm) -> None:
    """Two more agents for this user (tests/ui/seed_profiles.py): the picker shows."""
    subprocess.run(
        [sys.executable, "-m", "tests.ui.seed_profiles", page.username, llm.base_url, llm.base_url],
        cwd=ROOT, env=env, check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    page.reload()
    expect(page.locator("#agent-pick")).to_be_visible()


def attach(page, name: str, data: bytes, mime: str = "text/plain") -> None:
    page.locator("#attach-input").set_input_files({"name": name, "mimeType": mime, "buffer": data})
    expect(page.locator("#attachment-list .chip", has_text=name)).to_have_attribute("data-status", "ready")


def focused_id(page) -> str:
    return page.evaluate("document.activeElement && document.activeElement.id")


def slow_answer(replies, message: str) -> str:
    """An answer that streams for about 15 s: long enough to be stopped."""
    return replies.set(message, slow_text_reply(answer_text(300), chunks=300, delay=0.05))


def test_the_composer_stays_open_while_an_answer_streams_and_escape_stops_it(user_page, replies):
    page = user_page
    first = slow_answer(replies, unique("Tell a long story"))
    send(page, first)
    expect(last_turn(page).locator(".answer")).to_contain_text("w001")
    composer = page.get_by_role("textbox", name="Message")
    # Streaming: the box is open and keeps the focus; what is typed stays.
    expect(composer).to_be_editable()
    assert focused_id(page) == "message-input"
    page.keyboard.type("My next question")
    expect(composer).to_have_value("My next question")
    send_button = page.get_by_role("button", name="Send")
    # What is sent now waits for the answer (tests/ui/test_queue.py follows it).
    expect(send_button).to_be_enabled()
    expect(send_button).to_have_attribute("title", "Waits for the answer in progress, then starts")
    expect(page.locator("#composer-reason")).to_have_text(
        "Enter queues your message for after this answer; Steer (Ctrl+Enter) hands it over now."
    )
    expect(page.locator("#composer")).to_have_attribute("data-blocked", "false")
    expect(page.get_by_role("button", name="Stop")).to_be_visible()

    # Escape in the open export menu closes the menu, not the run.
    page.locator("#export-toggle").click()
    expect(page.locator("#export-menu")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#export-menu")).to_be_hidden()
    expect(page.locator("#stop-button")).to_be_visible()
    # Nor with a dialog open.
    page.locator("#export-toggle").click()
    page.locator("#share-open").click()
    expect(page.locator("dialog[open]")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("dialog[open]")).to_have_count(0)
    expect(page.locator("#stop-button")).to_be_visible()

    # From the message box, Escape stops the run; the text typed meanwhile is still there.
    composer.focus()
    page.keyboard.press("Escape")
    turn = last_turn(page)
    expect(turn.locator(".turn-status")).to_have_text("Stopped.")
    expect(page.locator("#stop-button")).to_be_hidden()
    expect(composer).to_have_value("My next question")
    assert focused_id(page) == "message-input"
    expect(send_button).to_be_enabled()
    expect(send_button).not_to_have_attribute("title", "Waits for the answer in progress, then starts")

    # And it is sent as any message.
    replies.set("My next question", text_reply("The next answer."))
    page.keyboard.press("Enter")
    expect(last_turn(page).locator(".answer")).to_have_text("The next answer.")
    expect(composer).to_have_value("")
    assert_clean(page)


def test_escape_on_the_page_stops_the_run(user_page, replies):
    page = user_page
    send(page, slow_answer(replies, unique("Another long story")))
    expect(last_turn(page).locator(".answer")).to_contain_text("w001")
    page.evaluate("document.activeElement.blur()")
    assert focused_id(page) == ""  # the page itself (body)
    page.keyboard.press("Escape")
    expect(last_turn(page).locator(".turn-status")).to_have_text("Stopped.")
    assert_clean(page)


def test_a_file_alone_is_a_message(user_page):
    page = user_page
    send_button = page.get_by_role("button", name="Send")
    expect(send_button).to_be_disabled()
    attach(page, "notes.txt", b"buy milk")
    expect(page.get_by_role("textbox", name="Message")).to_have_value("")
    expect(send_button).to_be_enabled()  # no text, one file: a message
    send_button.click()
    turn = last_turn(page)
    expect(turn.locator(".msg-attachments .chip-name")).to_have_text("notes.txt")
    expect(turn.locator(".answer")).to_have_text("Hello from the fake model.")
    expect(page.locator("#attachment-list")).to_be_hidden()
    expect(send_button).to_be_disabled()
    expect(page.locator("#notice")).to_be_hidden()
    assert_clean(page)


def test_an_image_for_an_agent_that_cannot_see_it_is_said_before_sending(user_page, ui_env, fake_llm_server):
    page = user_page
    with_agents(page, ui_env, fake_llm_server)
    note = page.locator("#attach-note")
    attach(page, "notes.txt", b"not an image")
    expect(note).to_be_hidden()  # a file that is no image: nothing to say
    attach(page, "photo.png", png(64, 48, "teal"), "image/png")
    expect(note).to_have_text("Default does not accept images: it will get the file's name, not the picture.")
    page.locator("#agent-select").select_option(label="Researcher · research-1")  # accepts images
    expect(note).to_be_hidden()
    page.locator("#agent-select").select_option(label="Coder · code-1")
    expect(note).to_have_text("Coder does not accept images: it will get the file's name, not the picture.")
    page.locator("#attachment-list .chip", has_text="photo.png").get_by_role("button", name="Remove photo.png").click()
    expect(note).to_be_hidden()
    assert_clean(page)


def test_a_suggestion_is_sent_as_a_message(user_page, replies):
    page = user_page
    suggestion = page.locator("#empty-state .suggestion").first
    prompt = suggestion.inner_text()
    replies.set(prompt, text_reply("42 at once."))
    suggestion.click()
    turn = last_turn(page)
    expect(turn.locator(".msg-user .bubble")).to_have_text(prompt)
    expect(turn.locator(".answer")).to_have_text("42 at once.")
    expect(page.get_by_role("textbox", name="Message")).to_have_value("")
    assert focused_id(page) == "message-input"
    assert_clean(page)


def test_every_state_of_the_composer_fits_a_phone(user_page, ui_env, fake_llm_server, replies):
    """Rest, long text, files, an image the agent cannot see, streaming, an upload error, offline:
    at 1280x800 and 390x844 (tests/ui/test_composer.py's screenshots under artifacts/)."""
    page = user_page
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size(PHONE)  # used as on a phone; each state is seen on a desktop too
    with_agents(page, ui_env, fake_llm_server)
    page.locator("#agent-select").select_option(label="Researcher · research-1")
    shoot(page, "rest")

    composer = page.get_by_role("textbox", name="Message")
    composer.fill(LONG_TEXT)
    shoot(page, "typing-long-text")
    composer.fill("")

    attach(page, "quarterly-sales-figures-for-the-north-region.csv", b"region,amount\nnorth,10\n")
    attach(page, "notes.txt", b"buy milk")
    composer.fill("Summarise these files")
    shoot(page, "files-attached")
    page.locator("#agent-select").select_option(label="Coder · code-1")
    attach(page, "photo.png", png(64, 48, "teal"), "image/png")
    expect(page.locator("#attach-note")).to_be_visible()
    # One row of chips that scrolls sideways on a phone, the newest brought into view.
    expect(page.locator("#attachment-list .chip", has_text="photo.png")).to_be_in_viewport(ratio=0.98)
    shoot(page, "image-not-seen")
    while page.locator("#attachment-list .chip").count():
        page.locator("#attachment-list .chip-remove").first.click()
    expect(page.locator("#attachment-list")).to_be_hidden()

    send(page, slow_answer(replies, unique("Stream a long answer")))
    expect(last_turn(page).locator(".answer")).to_contain_text("w001")
    expect(page.locator("#composer-reason")).to_be_visible()
    composer.fill("A next question typed while the answer streams")
    shoot(page, "streaming")
    page.get_by_role("button", name="Stop").click()
    expect(last_turn(page).locator(".turn-status")).to_have_text("Stopped.")

    # An upload the server refuses: the chip says so, the notice says why.
    page.route(
        re.compile(r".*/api/conversations/[^/]+/files/$"),
        lambda route: (
            route.fulfill(
                status=413,
                content_type="application/json",
                body=json.dumps({"error": "too_large", "message": "The file is larger than the upload limit."}),
            )
            if route.request.method == "POST"
            else route.continue_()
        ),
    )
    page.locator("#attach-input").set_input_files(
        {"name": "huge.bin", "mimeType": "application/octet-stream", "buffer": b"x"}
    )
    expect(page.locator("#attachment-list .chip")).to_have_attribute("data-status", "failed")
    expect(page.locator("#notice")).to_be_visible()
    shoot(page, "error")
    page.unroute(re.compile(r".*/api/conversations/[^/]+/files/$"))
    page.locator("#attachment-list .chip-remove").click()
    page.locator("#notice-close").click()

    # Offline: the socket cannot open; the reason says when the message can go.
    page.route_web_socket(re.compile(r".*/ws/chat/.*"), lambda ws: ws.close())
    page.reload()
    expect(page.locator("#composer-reason")).to_contain_text("Not connected")
    composer.fill("Written while offline")
    shoot(page, "offline")
    page.watch.console_errors.clear()  # the browser reports the refused sockets
    assert_clean(page)
