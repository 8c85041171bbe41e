"""Queued messages in a real browser (docs/protocol.md, "Queued messages"): a message sent while
an answer streams waits as a chip above the box, may be withdrawn, survives a reload, and starts
the next turn once the answer ends; Stop with the queue cleared starts nothing after it."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.fakellm import text_reply
from tests.ui.test_composer import shoot, slow_answer
from tests.ui.test_shares import make_link, open_share_dialog
from tests.ui.test_timeline import assert_clean, last_turn, send, unique

pytestmark = pytest.mark.browser


def queue(page, message: str) -> None:
    page.fill("#message-input", message)
    expect(page.locator("#send-button")).to_be_enabled()
    page.press("#message-input", "Enter")
    expect(page.locator("#message-input")).to_have_value("")


def test_a_message_sent_during_an_answer_waits_then_starts_the_next_turn(user_page, replies):
    page = user_page
    send(page, slow_answer(replies, unique("Tell a long story")))
    expect(last_turn(page).locator(".answer")).to_contain_text("w001")
    later = unique("Then this")
    replies.set(later, text_reply("The queued answer."))
    queue(page, later)
    chips = page.locator("#queue-list .queued-chip")
    expect(chips).to_have_count(1)
    expect(chips.first).to_contain_text(later)
    withdrawn = unique("Never mind")
    queue(page, withdrawn)
    expect(chips).to_have_count(2)
    expect(page.get_by_role("button", name="Stop and clear the queue")).to_be_visible()
    shoot(page, "queued")
    page.get_by_role("button", name=f"Withdraw: {withdrawn}").click()
    expect(chips).to_have_count(1)

    # A reload while it waits: the chip comes back from the log.
    page.reload()
    expect(chips).to_have_count(1)
    expect(chips.first).to_contain_text(later)
    expect(page.locator("article.turn")).to_have_count(1)

    # Stop ends the answer only: the waiting message then starts, as the next turn.
    page.get_by_role("button", name="Stop", exact=True).click()
    expect(page.locator("article.turn")).to_have_count(2)
    expect(last_turn(page).locator(".msg-user .bubble")).to_have_text(later)
    expect(last_turn(page).locator(".answer")).to_have_text("The queued answer.")
    expect(page.locator("#queue-row")).to_be_hidden()

    # A shared snapshot keeps its branch's turns: the queue's events (runId null) are none of them.
    open_share_dialog(page)
    url = make_link(page)
    page.keyboard.press("Escape")
    shared = page.context.new_page()
    shared.goto(url)
    expect(shared.locator("article.turn")).to_have_count(2)
    expect(shared.locator("article.turn").last.locator(".msg-user .bubble")).to_have_text(later)
    shared.close()
    assert_clean(page)


def test_stop_and_clear_the_queue_starts_nothing_after_the_answer(user_page, replies):
    page = user_page
    send(page, slow_answer(replies, unique("Another long story")))
    expect(last_turn(page).locator(".answer")).to_contain_text("w001")
    queue(page, unique("Not after all"))
    expect(page.locator("#queue-list .queued-chip")).to_have_count(1)
    page.get_by_role("button", name="Stop and clear the queue").click()
    expect(last_turn(page).locator(".turn-status")).to_have_text("Stopped.")
    expect(page.locator("#queue-row")).to_be_hidden()
    page.wait_for_timeout(1000)  # what a started run would have shown by now
    expect(page.locator("article.turn")).to_have_count(1)
    assert_clean(page)
