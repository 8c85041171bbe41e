"""The sidebar's search box and the export/import buttons, in a real browser."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.fakellm import text_reply
from tests.ui.test_timeline import assert_clean, conversation_id, last_turn, send, unique

pytestmark = pytest.mark.browser


def test_search_box_filters_the_list_and_marks_the_words(user_page, replies, shot):
    page = user_page
    first, second = unique("Travel question"), unique("Cooking question")
    # Markdown in the answer: the snippet shows its text, not its syntax.
    replies.set(
        first, text_reply("The capital of `Portugal` is **Lisbon**, by the [Tagus](https://example.com/).", piece=6)
    )
    # Model text that looks like markup must stay text in the snippet too.
    replies.set(second, text_reply('Simmer the <img src=x onerror="window.__pwned=1"> risotto slowly.', piece=6))
    send(page, first)
    expect(last_turn(page).locator(".answer")).to_contain_text("Tagus")
    page.click("#new-chat")
    send(page, second)
    expect(last_turn(page).locator(".answer")).to_contain_text("slowly")
    expect(page.locator("li.conv-item")).to_have_count(2)

    page.fill("#conversation-search", "lisb tagu")
    items = page.locator("li.conv-item")
    expect(items).to_have_count(1)
    expect(items.first.locator(".conv-title")).to_have_text(first)
    snippet = items.first.locator(".conv-snippet")
    expect(snippet).to_contain_text("The capital of Portugal is Lisbon, by the Tagus.")
    expect(snippet.locator("mark")).to_have_text(["Lisb", "Tagu"])
    shot(page, "sidebar-search")

    page.fill("#conversation-search", "risotto onerror")
    expect(items).to_have_count(1)
    expect(items.first.locator(".conv-snippet")).to_contain_text('<img src=x onerror="window.__pwned=1">')
    assert page.locator("li.conv-item img").count() == 0
    assert page.evaluate("window.__pwned") is None

    page.fill("#conversation-search", "zeppelin")
    expect(items).to_have_count(0)
    expect(page.locator(".conv-no-match")).to_be_visible()
    expect(page.locator(".conv-empty")).to_be_hidden()

    page.press("#conversation-search", "Escape")
    expect(items).to_have_count(2)
    expect(page.locator(".conv-snippet")).to_have_count(0)
    assert_clean(page)


def test_export_menu_and_import(user_page, replies, tmp_path, shot):
    page = user_page
    message = unique("Export me")
    replies.set(message, text_reply("Exported **answer** with ünïcode ✓.", piece=5))
    expect(page.locator("#export-actions")).to_be_hidden()  # nothing to export in a draft
    send(page, message)
    expect(last_turn(page).locator(".answer")).to_contain_text("ünïcode")
    original = conversation_id(page)
    expect(page.locator("#export-actions")).to_be_visible()

    page.click("#export-toggle")  # one menu: JSON or Markdown
    with page.expect_download() as info:
        page.click("#export-json")
    assert info.value.suggested_filename == f"{message}.json"  # named after the title, not the id
    exported = tmp_path / "export.json"
    info.value.save_as(exported)
    document = json.loads(exported.read_text())
    assert document["conversation"]["id"] == original
    assert [e["type"] for e in document["events"]][0] == "user_message"
    assert (
        "".join(e["content"] for e in document["events"] if e["type"] == "text")
        == "Exported **answer** with ünïcode ✓."
    )

    page.click("#export-toggle")
    with page.expect_download() as info:
        page.click("#export-markdown")
    markdown = tmp_path / "export.md"
    info.value.save_as(markdown)
    text = markdown.read_text()
    assert f"## You\n\n{message}" in text and "Exported **answer** with ünïcode ✓." in text

    page.set_input_files("#import-file", str(exported))
    page.wait_for_url(lambda url: "?c=" in url and not url.endswith(original))
    imported = conversation_id(page)
    assert imported != original
    expect(last_turn(page).locator(".answer")).to_contain_text("Exported answer with ünïcode ✓.")
    expect(page.locator("li.conv-item")).to_have_count(2)
    # Said, opened, and told apart from the conversation it came from.
    expect(page.locator("#notice-text")).to_have_text(f"Imported “{message} (imported)”.")
    expect(page.locator("#chat-title")).to_have_text(f"{message} (imported)")
    expect(page.locator("li.conv-item.active .conv-title")).to_have_text(f"{message} (imported)")
    shot(page, "sidebar-imported")

    broken = tmp_path / "broken.json"
    broken.write_text('{"conversation": {}, "events": [{"seq": 2}]}')
    page.set_input_files("#import-file", str(broken))
    expect(page.locator("#notice-text")).to_contain_text("Could not import")
    expect(page.locator("li.conv-item")).to_have_count(2)
    page.watch.console_errors = [e for e in page.watch.console_errors if "400" not in e]  # the refused POST
    assert_clean(page)
