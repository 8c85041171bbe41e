"""The schedules and triggers pages in a real browser (docs/protocol.md, "Schedules", "Triggers"):
a schedule made, its next run shown, paused and resumed; a trigger made, its secret shown once
(the address bar reset, a reload shows it no more) and then calling it; the sidebar's tag on the
conversation a schedule's fire and a trigger's call started. axe-core at both widths, both
schemes; screenshots under artifacts/."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import expect

from tests.fakellm import text_reply
from tests.ui.axe import audit
from tests.ui.conftest import SCREENSHOTS
from tests.ui.test_timeline import assert_clean, unique

pytestmark = pytest.mark.browser

SHOTS = SCREENSHOTS / "schedules"
REFUSED = "Failed to load resource: the server responded with a status of 400 (Bad Request)"
WIDTHS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}


def shoot(page, state: str) -> None:
    """The page at both widths, whole; and nothing wider than the screen."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size
    for name, viewport in WIDTHS.items():
        page.set_viewport_size(viewport)
        overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{state} at {name}: {overflow}px wider than the screen"
        page.screenshot(path=str(SHOTS / f"{state}-{name}.png"), full_page=True, animations="disabled")
    page.set_viewport_size(size)


def next_weekday_eight(now: datetime, zone: str) -> str:
    """`0 8 * * 1-5` in `zone`: its next fire after `now`, as the page writes it (UTC)."""
    tz = ZoneInfo(zone)
    day = now.astimezone(tz).date()
    while True:
        fire = datetime(day.year, day.month, day.day, 8, tzinfo=tz)
        if fire > now and fire.weekday() < 5:
            return fire.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        day += timedelta(days=1)


def make_schedule(page, *, name: str, prompt: str, timing: str, value: str, zone: str = "UTC") -> None:
    page.goto("/schedules/")
    page.fill("#schedule-name", name)
    page.fill("#schedule-prompt", prompt)
    page.select_option("#schedule-timing", timing)
    page.fill("#schedule-timing-value", value)
    page.fill("#schedule-timezone", zone)
    page.click("form.schedule-form button[type=submit]")
    expect(page.locator("p.form-ok")).to_have_text("The schedule is made.")


def make_trigger(page, *, name: str, prompt: str) -> tuple[str, str]:
    """A trigger made on its page: (its URL, its secret), as the answer that made it shows them."""
    page.goto("/schedules/triggers/")
    page.fill("#trigger-name", name)
    page.fill("#trigger-prompt", prompt)
    page.click("form.schedule-form button[type=submit]")
    expect(page.locator(".trigger-new")).to_be_visible()
    return page.input_value("#trigger-new-url"), page.input_value("#trigger-new-secret")


