"""API tokens on the account page in a real browser: made with a name and an expiry, the value
shown once with a copy button that puts it on the clipboard, the token working over HTTP at
once, listed, revoked; no serious accessibility violation with a new token and a list shown
(axe-core, desktop and phone, light and dark)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest
from playwright.sync_api import expect

from tests.ui.axe import audit
from tests.ui.test_timeline import assert_clean

pytestmark = pytest.mark.browser


def api_status(base: str, token: str) -> int:
    request = urllib.request.Request(f"{base}/api/conversations/", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_token_is_made_copied_used_and_revoked_from_the_account_page(user_page, ui_server, shot):
    page = user_page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=ui_server.base)
    page.goto("/account/")
    expect(page.locator(".account-card h2", has_text="API tokens")).to_be_visible()
    expect(page.locator(".token-list")).to_have_count(0)  # none yet
    page.fill("#id_name", "nightly report")
    page.select_option("#id_expires_in_days", "30")
    page.click(".token-form button[type=submit]")
    page.wait_for_url("**/account/")

    value = page.locator("#new-token").input_value()
    assert re.fullmatch(r"as_[A-Za-z0-9_-]{43}", value)
    copy = page.locator("button[data-copy=new-token]")
    copy.click()
    expect(copy).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == value
    row = page.locator(".token-list tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("nightly report")
    expect(row).to_contain_text(value[:7])
    shot(page, "account-tokens-1280", full_page=True)
    audit(page, "account-tokens")
    page.set_viewport_size({"width": 390, "height": 844})
    shot(page, "account-tokens-390", full_page=True)
    page.set_viewport_size({"width": 1280, "height": 820})

    assert api_status(ui_server.base, value) == 200
    page.reload()
    expect(page.locator("#new-token")).to_have_count(0)  # shown once
    page.locator(".token-list button", has_text="Revoke").click()
    page.wait_for_url("**/account/")
    expect(page.locator(".form-ok")).to_contain_text("revoked")
    expect(page.locator(".token-list")).to_have_count(0)
    assert api_status(ui_server.base, value) == 401
    assert_clean(page)


def completion(base: str, token: str, content: str) -> dict:
    body = json.dumps({"model": "default", "messages": [{"role": "user", "content": content}]}).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    request = urllib.request.Request(f"{base}/v1/chat/completions", data=body, headers=headers)
    with urllib.request.urlopen(request, timeout=60) as response:
        return {"conversation": response.headers["X-Agentsite-Conversation"], **json.loads(response.read())}


def test_a_conversation_made_through_v1_carries_the_api_tag_in_the_sidebar(user_page, ui_server, shot):
    page = user_page
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    made = page.request.post(
        "/api/tokens/", data={"name": "sidebar"}, headers={"X-CSRFToken": csrf, "Referer": ui_server.base}
    )
    assert made.status == 201, made.text()
    page.request.post("/api/conversations/", data={"title": "typed in the page"}, headers={"X-CSRFToken": csrf})
    called = completion(ui_server.base, made.json()["token"], "asked by a script")
    page.reload()
    api_item = page.locator(f'#conversation-list li:has(a[href*="{called["conversation"]}"])')
    expect(api_item.locator(".conv-title")).to_have_text("asked by a script")
    tag = api_item.locator(".conv-tag-api")
    expect(tag).to_be_visible()
    expect(tag).to_have_text("API")
    assert tag.get_attribute("title") == "Started through the OpenAI-compatible API"
    page_item = page.locator("#conversation-list li", has_text="typed in the page")
    expect(page_item).to_have_count(1)
    expect(page_item.locator(".conv-tag-api")).to_have_count(0)  # only the API's conversations
    shot(page, "sidebar-api-tag-1280")
    page.emulate_media(color_scheme="dark")
    shot(page, "sidebar-api-tag-1280-dark")
    page.set_viewport_size({"width": 390, "height": 844})
    page.click("#sidebar-toggle")
    expect(tag).to_be_visible()
    shot(page, "sidebar-api-tag-390-dark")
    assert_clean(page)
