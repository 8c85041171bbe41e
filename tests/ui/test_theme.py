"""The theme, the error pages, the way back to a shared link and the account's deletion in a real
browser: the switch applies at once and survives a reload in spite of the system's scheme; axe's
color-contrast rule finds nothing in either theme on the chat, account, sign-in and shared pages;
a missing page and an unknown shared link are the site's own pages with a way home; signing up
from a shared link comes back to it; a wrong password deletes nothing, the right one signs out.

Screenshots of every state go to /tmp/shots/account/ (SHOTS) for a person to look at."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.template.loader import render_to_string
from playwright.sync_api import expect

from tests.ui.axe import axe_source
from tests.ui.conftest import PASSWORD, PageWatch, sign_up
from tests.ui.test_shares import seed_shared
from tests.ui.test_timeline import assert_clean

pytestmark = pytest.mark.browser

SHOTS = Path("/tmp/shots/account")
SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
DARK_BG, LIGHT_BG = "rgb(21, 23, 27)", "rgb(247, 247, 248)"  # --bg of each palette

CONTRAST = """async () => {
  const results = await axe.run(document, {runOnly: {type: "rule", values: ["color-contrast"]}});
  return results.violations.flatMap((v) => v.nodes.map((n) => n.target.join(" ") + ": " + n.failureSummary));
}"""


def contrast_failures(page) -> list[str]:
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(axe_source())
    return page.evaluate(CONTRAST)


def background(page) -> str:
    return page.evaluate("getComputedStyle(document.body).backgroundColor")


def shoot(page, name: str) -> None:
    """The page at both sizes, full length, into SHOTS."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size
    for label, viewport in SIZES.items():
        page.set_viewport_size(viewport)
        page.screenshot(path=str(SHOTS / f"{name}-{label}.png"), full_page=True, animations="disabled")
    page.set_viewport_size(size)


def check_contrast(page, where: str, failures: list[str]) -> None:
    for label, viewport in SIZES.items():
        page.set_viewport_size(viewport)
        failures.extend(f"{where} at {label}: {found}" for found in contrast_failures(page))
    page.set_viewport_size(SIZES["desktop"])


def csrf_post(page, path: str, body: dict) -> dict:
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    answer = page.request.post(
        path, data=json.dumps(body), headers={"X-CSRFToken": token, "Content-Type": "application/json"}
    )
    assert answer.ok, answer.text()
    return answer.json()


def shared_conversation(page, ui_env) -> tuple[str, str]:
    """A conversation of the page's user with code, a tool call, thinking and two versions, and
    a shared link to it."""
    conversation = seed_shared(ui_env, page.username)
    page.goto("/account/")
    return conversation, csrf_post(page, f"/api/conversations/{conversation}/shares/", {})["url"]


def test_the_theme_switch_applies_at_once_survives_a_reload_and_passes_contrast(user_page, ui_env):
    page = user_page
    page.set_viewport_size(SIZES["desktop"])
    conversation, _link = shared_conversation(page, ui_env)
    page.emulate_media(color_scheme="light")
    page.goto(f"/?c={conversation}")
    expect(page.locator("#turns .turn").first).to_be_visible()
    assert background(page) == LIGHT_BG
    expect(page.locator("#theme-select-sidebar")).to_have_value("system")

    # Dark from the chat page's switch: at once, and after a reload though the system is light.
    page.select_option("#theme-select-sidebar", "dark")
    expect(page.locator("body")).to_have_attribute("data-theme", "dark")
    assert background(page) == DARK_BG
    page.wait_for_load_state("networkidle")  # the save
    page.reload()
    expect(page.locator("#turns .turn").first).to_be_visible()
    assert background(page) == DARK_BG
    expect(page.locator("#theme-select-sidebar")).to_have_value("dark")
    page.locator("#turns .timeline-summary").first.click()  # the tool row and thinking shown too

    failures: list[str] = []
    check_contrast(page, "chat, dark", failures)
    shoot(page, "chat-dark")
    page.goto("/account/")
    assert background(page) == DARK_BG
    expect(page.locator("#theme-select-account")).to_have_value("dark")
    check_contrast(page, "account, dark", failures)
    shoot(page, "account-dark")

    # Light from the account page, with the system dark now: the account wins.
    page.emulate_media(color_scheme="dark")
    page.select_option("#theme-select-account", "light")
    assert background(page) == LIGHT_BG
    page.wait_for_load_state("networkidle")
    page.reload()
    assert background(page) == LIGHT_BG
    check_contrast(page, "account, light", failures)
    shoot(page, "account-light")
    page.goto(f"/?c={conversation}")
    expect(page.locator("#turns .turn").first).to_be_visible()
    assert background(page) == LIGHT_BG
    expect(page.locator("#theme-select-sidebar")).to_have_value("light")
    page.locator("#turns .timeline-summary").first.click()
    check_contrast(page, "chat, light", failures)
    shoot(page, "chat-light")

    # System: follows the scheme again.
    page.goto("/account/")
    page.select_option("#theme-select-account", "system")
    assert background(page) == DARK_BG
    page.emulate_media(color_scheme="light")
    assert background(page) == LIGHT_BG
    page.wait_for_load_state("networkidle")
    page.reload()
    expect(page.locator("#theme-select-account")).to_have_value("system")
    assert not failures, "color-contrast:\n" + "\n".join(failures)
    assert_clean(page)


