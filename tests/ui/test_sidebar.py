"""The conversation list and the header in a real browser: date groups in the user's time zone,
titles that use the row's width, the Export menu, and a file attached before anything is typed."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import expect

from tests.fakellm import text_reply
from tests.ui.conftest import ROOT, PageWatch, sign_up
from tests.ui.test_timeline import assert_clean, conversation_id, last_turn, send, unique

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}


def seed_dated(ui_env, username: str, pairs: list[tuple[str, datetime]]) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-m", "tests.ui.seed_dated", username, *(f"{t}={d.isoformat()}" for t, d in pairs)],
        cwd=ROOT,
        env=ui_env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return result.stdout.split()


def list_rows(page) -> list[tuple[str, str]]:
    """The list as the user reads it: ("group", heading) and ("item", title), in order."""
    rows = page.evaluate(
        """() => [...document.querySelectorAll('#conversation-list > li')].map((li) =>
             li.classList.contains('conv-group') ? ['group', li.textContent.trim()]
                                                 : ['item', li.querySelector('.conv-title').textContent])"""
    )
    return [tuple(row) for row in rows]


@pytest.fixture
def tokyo_page(new_context, ui_server):
    """A user whose browser is in Tokyo (UTC+9): their "today" began nine hours before UTC's."""
    page = new_context(viewport=DESKTOP, timezone_id="Asia/Tokyo").new_page()
    page.watch = PageWatch(page, ui_server.base)
    page.username = sign_up(page)
    return page


def test_conversations_are_grouped_by_date_in_the_users_time_zone(tokyo_page, ui_env, shot):
    page = tokyo_page
    now = datetime.now(ZoneInfo("Asia/Tokyo"))
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    older, oldest = midnight - timedelta(days=62), midnight - timedelta(days=400)

    def month(moment: datetime) -> str:
        return moment.strftime("%B" if moment.year == now.year else "%B %Y")

    # "Just after midnight" is yesterday in UTC: grouped by the server's day it would be misfiled.
    seed_dated(
        ui_env,
        page.username,
        [
            ("Last year's plan", oldest),
            ("Two months back", older),
            ("Three weeks back", midnight - timedelta(days=20)),
            ("Three days back", midnight - timedelta(days=3, hours=-2)),
            ("Late last night", midnight - timedelta(minutes=1)),
            ("Just after midnight", midnight + timedelta(minutes=1)),
        ],
    )
    page.reload()
    expect(page.locator("li.conv-item")).to_have_count(6)
    assert list_rows(page) == [
        ("group", "Today"),
        ("item", "Just after midnight"),
        ("group", "Yesterday"),
        ("item", "Late last night"),
        ("group", "Previous 7 days"),
        ("item", "Three days back"),
        ("group", "Previous 30 days"),
        ("item", "Three weeks back"),
        ("group", month(older)),
        ("item", "Two months back"),
        ("group", month(oldest)),
        ("item", "Last year's plan"),
    ]
    # A search lists hits by relevance: no date headings.
    page.fill("#conversation-search", "back")
    expect(page.locator("li.conv-item")).to_have_count(3)
    expect(page.locator("li.conv-group")).to_have_count(0)
    page.press("#conversation-search", "Escape")
    expect(page.locator("li.conv-group")).to_have_count(6)
    page.mouse.move(900, 400)
    shot(page, "sidebar-groups-1280")
    page.set_viewport_size(PHONE)
    page.click("#sidebar-toggle")
    expect(page.locator("#sidebar")).to_be_in_viewport()
    shot(page, "sidebar-groups-390")
    assert_clean(page)


