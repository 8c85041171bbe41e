"""The bell in a real browser (docs/protocol.md, "Notifications"): a run that ends after its page
left the conversation rings the bell live (the unread count on the button); the list shows it;
a click opens the conversation and marks it read; axe finds nothing serious with the list open."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.e2e.harness import slow_text_reply
from tests.ui.axe import audit
from tests.ui.test_timeline import assert_clean, conversation_id, send

pytestmark = pytest.mark.browser


def test_the_bell_counts_lists_and_opens(user_page, replies, shot):
    page = user_page
    badge = page.locator("#bell-count")
    expect(page.locator("#bell-toggle")).to_have_attribute("aria-label", "Notifications")
    expect(badge).to_be_hidden()
    message = replies.set("Tell me later", slow_text_reply("Here is what you asked for, later.", chunks=30, delay=0.1))
    send(page, message)
    asked = conversation_id(page)
    page.locator("article.turn").last.wait_for()
    page.click("#new-chat")  # the page leaves the conversation while its run works: nobody watches it
    expect(badge).to_have_text("1", timeout=20000)
    expect(page.locator("#bell-toggle")).to_have_attribute("aria-label", "Notifications, 1 unread")
    page.click("#bell-toggle")
    item = page.locator("#bell-list .bell-item")
    expect(item).to_have_count(1)
    expect(item).to_have_attribute("data-read", "false")
    expect(item.locator(".menu-note")).to_have_text("Here is what you asked for, later.")
    expect(page.locator("#bell-empty")).to_be_hidden()
    shot(page, "bell-open")
    audit(page, "bell-open")
    item.click()
    page.wait_for_url(f"**/?c={asked}")
    expect(badge).to_be_hidden()
    expect(page.locator("#bell-panel")).to_be_hidden()
    page.click("#bell-toggle")
    expect(page.locator("#bell-list .bell-item")).to_have_attribute("data-read", "true")
    page.keyboard.press("Escape")
    expect(page.locator("#bell-panel")).to_be_hidden()
    assert_clean(page)
