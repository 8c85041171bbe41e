"""A budget's notice in a real browser (docs/protocol.md, "Budgets"): above the composer, once a
budget the user is held to is 80% used, then a clear message when it is used up; from
/api/usage/, after each answer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.fakellm import text_reply
from tests.ui.axe import violations
from tests.ui.test_composer import shoot
from tests.ui.test_timeline import assert_clean, last_turn, send, unique

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]


def used(text: str, tokens: int) -> dict:
    """An answer whose call reports `tokens` tokens."""
    reply = text_reply(text)
    reply["chunks"].append({"usage": {"prompt_tokens": tokens, "completion_tokens": 0, "total_tokens": tokens}})
    return reply


def test_a_notice_at_80_percent_and_a_message_when_the_budget_is_used_up(user_page, ui_env, replies):
    page = user_page
    subprocess.run(
        [sys.executable, "manage.py", "shell", "-c",
         "from django.contrib.auth import get_user_model; from chat.models import Budget; "
         f"Budget.objects.create(scope='user', user=get_user_model().objects.get(username={page.username!r}), "
         "period='day', tokens=1000)"],
        cwd=ROOT, env=ui_env, check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    page.reload()
    note = page.locator("#budget-note")
    expect(page.locator("#usage-line")).to_be_visible()
    expect(note).to_be_hidden()

    send(page, replies.set(unique("Spend most of it"), used("Most of it.", 850)))
    expect(last_turn(page).locator(".answer")).to_have_text("Most of it.")
    expect(note).to_have_text("You have used 85% of your budget for this day.")
    expect(note).to_have_attribute("data-level", "near")
    assert violations(page) == []
    shoot(page, "budget-near")

    send(page, replies.set(unique("Spend the rest"), used("The rest.", 200)))
    expect(last_turn(page).locator(".answer")).to_have_text("The rest.")
    expect(note).to_contain_text("Your budget for this day is used up; new messages are refused until")
    expect(note).to_have_attribute("data-level", "exhausted")
    shoot(page, "budget-exhausted")
    assert_clean(page)
