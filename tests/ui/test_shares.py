"""Shared links in a real browser (docs/using.md, "Shared links"): the Share dialog makes, copies
and revokes links; the shared page, opened signed out, draws the snapshot with the chat page's
own timeline (a tool row, thinking, the version of an answer the owner looked at) with a hostile
Markdown answer rendered inert, under the CSP, and asks nothing of the owner's /api/ or /ws/; a
signed-in visitor copies it and continues; axe finds nothing serious on the page or the dialog."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from playwright.sync_api import expect

from tests.ui.axe import audit
from tests.ui.conftest import ROOT, PageWatch, sign_up
from tests.ui.test_timeline import assert_clean

pytestmark = pytest.mark.browser

SHARE_URL = re.compile(r"^https?://[^/]+/s/sh_[A-Za-z0-9_-]{43}/$")


def seed_shared(env, username: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "tests.ui.seed_shared", username],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return result.stdout.strip().splitlines()[-1]


def open_share_dialog(page):
    page.click("#export-toggle")
    page.click("#share-open")
    expect(page.locator("#share-dialog")).to_be_visible()


def make_link(page, expiry: str = "30") -> str:
    field = page.locator("#share-url")
    before = field.input_value()
    page.select_option("#share-expiry", expiry)
    page.click("#share-create-button")
    expect(page.locator("#share-new")).to_be_visible()
    # A second link: the field still shows the first one's until the answer comes.
    expect(field).not_to_have_value(before)
    url = field.input_value()
    assert SHARE_URL.match(url), url
    return url


def test_share_dialog_shared_page_and_copy(user_page, ui_env, ui_server, new_context, shot):
    owner = user_page
    owner.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=ui_server.base)
    conversation = seed_shared(ui_env, owner.username)
    owner.goto(f"/?c={conversation}")
    expect(owner.locator("#turns .turn").first).to_be_visible()

    # --- the dialog: create, copy, list, revoke ---
    open_share_dialog(owner)
    expect(owner.locator("#share-none")).to_be_visible()
    url = make_link(owner, "7")
    owner.click("#share-copy")
    expect(owner.locator("#share-copy")).to_have_text("Copied")
    assert owner.evaluate("navigator.clipboard.readText()") == url
    rows = owner.locator("#share-list .share-row")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(url.split("/")[-2][:8])
    expect(rows.first).to_contain_text("expires")
    shot(owner, "share-dialog-1280-light")
    audit(owner, "share-dialog")
    owner.set_viewport_size({"width": 390, "height": 844})
    shot(owner, "share-dialog-390-light")
    owner.emulate_media(color_scheme="dark")
    shot(owner, "share-dialog-390-dark")
    owner.set_viewport_size({"width": 1280, "height": 800})
    shot(owner, "share-dialog-1280-dark")
    owner.emulate_media(color_scheme="light")
    doomed = make_link(owner, "")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("does not expire")
    rows.first.get_by_role("button", name=re.compile("Revoke")).click()
    expect(rows).to_have_count(1)
    owner.click("#share-close")
    expect(owner.locator("#share-dialog")).to_be_hidden()
    assert_clean(owner)

    # --- the shared page, signed out ---
    context = new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.watch = PageWatch(page, ui_server.base)
    requests, sockets = [], []
    page.on("request", lambda request: requests.append(request.url))
    page.on("websocket", lambda ws: sockets.append(ws.url))
    response = page.goto(url)
    assert response.status == 200
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "object-src 'none'" in csp
    turns = page.locator("#turns .turn:not([hidden])")
    expect(turns).to_have_count(3)  # the branch shown: the newest answer of the regenerated turn
    expect(page.locator("#chat-title")).to_have_text("Sums and a trap")
    expect(page.locator(".shared-by")).to_contain_text(f"Shared by {owner.username}")
    first = turns.nth(0)
    expect(first.locator(".timeline-summary")).to_contain_text("1 tool call")
    first.locator(".timeline-summary").click()
    expect(first.locator(".timeline-items")).to_contain_text("calculator")
    expect(first.locator(".timeline-items")).to_contain_text("The user wants a product")
    expect(first.locator(".answer strong")).to_have_text("42")
    # The branch the owner was looking at: the newest answer only, no versions to switch to.
    second = turns.nth(1)
    expect(second.locator(".answer")).to_contain_text("Green, version two.")
    expect(page.locator("#turns .turn")).to_have_count(3)
    expect(page.locator("#turns")).not_to_contain_text("Blue, version one.")
    assert page.locator(".versions:visible").count() == 0
    # The hostile answer: drawn as inert text, nothing of it runs or loads.
    hostile = page.locator("#turns .turn:not([hidden])").nth(2).locator(".answer")
    expect(hostile).to_contain_text("raw html")
    assert hostile.locator("img[onerror], script, iframe, [onclick]").count() == 0
    assert hostile.locator("a[href^='javascript']").count() == 0
    assert page.title() != "pwned" and "pwned" not in page.title()
    # Read-only: no composer, sidebar, files, usage; no edit, regenerate or rating buttons.
    for absent in ("#composer", "#sidebar", "#files-panel", "#usage-line", "#conversation-list"):
        assert page.locator(absent).count() == 0, absent
    for button in ("[data-action=edit]", "[data-action=regenerate]", ".feedback"):
        assert page.locator(f"{button}:visible").count() == 0, button
    expect(page.locator("a[href^='/accounts/login/']")).to_be_visible()  # signed out: sign in to continue
    shot(page, "shared-page-1280-light", full_page=True)
    audit(page, "shared-page")
    page.emulate_media(color_scheme="dark")
    shot(page, "shared-page-1280-dark", full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    shot(page, "shared-page-390-dark")
    page.emulate_media(color_scheme="light")
    shot(page, "shared-page-390-light")
    # It asked for nothing of the owner's: only the page, its static files and the link's events.
    asked = [u.removeprefix(ui_server.base) for u in requests]
    assert not [u for u in asked if u.startswith(("/api/", "/ws/"))], asked
    assert sockets == []
    assert f"{url.removeprefix(ui_server.base)}events/" in asked
    assert_clean(page)

    # A revoked link is gone at once.
    assert page.goto(doomed).status == 404

    # --- the owner looks at the first answer and shares again: that branch is the one shared ---
    # (the last turn followed the second answer, so this branch ends at the first one).
    owner.locator("#turns .turn:not([hidden])").nth(1).get_by_role("button", name="Previous answer").click()
    in_view = owner.locator("#turns .turn:not([hidden])")
    expect(in_view).to_have_count(2)
    expect(in_view.nth(1).locator(".answer")).to_contain_text("Blue, version one.")
    open_share_dialog(owner)
    with owner.expect_request(lambda r: r.method == "POST" and r.url.endswith("/shares/")) as made:
        viewed = make_link(owner, "")
    assert isinstance(made.value.post_data_json["leafSeq"], int)  # the page names the branch in view
    owner.click("#share-close")
    page.goto(viewed)
    expect(page.locator("#turns .turn")).to_have_count(2)
    expect(page.locator("#turns .turn").nth(1).locator(".answer")).to_contain_text("Blue, version one.")
    expect(page.locator("#turns")).not_to_contain_text("Green, version two.")
    expect(page.locator("#turns")).not_to_contain_text("raw html")

    # --- a signed-in visitor copies it and continues ---
    visitor = new_context().new_page()
    visitor.watch = PageWatch(visitor, ui_server.base)
    sign_up(visitor)
    visitor.goto(url)
    visitor.click("#copy-shared")
    visitor.wait_for_url(re.compile(r".*/\?c=[0-9a-f-]{36}$"))
    assert conversation not in visitor.url
    expect(visitor.locator("#turns .turn:not([hidden])")).to_have_count(3)
    expect(visitor.locator("#chat-title")).to_have_text("Sums and a trap (shared)")
    expect(visitor.locator("#message-input")).to_be_editable()
    assert_clean(visitor)