def call_hook(url: str, secret: str, body: str) -> dict:
    request = urllib.request.Request(
        url,
        data=body.encode(),
        method="POST",
        headers={"Authorization": f"Bearer {secret}", "Content-Type": "text/plain"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - the test's own server
        assert response.status == 202
        return json.loads(response.read())


def test_a_schedule_is_made_shows_its_next_run_and_is_paused_and_resumed(user_page):
    page = user_page
    page.goto("/schedules/")
    expect(page.get_by_text("No schedule yet.")).to_be_visible()
    expect(page.locator(".page-tabs [aria-current=page]")).to_have_text("Schedules")
    make_schedule(
        page, name="Weekday digest", prompt="Summarize the overnight alerts", timing="cron", value="0 8 * * 1-5",
        zone="Europe/Paris",
    )  # fmt: skip
    row = page.locator("tr.schedule-row", has_text="Weekday digest")
    next_run = row.locator("td").nth(2)
    expect(next_run).to_have_text(next_weekday_eight(datetime.now(UTC), "Europe/Paris"))
    expect(row.locator("td").nth(1)).to_contain_text("0 8 * * 1-5")
    audit(page, "schedules-page")
    shoot(page, "schedules-made")

    row.get_by_role("button", name="Pause").click()
    expect(row.locator(".conv-tag")).to_have_text("paused")
    expect(next_run).to_have_text("—")
    expect(row.get_by_role("button", name="Resume")).to_be_visible()
    shoot(page, "schedules-paused")
    row.get_by_role("button", name="Resume").click()
    expect(next_run).to_have_text(next_weekday_eight(datetime.now(UTC), "Europe/Paris"))
    expect(row.locator(".conv-tag")).to_have_count(0)

    assert_clean(page)

    # A refused field says which, and keeps what was typed.
    page.fill("#schedule-prompt", "Every few seconds")
    page.select_option("#schedule-timing", "every")
    page.fill("#schedule-timing-value", "5")
    page.click("form.schedule-form button[type=submit]")
    expect(page.locator("p.form-error")).to_contain_text("every")
    expect(page.locator("#schedule-prompt")).to_have_value("Every few seconds")
    assert page.watch.console_errors == [REFUSED]  # the form's answer, 400, as the browser logs it


def test_a_trigger_shows_its_secret_once_and_its_runs(user_page, replies):
    page = user_page
    page.goto("/schedules/triggers/")
    expect(page.get_by_text("No trigger yet.")).to_be_visible()
    expect(page.locator("#trigger-prompt")).to_have_value("{{payload}}")
    url, secret = make_trigger(page, name="Ticket triage", prompt="Triage this ticket: {{payload}}")
    assert re.fullmatch(r"http://[^/]+/hooks/[0-9a-f-]{36}/", url), url
    assert secret.startswith("hk_") and len(secret) > 40
    expect(page.get_by_text("Copy it now: it is not shown again.")).to_be_visible()
    assert page.url.endswith("/schedules/triggers/")  # a reload reads the list, not the POST again
    audit(page, "triggers-new")
    shoot(page, "triggers-new")

    page.reload()
    expect(page.locator(".trigger-new")).to_have_count(0)
    assert secret not in page.content()
    row = page.locator("tr.trigger-row", has_text="Ticket triage")
    expect(row.locator(".trigger-url")).to_have_text(url)
    assert page.locator("tr.trigger-row").count() == 1  # the reload made no second

    ticket = unique("Printer on fire")
    replies.set(f"Triage this ticket: {ticket}", text_reply("Call the fire brigade."))
    started = call_hook(url, secret, ticket)
    deadline = time.monotonic() + 30
    while row.locator(".schedule-runs li", has_text="succeeded").count() == 0:
        assert time.monotonic() < deadline, "the trigger's run is not listed as done"
        time.sleep(0.5)
        page.reload()
    expect(row.locator(f'.schedule-runs a[href="/?c={started["conversationId"]}"]')).to_be_visible()
    audit(page, "triggers-page")
    shoot(page, "triggers-listed")

    assert_clean(page)

    row.get_by_role("button", name="Disable").click()
    expect(row.locator(".conv-tag")).to_have_text("disabled")
    row.get_by_role("link", name="Edit Ticket triage").click()
    expect(page.locator("#trigger-prompt")).to_have_value("Triage this ticket: {{payload}}")
    page.fill("#trigger-prompt", "no placeholder")
    page.click("form.schedule-form button[type=submit]")
    expect(page.locator("p.form-error")).to_contain_text("{{payload}}")
    page.goto("/schedules/triggers/")
    row.get_by_role("button", name="Delete Ticket triage").click()
    expect(page.get_by_text("No trigger yet.")).to_be_visible()
    assert page.watch.console_errors == [REFUSED]


def test_the_sidebar_tags_a_conversation_a_schedule_or_a_trigger_started(user_page, replies):
    page = user_page
    prompt = replies.set(unique("What happened overnight?"), text_reply("Nothing much."))
    soon = (datetime.now(UTC) + timedelta(seconds=2)).isoformat(timespec="seconds")
    make_schedule(page, name="Overnight", prompt=prompt, timing="at", value=soon)
    url, secret = make_trigger(page, name="Alert hook", prompt="{{payload}}")
    call_hook(url, secret, replies.set(unique("Disk full on db-1"), text_reply("Clean the logs.")))

    page.goto("/")
    scheduled = page.locator(".conv-item", has=page.locator(".conv-tag-schedule"))
    triggered = page.locator(".conv-item", has=page.locator(".conv-tag-trigger"))
    deadline = time.monotonic() + 40  # the schedule's slot, then the next poll (every 5 s)
    while scheduled.count() == 0:
        assert time.monotonic() < deadline, "no conversation of the schedule in the sidebar"
        time.sleep(1)
        page.reload()
    expect(scheduled).to_have_count(1)
    expect(scheduled.locator(".conv-title")).to_have_text("Overnight")
    expect(scheduled.locator(".conv-tag")).to_have_text("Scheduled")
    expect(scheduled.locator(".conv-tag")).to_have_attribute("title", "Started by a schedule")
    expect(triggered).to_have_count(1)
    expect(triggered.locator(".conv-title")).to_have_text("Alert hook")
    expect(triggered.locator(".conv-tag")).to_have_text("Triggered")
    expect(triggered.locator(".conv-tag")).to_have_attribute("title", "Started by a trigger")
    audit(page, "sidebar-started-tags")
    shoot(page, "sidebar-tags")
    page.set_viewport_size(WIDTHS["phone"])
    page.click("#sidebar-toggle")
    expect(triggered.locator(".conv-tag")).to_be_visible()
    page.screenshot(path=str(SHOTS / "sidebar-tags-phone-open.png"), animations="disabled")
    triggered.locator(".conv-link").click()
    expect(page.locator("article.turn .answer").last).to_have_text("Clean the logs.")
    assert_clean(page)
