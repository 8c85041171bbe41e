"""Small things that looked unfinished, in a real browser at 1280x800 and 390x844: suggestion cards
of one width, the thumbs on the row of Copy and Regenerate, the feedback comment's focus ring
whole, the default agent named in the page's language, and the admin's conversation list."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from playwright.sync_api import expect

from tests.fakellm import text_reply
from tests.ui.conftest import PASSWORD, ROOT, PageWatch, sign_up
from tests.ui.test_timeline import assert_clean, last_turn, send, unique

pytestmark = pytest.mark.browser

VIEWPORTS = {"1280": {"width": 1280, "height": 800}, "390": {"width": 390, "height": 844}}


def box(locator) -> dict:
    found = locator.bounding_box()
    assert found is not None, locator
    return found


@pytest.mark.parametrize("size", VIEWPORTS)
def test_the_suggestion_cards_are_of_one_width(new_context, size, shot):
    page = new_context(viewport=VIEWPORTS[size]).new_page()
    sign_up(page)
    cards = page.locator(".suggestion")
    expect(cards).to_have_count(3)
    widths = {round(box(cards.nth(i))["width"]) for i in range(3)}
    assert len(widths) == 1, widths
    assert box(cards.nth(0))["x"] + widths.pop() <= VIEWPORTS[size]["width"]
    shot(page, f"finish-suggestions-{size}")


@pytest.mark.parametrize("size", VIEWPORTS)
def test_the_thumbs_share_the_row_of_copy_and_regenerate_and_the_comment_ring_is_whole(
    new_context, ui_server, replies, size, shot
):
    page = new_context(viewport=VIEWPORTS[size]).new_page()
    page.watch = PageWatch(page, ui_server.base)
    sign_up(page)
    message = unique("Rate me")
    replies.set(message, text_reply("An answer to rate.", piece=5))
    send(page, message)
    turn = last_turn(page)
    expect(turn.locator(".answer")).to_have_text("An answer to rate.")
    copy = turn.locator("[data-action=copy-answer]")
    thumb = turn.locator(".feedback-thumb[data-rating='-1']")
    expect(thumb).to_be_visible()
    middle = lambda found: found["y"] + found["height"] / 2  # noqa: E731
    assert abs(middle(box(copy)) - middle(box(thumb))) <= 2, (box(copy), box(thumb))
    assert box(thumb)["x"] > box(turn.locator("[data-action=regenerate]"))["x"]
    shot(page, f"finish-answer-actions-{size}")

    thumb.click()
    comment = turn.locator(".feedback-comment")
    expect(comment).to_be_focused()
    # The ring as drawn: the field's box grown by the outline, inside what the turn paints.
    ring = comment.evaluate(
        """(input) => {
          const style = getComputedStyle(input);
          const grow = parseFloat(style.outlineWidth) + parseFloat(style.outlineOffset);
          const field = input.getBoundingClientRect();
          const turn = input.closest("article.turn").getBoundingClientRect();
          return {style: style.outlineStyle, width: parseFloat(style.outlineWidth), inside:
            field.left - grow >= turn.left && field.right + grow <= turn.right &&
            field.top - grow >= turn.top && field.bottom + grow <= turn.bottom};
        }"""
    )
    assert ring["style"] != "none" and ring["width"] >= 2 and ring["inside"], ring
    assert box(comment)["y"] > box(copy)["y"] + box(copy)["height"]  # the comment wraps under the row
    shot(page, f"finish-feedback-comment-{size}")
    assert_clean(page)


def test_the_default_agent_is_named_in_the_page_language(new_context, replies, shot):
    page = new_context(viewport=VIEWPORTS["1280"], locale="zh-CN").new_page()
    sign_up(page)
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    message = unique("你好")
    replies.set(message, text_reply("你好！", piece=5))
    send(page, message)
    turn = last_turn(page)
    expect(turn.locator(".answer")).to_have_text("你好！")
    expect(turn.locator(".turn-agent")).to_have_text("默认 · fake-model")
    shot(page, "finish-default-agent-zh-1280")
    page.reload()  # the same from the stored log
    turn = last_turn(page)
    expect(turn.locator(".turn-agent")).to_have_text("默认 · fake-model")
    page.set_viewport_size(VIEWPORTS["390"])
    shot(page, "finish-default-agent-zh-390")


@pytest.mark.parametrize("size", VIEWPORTS)
def test_the_admin_conversation_list_fits_and_names_the_default_agent(new_context, ui_env, size, shot):
    owner = new_context().new_page()
    sign_up(owner)
    owner.request.post(
        "/api/conversations/",
        data={"title": "A conversation whose title is as long as a first message makes it"},
        headers={"X-CSRFToken": next(c["value"] for c in owner.context.cookies() if c["name"] == "csrftoken")},
    )
    staff = f"staff{size}{os.getpid()}"
    subprocess.run(
        [sys.executable, "manage.py", "createsuperuser", "--noinput", "--username", staff, "--email", "s@example.com"],
        cwd=ROOT,
        env={**ui_env, "DJANGO_SUPERUSER_PASSWORD": PASSWORD},
        check=True,
        capture_output=True,
        timeout=120,
    )
    page = new_context(viewport=VIEWPORTS[size]).new_page()
    page.goto("/admin/login/?next=/admin/chat/conversation/")
    page.fill("#id_username", staff)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/chat/conversation/")
    expect(page).to_have_title("Select conversation to view | agentsite admin")
    row = page.locator("#result_list tbody tr", has_text="A conversation whose title").first
    expect(row.locator("td.field-agent_name")).to_have_text("Default")
    if size == "1280":
        # Every column on screen: nothing scrolls sideways, the last header is inside the window.
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        last = page.locator("#result_list thead th").last
        assert box(last)["x"] + box(last)["width"] <= 1280
    shot(page, f"finish-admin-conversations-{size}", full_page=True)
