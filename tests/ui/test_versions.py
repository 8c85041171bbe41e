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


def expect_branch(page, rows: list[tuple[str, str, str, str]]) -> None:
    """The turns shown, each (user message, answer, the question's version label, the answer's
    version label; "" for none: its switcher hidden)."""
    expect(shown(page)).to_have_count(len(rows))
    for index, (message, answer, question_label, answer_label) in enumerate(rows):
        turn = shown(page).nth(index)
        expect(turn.locator(".msg-user .bubble")).to_have_text(message)
        expect(turn.locator(".answer")).to_have_text(answer)
        for switcher, label in ((".msg-user .versions", question_label), (".answer-actions .versions", answer_label)):
            if label:
                expect(turn.locator(switcher)).to_be_visible()
                expect(turn.locator(f"{switcher} .version-label")).to_have_text(label)
            else:
                expect(turn.locator(switcher)).to_be_hidden()


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
    expect_branch(
        page, [(one, "Answer one.", "", ""), (two, "Answer two, take 1.", "", ""), (three, "Answer three.", "", "")]
    )

    # Regenerate the second answer: a new version of its answer (the question stays one), whose
    # branch has no third turn.
    shown(page).nth(1).locator("[data-action=regenerate]").click()
    expect_branch(page, [(one, "Answer one.", "", ""), (two, "Answer two, take 2.", "", "2 / 2")])
    shot(page, "versions-regenerated")

    # Back to the first answer: the third turn comes back, without a reload.
    shown(page).nth(1).locator("[data-action=previous-answer]").click()
    expect_branch(
        page,
        [(one, "Answer one.", "", ""), (two, "Answer two, take 1.", "", "1 / 2"), (three, "Answer three.", "", "")],
    )
    expect(shown(page).nth(1).locator("[data-action=previous-answer]")).to_be_disabled()
    shot(page, "versions-older")

    # Edit the first message: a version of the question, a branch of its own with one turn.
    edited = unique("first, edited")
    replies.set(edited, text_reply("Answer to the edit.", piece=3))
    shown(page).first.locator("[data-action=edit]").click()
    editor = shown(page).first.locator(".edit-input")
    expect(editor).to_have_value(one)
    shot(page, "versions-editing")
    editor.fill(edited)
    shown(page).first.locator(".edit-form button[type=submit]").click()
    expect_branch(page, [(edited, "Answer to the edit.", "2 / 2", "")])
    shot(page, "versions-edited")

    # Back to the original first question: below it, its newest turns (the regenerated answer).
    shown(page).first.locator("[data-action=previous-version]").click()
    expect_branch(page, [(one, "Answer one.", "1 / 2", ""), (two, "Answer two, take 2.", "", "2 / 2")])
    # Switch turn two to its older answer and write: the message continues that branch.
    shown(page).nth(1).locator("[data-action=previous-answer]").click()
    four = unique("fourth")
    replies.set(four, text_reply("Answer four.", piece=3))
    send(page, four)
    continued = [
        (one, "Answer one.", "1 / 2", ""),
        (two, "Answer two, take 1.", "", "1 / 2"),
        (three, "Answer three.", "", ""),
        (four, "Answer four.", "", ""),
    ]
    expect_branch(page, continued)
    shot(page, "versions-continued")

    # Copy an answer as Markdown: the source, not the rendered text.
    shown(page).first.locator("[data-action=copy-answer]").click()
    expect(shown(page).first.locator("[data-action=copy-answer]")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == "Answer **one**."

    # Another tab, and a reload of this one: the same branches (the new turn cleared the choice).
    other = page.context.new_page()
    other.goto(f"/?c={cid}")
    page.reload()
    for each in (other, page):
        expect_branch(each, continued)
    # A choice in one tab is what the other opens on after a reload, as another device would.
    other.locator("article.turn:visible").nth(1).locator("[data-action=next-answer]").click()
    chosen = [(one, "Answer one.", "1 / 2", ""), (two, "Answer two, take 2.", "", "2 / 2")]
    expect_branch(other, chosen)
    other.wait_for_load_state("networkidle")  # the choice has reached the server
    page.reload()
    expect_branch(page, chosen)
    assert_clean(page)


def test_an_edit_then_a_regenerate_are_a_question_version_and_an_answer_version(user_page, replies, shot):
    """The issue's case: after one edit and one regenerate the message read ‹ 3 / 3 ›, versions 2
    and 3 the same question. Now the message has 2 versions and the edit's answer 2; the choice
    survives a reload, and a fresh page at phone size shows the same."""
    page = user_page
    question, edited = unique("What is 6 * 7?"), unique("What is 6 * 8?")
    replies.set(question, text_reply("It is 42.", piece=3))
    replies.set(edited, text_reply("It is 48.", piece=3), text_reply("Forty-eight.", piece=3))
    send(page, question)
    expect(shown(page).last.locator(".answer-actions")).to_be_visible(timeout=15000)
    cid = conversation_id(page)
    shown(page).first.locator("[data-action=edit]").click()
    shown(page).first.locator(".edit-input").fill(edited)
    shown(page).first.locator(".edit-form button[type=submit]").click()
    expect_branch(page, [(edited, "It is 48.", "2 / 2", "")])
    shown(page).first.locator("[data-action=regenerate]").click()
    expect_branch(page, [(edited, "Forty-eight.", "2 / 2", "2 / 2")])
    # The user's message is not repeated: one visible question, with its answer's switcher.
    expect(page.locator(".msg-user:visible")).to_have_count(1)
    shot(page, "versions-regenerated-answer-1280")

    # Choose the first answer to the edit; a reload opens on it, not on the newest.
    shown(page).first.locator("[data-action=previous-answer]").click()
    expect_branch(page, [(edited, "It is 48.", "2 / 2", "1 / 2")])
    page.wait_for_load_state("networkidle")
    page.reload()
    expect_branch(page, [(edited, "It is 48.", "2 / 2", "1 / 2")])
    # The original question's answer is one, and switching to it keeps the question's switcher.
    shown(page).first.locator("[data-action=previous-version]").click()
    expect_branch(page, [(question, "It is 42.", "1 / 2", "")])
    shown(page).first.locator("[data-action=next-version]").click()
    expect_branch(page, [(edited, "It is 48.", "2 / 2", "1 / 2")])  # the answer last shown of that question

    phone = page.context.new_page()
    phone.set_viewport_size({"width": 390, "height": 844})
    phone.goto(f"/?c={cid}")
    expect_branch(phone, [(edited, "It is 48.", "2 / 2", "1 / 2")])
    shot(phone, "versions-regenerated-answer-390")
    assert_clean(page)
