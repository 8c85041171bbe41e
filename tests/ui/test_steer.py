"""Steering in a real browser (docs/protocol.md, "Steering"): during an answer, Steer (or
Ctrl+Enter) hands a note to the running agent; it shows in the running turn as a chip, withdrawable,
until the agent reads it before its next step, and the model's next request holds it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.fakellm import text_reply, tool_call_reply
from tests.ui.test_composer import shoot, slow_answer
from tests.ui.test_timeline import assert_clean, last_turn, send, unique

pytestmark = pytest.mark.browser


def test_a_steer_is_read_by_the_running_agent_at_its_next_step(user_page, replies):
    page = user_page
    # A slow first model call (a tool call, a second per chunk): the note comes while it runs.
    asked = replies.set(unique("Add these up"), tool_call_reply(("calculator", {"expression": "2+3"}), delay=1.0))
    note = replies.set(unique("Say it in words"), text_reply("Five."))
    send(page, asked)
    steer_button = page.get_by_role("button", name="Steer")
    expect(steer_button).to_be_visible()
    expect(steer_button).to_be_disabled()  # nothing typed yet
    page.fill("#message-input", note)
    expect(steer_button).to_be_enabled()
    page.press("#message-input", "Control+Enter")
    expect(page.locator("#message-input")).to_have_value("")
    item = last_turn(page).locator(".tl-steer")
    expect(item).to_have_count(1)
    expect(item.locator(".steer-chip")).to_contain_text(note)
    expect(item).to_have_class(re.compile(r"\bis-pending\b"))
    shoot(page, "steer-pending")

    # Read before the second model call: the turn says so, and answers it.
    expect(item).to_have_class(re.compile(r"\bis-applied\b"), timeout=15000)
    expect(item.locator(".steer-text")).to_have_text(note)
    expect(last_turn(page).locator(".answer")).to_have_text("Five.")
    expect(page.locator("article.turn")).to_have_count(1)  # the same turn, not a new one
    expect(page.locator("#queue-row")).to_be_hidden()
    expect(steer_button).to_be_hidden()

    # A reload draws it the same from the log.
    page.reload()
    last_turn(page).locator(".timeline-summary").click()
    expect(last_turn(page).locator(".tl-steer.is-applied .steer-text")).to_have_text(note)
    assert_clean(page)


def test_a_steer_can_be_withdrawn_and_one_too_late_becomes_the_next_message(user_page, replies):
    page = user_page
    send(page, slow_answer(replies, unique("Tell a long story")))
    expect(last_turn(page).locator(".answer")).to_contain_text("w001")
    dropped = unique("Forget this")
    page.fill("#message-input", dropped)
    page.get_by_role("button", name="Steer").click()
    chip = last_turn(page).locator(".tl-steer.is-pending")
    expect(chip).to_have_count(1)
    page.get_by_role("button", name=f"Withdraw: {dropped}").click()
    expect(last_turn(page).locator(".tl-steer.is-withdrawn")).to_have_count(1)

    # The story is one model call: a note sent during it is read by no later call of that run,
    # and becomes the next message, which starts once the answer ends (here: is stopped).
    late = replies.set(unique("Shorter please"), text_reply("The short version."))
    page.fill("#message-input", late)
    page.press("#message-input", "Control+Enter")
    expect(last_turn(page).locator(".tl-steer.is-pending")).to_have_count(1)
    page.get_by_role("button", name="Stop", exact=True).click()
    expect(page.locator("article.turn")).to_have_count(2)
    expect(last_turn(page).locator(".msg-user .bubble")).to_have_text(late)
    expect(last_turn(page).locator(".answer")).to_have_text("The short version.")
    first = page.locator("article.turn").first
    first.locator(".timeline-summary").click()
    expect(first.locator(".tl-steer.is-waiting")).to_have_count(1)
    assert_clean(page)
