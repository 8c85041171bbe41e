"""The sidebar's usage line in a real browser shows the daily quota that applies to the user
(docs/configuration.md, "Limits per group"): their group's, set while the server runs, and none
when another group of theirs makes them unlimited."""

from __future__ import annotations

import subprocess
import sys

import pytest
from playwright.sync_api import expect

from tests.ui.conftest import ROOT
from tests.ui.test_timeline import assert_clean

pytestmark = pytest.mark.browser


def set_group(ui_env, username: str, group: str, quota: int) -> None:
    code = (
        "from django.contrib.auth.models import Group, User; from chat.models import GroupLimits; "
        f"g, _ = Group.objects.get_or_create(name={group!r}); "
        f"GroupLimits.objects.update_or_create(group=g, defaults={{'daily_token_quota': {quota}}}); "
        f"g.user_set.add(User.objects.get(username={username!r}))"
    )
    subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=ui_env, check=True, timeout=120)


def test_the_sidebar_shows_the_quota_of_the_users_group(user_page, ui_env, shot):
    page = user_page
    line = page.locator("#usage-line")
    expect(line).to_have_text("0 tokens today · 0 this month", timeout=15000)  # the server sets no quota
    set_group(ui_env, page.username, f"team-{page.username}", 25000)
    page.reload()
    expect(page.locator("#usage-line")).to_have_text("0 of 25,000 tokens today · 0 this month", timeout=15000)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        shot(page, f"sidebar-group-quota-{scheme}")
    page.set_viewport_size({"width": 390, "height": 844})
    page.click("#sidebar-toggle")
    expect(page.locator("#usage-line")).to_be_in_viewport()
    shot(page, "sidebar-group-quota-390")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.emulate_media(color_scheme="light")
    # A second group that makes the user unlimited is the more generous: no quota shown.
    set_group(ui_env, page.username, f"free-{page.username}", 0)
    page.reload()
    expect(page.locator("#usage-line")).to_have_text("0 tokens today · 0 this month", timeout=15000)
    assert_clean(page)