def test_the_shared_and_sign_in_pages_pass_contrast_in_both_themes(user_page, ui_env, new_context, ui_server):
    page = user_page
    page.set_viewport_size(SIZES["desktop"])
    _conversation, link = shared_conversation(page, ui_env)
    failures: list[str] = []
    # A signed-in visitor sees a shared page in their own theme.
    for theme, expected in (("dark", DARK_BG), ("light", LIGHT_BG)):
        page.goto("/account/")
        page.select_option("#theme-select-account", theme)
        page.wait_for_load_state("networkidle")
        page.emulate_media(color_scheme="light" if theme == "dark" else "dark")
        page.goto(link)
        expect(page.locator("#turns .turn").first).to_be_visible()
        assert background(page) == expected
        check_contrast(page, f"shared, {theme}", failures)
        shoot(page, f"shared-{theme}")
    assert_clean(page)

    # Signed out, the sign-in and shared pages follow the system's scheme: both checked.
    visitor = new_context().new_page()
    visitor.watch = PageWatch(visitor, ui_server.base)
    for scheme, expected in (("light", LIGHT_BG), ("dark", DARK_BG)):
        visitor.emulate_media(color_scheme=scheme)
        visitor.goto("/accounts/login/")
        assert background(visitor) == expected
        check_contrast(visitor, f"sign-in, {scheme}", failures)
        shoot(visitor, f"login-{scheme}")
        visitor.goto(link)
        expect(visitor.locator("#turns .turn").first).to_be_visible()
        check_contrast(visitor, f"shared signed out, {scheme}", failures)
        shoot(visitor, f"shared-signed-out-{scheme}")
    assert not failures, "color-contrast:\n" + "\n".join(failures)
    assert_clean(visitor)


def test_missing_pages_are_the_sites_own_with_a_way_home(user_page, new_context, ui_server):
    page = user_page
    failures: list[str] = []
    for theme in ("light", "dark"):
        page.goto("/account/")
        page.select_option("#theme-select-account", theme)
        page.wait_for_load_state("networkidle")
        answer = page.goto("/no/such/page/")
        assert answer.status == 404
        expect(page.locator("h1")).to_have_text("Page not found")
        check_contrast(page, f"404, {theme}", failures)
        shoot(page, f"404-{theme}")
    page.get_by_role("link", name="Back to the chat").click()
    page.wait_for_url(f"{ui_server.base}/")
    expect(page.locator("#message-input")).to_be_visible()

    visitor = new_context().new_page()
    # The server failing: the 500 page as errors.server_error renders it, with no request.
    html = render_to_string("500.html", {"message": "The server failed to answer this request."})
    visitor.route("**/boom/", lambda route: route.fulfill(status=500, body=html, content_type="text/html"))
    for scheme in ("light", "dark"):
        visitor.emulate_media(color_scheme=scheme)
        answer = visitor.goto("/s/sh_" + "A" * 43 + "/")
        assert answer.status == 404 and answer.headers["referrer-policy"] == "no-referrer"
        expect(visitor.locator("h1")).to_have_text("This link is not shared")
        check_contrast(visitor, f"share 404, {scheme}", failures)
        shoot(visitor, f"share-404-{scheme}")
        visitor.goto("/boom/")
        expect(visitor.locator("h1")).to_have_text("Something went wrong")
        expect(visitor.get_by_role("link", name="Try again")).to_have_attribute("href", "/")
        check_contrast(visitor, f"500, {scheme}", failures)
        shoot(visitor, f"500-{scheme}")
    visitor.get_by_role("link", name="Try again").click()
    visitor.wait_for_url(re.compile(r".*/accounts/login/.*"))
    assert not failures, "color-contrast:\n" + "\n".join(failures)


def test_signing_up_from_a_shared_link_comes_back_to_it(user_page, ui_env, new_context, ui_server):
    conversation, link = shared_conversation(user_page, ui_env)

    page = new_context().new_page()
    page.watch = PageWatch(page, ui_server.base)
    page.goto(link)
    page.get_by_role("link", name="Sign in to continue it").click()
    page.wait_for_url(re.compile(r".*/accounts/login/\?next="))
    page.get_by_role("link", name="Create one").click()
    page.wait_for_url(re.compile(r".*/accounts/signup/\?next="))
    page.fill("#id_username", f"from{conversation[:8]}")
    page.fill("#id_password1", PASSWORD)
    page.fill("#id_password2", PASSWORD)
    page.click("form.auth-form button[type=submit]")
    page.wait_for_url(f"{ui_server.base}{link}")
    expect(page.locator("#copy-shared")).to_be_visible()  # signed in, on the shared page
    assert_clean(page)


def test_deleting_the_account_needs_the_password_then_signs_out(new_context, ui_server):
    page = new_context().new_page()
    page.watch = PageWatch(page, ui_server.base)
    username = sign_up(page)
    page.goto("/account/")
    expect(page.locator("#export-all")).to_have_attribute("href", "/api/conversations/export/")
    page.fill("#delete-account-confirm", "not-my-password")
    page.click("#delete-account-button")
    expect(page.locator("#delete-account-error")).to_have_text("The password is wrong; nothing was deleted.")
    shoot(page, "account-delete-refused")
    page.reload()
    expect(page.locator("h1")).to_have_text("Account")  # still signed in

    page.fill("#delete-account-confirm", PASSWORD)
    page.click("#delete-account-button")
    page.wait_for_url(re.compile(r".*/accounts/login/$"))
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("form.auth-form button[type=submit]")
    expect(page.locator(".form-error")).to_be_visible()  # no such account any more
    assert [e for e in page.watch.console_errors if "403" not in e] == []
