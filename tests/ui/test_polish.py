"""The timeline's finer points in a real browser: recovered runs, Stop, plain answers, interrupted
runs, empty conversations, feedback, the demo model's banner and suggestions, and the rename
field's row."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.harness import answer_text, slow_text_reply
from tests.fakellm import text_reply
from tests.ui.conftest import PageWatch, sign_up
from tests.ui.seed_interrupted import OLD_WORKER
from tests.ui.test_timeline import assert_clean, conversation_id, last_turn, send, unique

pytestmark = pytest.mark.browser

FAILING = {"status": 500, "body": {"error": {"message": "upstream overloaded"}}}


def visible_text_count(locator, text: str) -> int:
    """How often `text` is on screen inside `locator` (hidden elements left out)."""
    return locator.evaluate(
        """(root, text) => {
          let n = 0;
          const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
          while (walker.nextNode()) {
            const node = walker.currentNode;
            if (node.parentElement.checkVisibility() && node.data.includes(text)) n += 1;
          }
          return n;
        }""",
        text,
    )


def test_a_run_that_recovered_reads_as_recovered_and_its_discarded_text_leaves_the_answer(user_page, replies, shot):
    page = user_page
    message = unique("Flaky then fine")
    broken_stream = {
        "chunks": [{"delta": {"content": piece}} for piece in ("Partial ", "words ", "of a ", "dying stream")],
        "truncate_after": 4,
    }
    # A later message of the conversation, whose attempts are read as they come: a first
    # message's request may go out while its start is stored (chat/runtime/head_start.py), and
    # an attempt that dies before the start is stored is never read, so nothing is discarded.
    earlier = unique("Hello first")
    replies.set(earlier, text_reply("Hello."))
    send(page, earlier)
    expect(last_turn(page).locator(".answer")).to_have_text("Hello.", timeout=15000)
    replies.set(message, broken_stream, FAILING, text_reply("The full answer.", piece=5))
    send(page, message)
    turn = last_turn(page)
    expect(turn.locator(".answer")).to_have_text("The full answer.", timeout=15000)
    expect(turn).not_to_have_class(re.compile("is-running"))
    timeline = turn.locator("details.timeline")
    expect(timeline.locator(".tl-label")).to_have_text("Recovered after 2 retries")
    expect(timeline).to_have_attribute("data-state", "recovered")
    expect(timeline.locator("summary .status-icon")).to_have_class(re.compile(r"\bwarn\b"))
    expect(timeline.locator(".tl-counts")).to_have_text("")  # the label said the retries: said once
    retries = turn.locator("li.tl-error")
    expect(retries).to_have_count(2)
    expect(turn.locator("li.tl-error.is-warning .status-icon.warn")).to_have_count(2)
    expect(turn.locator(".status-icon.error")).to_have_count(0)  # no red anywhere
    for index in range(2):
        item = retries.nth(index)
        expect(item.locator(".badge")).to_have_text(f"retry {index + 1} of 3")
        assert "/3)" not in item.locator(".tl-title").inner_text()  # the count is said once
    discarded = retries.first.locator("details.discarded")
    expect(discarded.locator("summary")).to_have_text("Discarded partial answer")
    discarded.locator("summary").click()
    expect(discarded.locator(".discarded-text")).to_have_text("Partial words of a dying stream")
    expect(turn.locator(".turn-status")).to_be_hidden()
    shot(page, "20-recovered-after-retries")
    page.reload()  # the same from the stored log
    turn = last_turn(page)
    expect(turn.locator(".answer")).to_have_text("The full answer.")
    expect(turn.locator(".tl-label")).to_have_text("Recovered after 2 retries")
    assert_clean(page)


def test_stopped_is_said_once_and_a_plain_answer_has_no_empty_box(user_page, replies, shot):
    page = user_page
    message = unique("A long plain story")
    replies.set(message, slow_text_reply(answer_text(300), chunks=300, delay=0.05))
    send(page, message)
    turn = last_turn(page)
    expect(turn.locator(".answer")).to_contain_text("w005", timeout=15000)
    timeline = turn.locator("details.timeline")
    # While a plain answer is written: a status line, with no chevron and nothing to unfold.
    expect(timeline.locator(".tl-label")).to_have_text("Writing the answer…")
    expect(timeline).to_have_class(re.compile(r"\bis-empty\b"))
    chevron = timeline.locator("summary").evaluate("(s) => getComputedStyle(s, '::after').display")
    assert chevron == "none"
    assert timeline.locator("li").count() == 0
    shot(page, "21-plain-answer-streaming")
    page.click("#stop-button")
    expect(turn.locator(".turn-status")).to_have_text("Stopped.", timeout=15000)
    expect(timeline).to_be_hidden()
    assert visible_text_count(turn, "Stopped") == 1
    assert visible_text_count(turn, "cancelled") == 0
    shot(page, "22-stopped-once")
    assert_clean(page)


def test_interrupted_runs_never_show_the_servers_channel_name(user_page, seed_interrupted, shot):
    page = user_page
    cid = seed_interrupted(page.username)
    page.goto(f"/?c={cid}")
    turns = page.locator("article.turn")
    expect(turns).to_have_count(3)
    closed, resumed, old = turns.nth(0), turns.nth(1), turns.nth(2)
    expect(closed.locator(".turn-status")).to_have_text("Interrupted: the server stopped during this run.")
    expect(closed.locator(".answer")).to_have_text("Half an answer")
    # The resumed run: its dead attempt's text is out of the answer, and the resume is a warning.
    expect(resumed.locator(".answer")).to_have_text("The answer after the resume.")
    expect(resumed.locator(".tl-label")).to_have_text("Recovered after 1 retry")
    expect(resumed.locator("li.tl-error.is-warning")).to_have_count(1)
    expect(old.locator(".answer")).to_have_text("Old half answer")
    for each in (closed, old):
        expect(each.locator("details.timeline")).to_have_attribute("open", "")
    body = page.locator("#turns").inner_text()
    assert "inmemory" not in body and OLD_WORKER not in body and "runs." not in body
    assert "DeadWorker" not in page.locator("#turns").inner_html()
    shot(page, "23-interrupted-runs")
    assert_clean(page)


def test_an_empty_conversation_opened_by_its_address_shows_the_empty_state(user_page, replies, shot):
    page = user_page
    created = page.evaluate(
        """async () => {
          const token = document.querySelector('meta[name="csrf-token"]').content;
          const response = await fetch("/api/conversations/", {method: "POST", body: "{}",
            headers: {"Content-Type": "application/json", "X-CSRFToken": token}});
          return (await response.json()).id;
        }"""
    )
    page.goto(f"/?c={created}")
    expect(page.locator("#empty-state")).to_be_visible()
    expect(page.locator("#loading-state")).to_be_hidden()
    shot(page, "24-empty-conversation")
    message = unique("First words in an empty conversation")
    replies.set(message, text_reply("Hello there.", piece=4))
    send(page, message)
    expect(page.locator("#empty-state")).to_be_hidden()
    expect(last_turn(page).locator(".answer")).to_have_text("Hello there.")
    assert conversation_id(page) == created
    assert_clean(page)


def test_thumbs_on_a_finished_answer_with_a_comment_kept_after_reload(user_page, replies, shot):
    page = user_page
    message = unique("Rate me")
    replies.set(message, slow_text_reply(answer_text(60), chunks=60, delay=0.05))
    send(page, message)
    turn = last_turn(page)
    feedback = turn.locator(".feedback")
    expect(turn.locator(".answer")).to_contain_text("w001", timeout=15000)
    assert turn.evaluate("(t) => t.classList.contains('is-running') && t.querySelector('.feedback').hidden")
    expect(turn).not_to_have_class(re.compile("is-running"), timeout=15000)
    up, down = feedback.get_by_role("button", name="Good answer"), feedback.get_by_role("button", name="Bad answer")
    expect(up).to_have_attribute("aria-pressed", "false")
    up.click()
    expect(up).to_have_attribute("aria-pressed", "true")
    comment = feedback.get_by_role("textbox", name="Comment on the answer")
    expect(comment).to_be_focused()
    comment.fill("Short and right.")
    feedback.get_by_role("button", name="Send").click()
    expect(feedback.locator(".feedback-note")).to_have_text("Thanks for the feedback.")
    shot(page, "25-feedback-given")
    page.reload()
    turn = last_turn(page)
    up = turn.get_by_role("button", name="Good answer")
    down = turn.get_by_role("button", name="Bad answer")
    expect(up).to_have_attribute("aria-pressed", "true")
    down.click()  # changed: down, the comment kept
    expect(down).to_have_attribute("aria-pressed", "true")
    expect(up).to_have_attribute("aria-pressed", "false")
    cid = conversation_id(page)
    stored = page.evaluate(f"fetch('/api/conversations/{cid}/feedback/').then((r) => r.json())")["feedback"]
    assert [(f["rating"], f["comment"]) for f in stored] == [(-1, "Short and right.")]
    shot(page, "26-feedback-changed")
    assert_clean(page)


def test_the_demo_banner_is_small_on_a_phone_and_can_be_dismissed(new_context, demo_server, shot):
    context = new_context(viewport={"width": 390, "height": 844}, has_touch=True, base_url=demo_server.base)
    page = context.new_page()
    page.watch = PageWatch(page, demo_server.base)
    sign_up(page)
    banner = page.locator("#demo-banner")
    expect(banner).to_be_visible()
    height = banner.bounding_box()["height"]
    assert height < 844 * 0.08, f"the banner takes {height}px of an 844px screen"
    shot(page, "27-demo-banner-phone")
    banner.locator("summary").click()  # the rest is a tap away
    expect(banner).to_contain_text("OPENAI_API_KEY")
    banner.get_by_role("button", name="Dismiss").click()
    expect(banner).to_have_count(0)
    page.reload()
    page.wait_for_selector("#message-input")
    expect(page.locator("#demo-banner")).to_have_count(0)
    shot(page, "28-demo-banner-dismissed")
    assert_clean(page)


def test_every_suggestion_and_every_hint_of_the_demo_gets_a_sensible_answer(new_context, demo_server, shot):
    context = new_context(base_url=demo_server.base)
    page = context.new_page()
    page.watch = PageWatch(page, demo_server.base)
    sign_up(page)
    expect(page.locator("#demo-banner details")).to_have_attribute("open", "")  # unfolded on a wide screen
    suggestions = page.locator("#empty-state [data-suggestion]")
    expect(suggestions).to_have_count(3)
    prompts = [suggestions.nth(i).get_attribute("data-suggestion") for i in range(3)]
    for index, prompt in enumerate(prompts):
        if index:
            page.click("#new-chat")
        page.locator(f"#empty-state [data-suggestion='{prompt}']").click()  # sent as it is
        turn = last_turn(page)
        expect(turn.locator(".msg-user .bubble")).to_have_text(prompt)
        expect(turn).not_to_have_class(re.compile("is-running"), timeout=20000)
        answer = turn.locator(".answer")
        expect(answer).not_to_contain_text("I am the offline demo model")  # never the fallback
        if "1234" in prompt:
            expect(answer).to_contain_text("7006652")
        elif "Shanghai" in prompt:
            expect(answer).to_contain_text("+08:00")
        else:
            expect(answer.locator("pre code")).to_contain_text("text[::-1]")
            expect(answer.locator("table td").first).to_be_visible()
        shot(page, f"29-demo-suggestion-{index + 1}")
    # The fallback's own hints: shown intact, and each one works.
    page.click("#new-chat")
    send(page, "Tell me a joke")
    turn = last_turn(page)
    expect(turn).not_to_have_class(re.compile("is-running"), timeout=20000)
    hints = turn.locator(".answer code")
    expect(hints.first).to_have_text("what is 6 * 7?")
    hint_texts = [hints.nth(i).inner_text() for i in range(2)]
    assert hint_texts[1].startswith("what time is it")
    shot(page, "30-demo-fallback-hints")
    for hint in hint_texts:
        page.click("#new-chat")
        send(page, hint)
        turn = last_turn(page)
        expect(turn).not_to_have_class(re.compile("is-running"), timeout=20000)
        expect(turn.locator("li.tl-tool")).to_have_count(1)
        expect(turn.locator(".answer")).to_contain_text("The tool says")
    expect(last_turn(page).locator(".answer")).to_contain_text("+09:00")  # Tokyo, as the hint says
    assert_clean(page)


# The visible element at the rename field's far end, inside it: the field, or what lies over it.
AT_THE_FIELDS_END = """(input) => {
  const r = input.getBoundingClientRect();
  const over = document.elementFromPoint(r.right - 6, r.top + r.height / 2);
  return over === input ? "the field" : over.outerHTML.slice(0, 120);
}"""


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800}, {"width": 390, "height": 844}])
def test_the_rename_field_has_its_row_to_itself(user_page, replies, viewport, shot):
    page = user_page
    message = unique("A conversation to rename")
    replies.set(message, text_reply("Renamed soon."))
    send(page, message)
    expect(last_turn(page).locator(".answer")).to_have_text("Renamed soon.")
    page.set_viewport_size(viewport)
    if viewport["width"] < 760:
        page.locator("#sidebar-toggle").click()
    row = page.locator("li.conv-item.active")
    row.locator("[data-action=menu]").click()
    page.locator("#conversation-menu").get_by_role("menuitem", name="Rename").click()
    field = page.get_by_role("textbox", name="New title")
    expect(field).to_be_focused()
    assert field.evaluate(AT_THE_FIELDS_END) == "the field"
    shot(page, f"31-rename-field-{viewport['width']}")
    field.fill("Renamed")
    field.press("Enter")
    expect(page.locator(".conv-item.active .conv-title")).to_have_text("Renamed")
    assert_clean(page)
