"""The approval card in a real browser (PROTOCOL section 7): bash waits for the user (the default
AGENT_APPROVAL_TOOLS); the card shows the tool and its arguments as text, Approve / Deny with a
reason, is answered from any tab, and survives a reload."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.fakellm import text_reply, tool_call_reply

from .test_timeline import assert_clean, conversation_id, last_turn, send, unique

pytestmark = pytest.mark.browser

SHOTS = Path("/work/shots")


def keep(path: Path, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, SHOTS / f"h-approvals-{name}.png")


def live(page) -> None:
    """The page's socket is open and synced: an answer sent now goes out."""
    expect(page.locator("#app")).to_have_attribute("data-connection", "live")


def card(page):
    return last_turn(page).locator("li.tl-approval")


def test_approve_from_one_tab_updates_the_other_and_a_reload_still_answers(user_page, replies, shot):
    page = user_page
    message = unique("List the workspace")
    # Model text that looks like markup stays text: the card never parses it.
    command = "echo '<b>hi</b>' && ls"
    replies.set(message, tool_call_reply(("bash", {"command": command})), text_reply("Listed."))
    send(page, message)
    cid = conversation_id(page)
    expect(card(page)).to_have_attribute("data-state", "pending")
    expect(card(page).locator(".tool-name")).to_have_text("bash")
    args = card(page).locator("pre.approval-args")
    expect(args).to_have_text(json.dumps({"command": command}, indent=2))
    assert args.locator("b").count() == 0
    expect(last_turn(page).locator(".timeline-summary")).to_contain_text("Waiting for your approval")
    keep(shot(page, "approval-card"), "card")

    # A reload shows the same pending card, still answerable.
    page.reload()
    expect(card(page)).to_have_attribute("data-state", "pending")
    other = page.context.new_page()
    other.goto(f"/?c={cid}")
    expect(card(other)).to_have_attribute("data-state", "pending")
    live(other)

    other.click("li.tl-approval button[data-action=approve]")
    for each in (page, other):
        expect(card(each)).to_have_attribute("data-state", "approved")
        expect(card(each).locator(".approval-outcome")).to_have_text("Approved")
        expect(card(each).locator("button[data-action=approve]")).to_be_hidden()
        expect(last_turn(each).locator(".answer")).to_have_text("Listed.")
    tool = last_turn(page).locator("li.tl-tool")
    expect(tool).to_have_attribute("data-status", re.compile("done|failed"))
    last_turn(page).locator(".timeline-summary").click()  # the finished timeline is folded: open it
    keep(shot(page, "approval-approved"), "approved")
    assert_clean(page)


def test_deny_with_a_reason(user_page, replies, shot):
    page = user_page
    message = unique("Delete everything")
    replies.set(message, tool_call_reply(("bash", {"command": "rm -rf ./*"})), text_reply("Understood, I won't."))
    send(page, message)
    expect(card(page)).to_have_attribute("data-state", "pending")
    page.fill("li.tl-approval input.approval-reason", "too dangerous")
    keep(shot(page, "approval-deny-reason"), "deny-reason")
    page.click("li.tl-approval button[data-action=deny]")
    expect(card(page)).to_have_attribute("data-state", "denied")
    expect(card(page).locator(".approval-outcome")).to_have_text("Denied: too dangerous")
    expect(last_turn(page).locator(".answer")).to_have_text("Understood, I won't.")
    # The denial is the tool's result, and the tool never ran.
    tool = last_turn(page).locator("li.tl-tool")
    expect(tool).to_have_attribute("data-status", "not-run")
    expect(tool.locator(".tool-meta")).to_have_text("not run")
    last_turn(page).locator(".timeline-summary").click()
    tool.locator("summary").click()
    expect(tool.locator(".tool-pre.is-error")).to_contain_text("denied by the user: too dangerous")
    expect(tool.locator(".tool-pre").first).to_contain_text("rm -rf ./*")  # the request's arguments
    keep(shot(page, "approval-denied"), "denied")
    assert_clean(page)


def test_the_card_in_chinese(new_context, ui_server, replies, shot):
    from tests.ui.conftest import PageWatch, sign_up

    page = new_context(locale="zh-CN").new_page()
    page.watch = PageWatch(page, ui_server.base)
    sign_up(page)
    message = unique("中文")
    replies.set(message, tool_call_reply(("bash", {"command": "date"})), text_reply("好的。"))
    send(page, message)
    expect(card(page).locator("button[data-action=approve]")).to_have_text("批准")
    expect(card(page).locator("button[data-action=deny]")).to_have_text("拒绝")
    keep(shot(page, "approval-card-zh"), "card-zh")
    page.click("li.tl-approval button[data-action=deny]")
    expect(card(page).locator(".approval-outcome")).to_have_text("已拒绝")
    assert_clean(page)
