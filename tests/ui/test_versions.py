"""Versions in a real browser: regenerate, switch versions without a reload, edit, continue an
older branch, copy an answer as Markdown, and a second tab that shows the same branches."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.fakellm import text_reply
from tests.ui.test_timeline import assert_clean, conversation_id, send, unique

pytestmark = pytest.mark.browser


def shown(page):
    return page.locator("article.turn:visible")


def expect_branch(page, rows: list[tuple[str, str, str]]) -> None:
    """The turns shown, each (user message, answer, version label or "" without versions)."""
    expect(shown(page)).to_have_count(len(rows))
    for index, (message, answer, label) in enumerate(rows):
        turn = shown(page).nth(index)
        expect(turn.locator(".msg-user .bubble")).to_have_text(message)
        expect(turn.locator(".answer")).to_have_text(answer)
        if label:
            expect(turn.locator(".versions")).to_be_visible()
            expect(turn.locator(".version-label")).to_have_text(label)
        else:
            expect(turn.locator(".versions")).to_be_hidden()


def test_regenerate_switch_edit_continue_and_copy(user_page, replies, shot):
    page = user_page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    one, two, three = unique("first"), unique("second"), unique("third")
    replies.set(one, text_reply("Answer **one**.", piece=3))
    replies.set(two, text_reply("Answer two, take 1.", piece=3), text_reply("Answer two, take 2.", piece=3))
    replies.set(three, text_reply("Answer three.", piece=3))
    for message in (one, two, three):
        send(page, message)
        expect(shown(page).last.locator(".answer-actions")).to_be_visible(timeout=15000)
    cid = conversation_id(page)
    expect_branch(page, [(one, "Answer one.", ""), (two, "Answer two, take 1.", ""), (three, "Answer three.", "")])

    # Regenerate the second answer: a new version of turn two, whose branch has no third turn.
    shown(page).nth(1).locator("[data-action=regenerate]").click()
    expect_branch(page, [(one, "Answer one.", ""), (two, "Answer two, take 2.", "2 / 2")])
    shot(page, "versions-regenerated")

    # Back to the first version: its answer and the third turn come back, without a reload.
    shown(page).nth(1).locator("[data-action=previous-version]").click()
    expect_branch(page, [(one, "Answer one.", ""), (two, "Answer two, take 1.", "1 / 2"), (three, "Answer three.", "")])
    expect(shown(page).nth(1).locator("[data-action=previous-version]")).to_be_disabled()
    shot(page, "versions-older")

    # Edit the first message: a branch of its own with one turn.
    edited = unique("first, edited")
    replies.set(edited, text_reply("Answer to the edit.", piece=3))
    shown(page).first.locator("[data-action=edit]").click()
    editor = shown(page).first.locator(".edit-input")
    expect(editor).to_have_value(one)
    shot(page, "versions-editing")
    editor.fill(edited)
    shown(page).first.locator(".edit-form button[type=submit]").click()
    expect_branch(page, [(edited, "Answer to the edit.", "2 / 2")])
    shot(page, "versions-edited")

    # Back to the original first turn: below it, its newest turns (the regenerated answer).
    shown(page).first.locator("[data-action=previous-version]").click()
    expect_branch(page, [(one, "Answer one.", "1 / 2"), (two, "Answer two, take 2.", "2 / 2")])
    # Switch turn two to its older version and write: the message continues that branch.
    shown(page).nth(1).locator("[data-action=previous-version]").click()
    four = unique("fourth")
    replies.set(four, text_reply("Answer four.", piece=3))
    send(page, four)
    expect_branch(
        page,
        [
            (one, "Answer one.", "1 / 2"),
            (two, "Answer two, take 1.", "1 / 2"),
            (three, "Answer three.", ""),
            (four, "Answer four.", ""),
        ],
    )
    shot(page, "versions-continued")

    # Copy an answer as Markdown: the source, not the rendered text.
    shown(page).first.locator("[data-action=copy-answer]").click()
    expect(shown(page).first.locator("[data-action=copy-answer]")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == "Answer **one**."

    # Another tab, and a reload of this one: the same branches, from the events alone.
    other = page.context.new_page()
    other.goto(f"/?c={cid}")
    page.reload()
    for each in (other, page):
        expect_branch(
            each,
            [
                (one, "Answer one.", "1 / 2"),
                (two, "Answer two, take 1.", "1 / 2"),
                (three, "Answer three.", ""),
                (four, "Answer four.", ""),
            ],
        )
    other.locator("article.turn:visible").nth(1).locator("[data-action=next-version]").click()
    expect_branch(other, [(one, "Answer one.", "1 / 2"), (two, "Answer two, take 2.", "2 / 2")])
    assert_clean(page)
