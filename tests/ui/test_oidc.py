"""Sign-in with OpenID Connect in a real browser, against the real provider of tests/oidc/: the login
page's button, the provider's own login page, the chat with a working socket (a message and the
demo model's answer), and the refusal page of someone outside OIDC_ALLOWED_GROUPS; axe on both pages."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import expect

from tests.e2e.harness import Server, migrate, server_env
from tests.e2e.oidc import Provider
from tests.ui.axe import audit
from tests.ui.conftest import SCREENSHOTS, PageWatch

pytestmark = pytest.mark.browser

SHOTS = SCREENSHOTS / "oidc"
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def oidc_site(ui_tmp):
    provider = Provider(ui_tmp)
    env = server_env(
        database_url=f"sqlite:///{ui_tmp / 'oidc.sqlite3'}",
        llm_base_url="http://127.0.0.1:9/unused",
        AGENT_MODEL="demo",
        AGENT_DEMO_CHUNK_DELAY="0.005",
        AGENT_WORKSPACE_ROOT=str(ui_tmp / "oidc-workspaces"),
        **provider.env(OIDC_LABEL="Acme ID", OIDC_ALLOWED_GROUPS="agents"),
    )
    migrate(env)
    server = Server(env, log_dir=ui_tmp, name="daphne-oidc").start()
    provider.start([server])
    yield server, provider
    provider.stop()
    server.stop()


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), animations="disabled")


def through_the_provider(page, login: str, name: str) -> None:
    """Clicks the button and signs in on the provider's page."""
    page.goto("/accounts/login/")
    page.click("a.oidc-button")
    page.wait_for_selector("input[name=login]")
    shot(page, f"{name}-provider")
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "any")
    page.click("button[type=submit]")


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_sign_in_with_the_provider_lands_in_a_working_chat(browser, oidc_site, size):
    server, provider = oidc_site
    viewport = PHONE if size == "phone" else {"width": 1280, "height": 800}
    context = browser.new_context(viewport=viewport, locale="en-US", base_url=server.base)
    context.set_default_timeout(15000)
    page = context.new_page()
    page.goto("/accounts/login/")
    expect(page.locator("a.oidc-button")).to_have_text("Sign in with Acme ID")
    expect(page.locator("#id_password")).to_be_visible()  # passwords still allowed here
    shot(page, f"login-{size}")
    login = f"ui{uuid.uuid4().hex[:8]}"
    provider.account(login, groups=["agents"], name="Grace Hopper")
    through_the_provider(page, login, f"signin-{size}")
    page.wait_for_url(f"{server.base}/")
    page.wait_for_selector("#message-input")
    # Watched from here on: the provider's development login page fetches things of its own.
    watch = PageWatch(page, server.base)
    expect(page.locator("#account-link")).to_have_text(login)
    page.fill("#message-input", "Hello from an OIDC user")
    page.press("#message-input", "Enter")
    turn = page.locator("article.turn").last
    expect(turn.locator(".bubble")).to_have_text("Hello from an OIDC user")
    expect(turn.locator(".answer")).not_to_be_empty(timeout=20000)
    expect(page.get_by_role("button", name="Stop")).to_be_hidden(timeout=20000)  # the run finished
    shot(page, f"chat-{size}")
    assert (watch.console_errors, watch.dialogs, watch.foreign_requests) == ([], [], [])
    context.close()


def test_the_login_and_refusal_pages_are_accessible(browser, oidc_site):
    server, provider = oidc_site
    context = browser.new_context(viewport={"width": 1280, "height": 800}, locale="en-US", base_url=server.base)
    context.set_default_timeout(15000)
    page = context.new_page()
    page.goto("/accounts/login/")
    audit(page, "oidc-login")
    outsider = f"out{uuid.uuid4().hex[:8]}"
    provider.account(outsider, groups=["visitors"])
    through_the_provider(page, outsider, "refused")
    page.wait_for_url(f"{server.base}/accounts/oidc/callback/**")
    expect(page.locator(".oidc-error")).to_have_text(
        "Your account at Acme ID is not in a group that may use this site. Ask your administrator for access."
    )
    shot(page, "refused-desktop")
    page.set_viewport_size(PHONE)
    shot(page, "refused-phone")
    page.set_viewport_size({"width": 1280, "height": 800})
    audit(page, "oidc-refused")
    context.close()
