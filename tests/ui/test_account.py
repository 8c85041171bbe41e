"""The account page in a real browser: reached from the user's name in the sidebar, its settings,
the language that follows the account to another browser, signing out the other sessions (whose
open page leaves for the sign-in page), and the password change in the app's style."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.ui.conftest import PASSWORD, PageWatch
from tests.ui.test_timeline import assert_clean

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}


def sign_in(page, username: str) -> None:
    page.goto("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("form.auth-form button[type=submit]")
    page.wait_for_url("**/")
    page.wait_for_selector("#message-input")


def test_the_account_page_from_the_sidebar_saves_the_name_and_the_language(user_page, new_context, shot):
    page = user_page
    link = page.locator("#account-link")
    expect(link).to_have_text(page.username)
    link.click()
    page.wait_for_url("**/account/")
    expect(page.locator("h1")).to_have_text("Account")
    for section in ("Profile", "Password", "Sessions"):
        expect(page.locator(".account-card h2", has_text=section)).to_be_visible()
    sign_out_others = page.get_by_role("button", name="Sign out of all other sessions")
    expect(sign_out_others).to_be_disabled()  # no other session yet
    # Nothing is destroyed by it: a plain secondary button, not a red one.
    expect(sign_out_others).not_to_have_class(re.compile(r"\bbtn-danger\b"))
    shot(page, "account-1280", full_page=True)

    page.fill("#id_display_name", "Ada Lovelace")
    page.fill("#id_email", "ada@example.com")
    page.select_option("#id_language", "zh-hans")
    page.click("#account-profile + form button[type=submit]")
    page.wait_for_url("**/account/")
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    expect(page.locator(".form-ok")).to_have_text("账号设置已保存。")
    expect(page.locator(".account-who")).to_contain_text("Ada Lovelace")
    shot(page, "account-saved-zh-1280", full_page=True)

    # Another browser, English by its own settings, opens in the account's language.
    other = new_context(locale="en-US").new_page()
    sign_in(other, page.username)
    expect(other.locator("html")).to_have_attribute("lang", "zh-hans")
    expect(other.locator("#account-link")).to_have_text("Ada Lovelace")
    expect(other.locator("#new-chat")).to_contain_text("新对话")

    page.locator(".account-back").click()
    page.wait_for_url("**/")
    expect(page.locator("#account-link")).to_have_text("Ada Lovelace")
    assert_clean(page)


def test_signing_out_the_other_sessions_sends_their_open_page_to_sign_in(user_page, new_context, shot):
    page = user_page
    phone = new_context(viewport=PHONE, locale="en-US").new_page()
    phone.watch = PageWatch(phone, page.watch.base)
    sign_in(phone, page.username)
    phone.locator("#sidebar-toggle").click()
    expect(phone.locator("#account-link")).to_be_visible()
    shot(phone, "account-link-sidebar-390")
    phone.locator("#account-link").click()
    phone.wait_for_url("**/account/")
    expect(phone.locator(".account-card").first).to_be_visible()
    shot(phone, "account-390", full_page=True)
    phone.goto("/")
    phone.wait_for_selector("#message-input")

    page.goto("/account/")
    expect(page.locator("#account-sessions + .account-text")).to_contain_text("1 other browser or device")
    page.get_by_role("button", name="Sign out of all other sessions").click()
    page.wait_for_url("**/account/")
    expect(page.locator(".form-ok")).to_have_text("Signed out of 1 other session.")
    expect(page.get_by_role("button", name="Sign out of all other sessions")).to_be_disabled()
    # The phone's socket closed (4401): its page finds itself signed out and goes to sign in.
    phone.wait_for_url("**/accounts/login/**")
    page.goto("/")
    page.wait_for_selector("#message-input")  # this browser is still signed in
    assert_clean(page)


def test_the_password_change_is_in_the_app_style(user_page, shot):
    page = user_page
    page.goto("/account/")
    page.locator("a[href='/accounts/password_change/']").click()
    page.wait_for_url("**/accounts/password_change/")
    expect(page.locator(".auth-card h1")).to_have_text("Change password")
    assert "Django administration" not in page.content()
    shot(page, "password-change-1280")
    page.fill("#id_old_password", PASSWORD)
    page.fill("#id_new_password1", PASSWORD + "-2")
    page.fill("#id_new_password2", PASSWORD + "-2")
    page.click("form.auth-form button[type=submit]")
    page.wait_for_url("**/accounts/password_change/done/")
    expect(page.locator(".form-ok")).to_be_visible()
    page.set_viewport_size(PHONE)
    shot(page, "password-changed-390")
    page.locator("a[href='/account/']").click()
    page.wait_for_url("**/account/")