def test_titles_use_the_rows_width_while_its_buttons_are_hidden(user_page, ui_env, shot):
    page = user_page
    page.set_viewport_size(DESKTOP)
    title = "Planning the quarterly infrastructure budget review with the whole team"
    seed_dated(ui_env, page.username, [(title, datetime.now(ZoneInfo("UTC")))])
    page.reload()
    item = page.locator("li.conv-item").first
    expect(item.locator(".conv-title")).to_have_text(title)
    page.mouse.move(900, 400)  # nothing hovered, nothing open: the row's "⋯" button is hidden

    def edges() -> dict:
        return item.evaluate(
            """(li) => ({row: li.getBoundingClientRect().right,
                        title: li.querySelector('.conv-title').getBoundingClientRect().right,
                        rename: li.querySelector('[data-action=menu]').getBoundingClientRect().left})"""
        )

    hidden = edges()
    assert hidden["title"] >= hidden["row"] - 12, hidden  # only the link's padding after the text
    shot(page, "sidebar-long-title-1280", clip={"x": 0, "y": 0, "width": 300, "height": 360})
    item.hover()
    shown = edges()
    assert shown["title"] <= shown["rename"], shown  # the button does not cover the text
    # On a phone the button always shows (no hover): the title ends before it.
    page.set_viewport_size(PHONE)
    page.click("#sidebar-toggle")
    phone = edges()
    assert phone["title"] <= phone["rename"], phone
    shot(page, "sidebar-long-title-390")


def test_one_export_menu_leaves_the_title_its_room(user_page, replies, shot, tmp_path):
    page = user_page
    message = unique("What will the weather be like in Lisbon this weekend?")
    replies.set(message, text_reply("Sunny, 24 °C.", piece=5))
    page.set_viewport_size(PHONE)
    send(page, message)
    expect(last_turn(page).locator(".answer")).to_have_text("Sunny, 24 °C.")
    conversation_id(page)
    title = page.locator("#chat-title")
    named = message[:60]  # an untitled conversation's title: its first message's first 60 characters
    expect(title).to_have_text(named)
    # The title keeps most of the header row (it read "wha…" beside two words).
    shot(page, "header-390")
    width = title.evaluate("(el) => el.getBoundingClientRect().width")
    assert width >= 160, width  # beside JSON and Markdown it had about 50 px
    toggle = page.locator("#export-toggle")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(page.locator("#export-menu")).to_be_hidden()
    toggle.click()
    expect(page.locator("#export-menu")).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(page.locator("#export-menu .menu-item")).to_have_count(3)  # JSON, Markdown, Share…
    shot(page, "header-export-menu-390")
    page.keyboard.press("Escape")
    expect(page.locator("#export-menu")).to_be_hidden()
    expect(toggle).to_be_focused()

    page.set_viewport_size(DESKTOP)
    expect(toggle).to_contain_text("Export")
    toggle.click()
    shot(page, "header-export-menu-1280")
    with page.expect_download() as info:
        page.click("#export-markdown")
    expect(page.locator("#export-menu")).to_be_hidden()  # choosing closes it
    # Named after the title, not the id ("?" cannot be in a file name).
    assert info.value.suggested_filename == named.replace("?", "") + ".md"
    toggle.focus()  # from the keyboard: ArrowDown opens the menu on its first item
    page.keyboard.press("ArrowDown")
    expect(page.locator("#export-json")).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(page.locator("#export-markdown")).to_be_focused()
    page.mouse.click(640, 400)  # a click elsewhere closes it
    expect(page.locator("#export-menu")).to_be_hidden()
    assert_clean(page)


def test_a_file_attached_first_does_not_name_the_conversation(user_page, replies):
    """The upload creates the conversation untitled: the list says "New conversation" until the
    first message names it (the file's name was its title before)."""
    page = user_page
    expect(page.locator("li.conv-item")).to_have_count(0)
    page.set_input_files("#attach-input", files=[{"name": "q3-report.txt", "mimeType": "text/plain", "buffer": b"ok"}])
    expect(page.locator("#attachment-list .chip")).to_have_attribute("data-status", "ready")
    conversation_id(page)
    items = page.locator("li.conv-item")
    expect(items).to_have_count(1)
    expect(items.first.locator(".conv-title")).to_have_text("New conversation")
    page.reload()  # as the server lists it, not only as this page added it
    expect(page.locator("li.conv-item .conv-title")).to_have_text(["New conversation"])
    message = unique("Summarize the quarter")
    replies.set(message, text_reply("A fine quarter."))
    send(page, message)
    expect(last_turn(page).locator(".answer")).to_have_text("A fine quarter.")
    expect(page.locator("li.conv-item .conv-title")).to_have_text([message])
    page.reload()
    expect(page.locator("li.conv-item .conv-title")).to_have_text([message])
    assert_clean(page)
