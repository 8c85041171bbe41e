"""The approval card in a real browser (docs/protocol.md, "Approvals"): bash waits for the user (the default
AGENT_APPROVAL_TOOLS); the card shows the tool and its arguments as text, Approve / Deny with a
reason, is answered from any tab, and survives a reload."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from playwright.sync_api import expect

from tests.e2e.harness import Server, migrate, server_env
from tests.fakellm import text_reply, tool_call_reply
from tests.ui.conftest import PageWatch, sign_up

from .test_timeline import assert_clean, conversation_id, last_turn, send, unique

pytestmark = pytest.mark.browser


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
    shot(page, "approval-card")

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
    shot(page, "approval-approved")
    assert_clean(page)


def test_deny_with_a_reason(user_page, replies, shot):
    page = user_page
    message = unique("Delete everything")
    replies.set(message, tool_call_reply(("bash", {"command": "rm -rf ./*"})), text_reply("Understood, I won't."))
    send(page, message)
    expect(card(page)).to_have_attribute("data-state", "pending")
    page.fill("li.tl-approval input.approval-reason", "too dangerous")
    shot(page, "approval-deny-reason")
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
    shot(page, "approval-denied")
    assert_clean(page)


def test_the_card_in_chinese(new_context, ui_server, replies, shot):
    page = new_context(locale="zh-CN").new_page()
    page.watch = PageWatch(page, ui_server.base)
    sign_up(page)
    message = unique("中文")
    replies.set(message, tool_call_reply(("bash", {"command": "date"})), text_reply("好的。"))
    send(page, message)
    expect(card(page).locator("button[data-action=approve]")).to_have_text("批准")
    expect(card(page).locator("button[data-action=deny]")).to_have_text("拒绝")
    shot(page, "approval-card-zh")
    page.click("li.tl-approval button[data-action=deny]")
    expect(card(page).locator(".approval-outcome")).to_have_text("已拒绝")
    assert_clean(page)


WAITING_FOR_YOU = "The agent is waiting for your decision: approve or deny its request above, or press Stop."


@pytest.fixture
def own_server(ui_tmp, fake_llm_server):
    """A daphne of this test's own, on its own database, so that it can be stopped and started."""
    name = f"restart-{uuid.uuid4().hex[:6]}"
    env = server_env(
        database_url=f"sqlite:///{ui_tmp / f'{name}.sqlite3'}",
        llm_base_url=fake_llm_server.base_url,
        AGENT_TOOLS="calculator,current_time,bash",
        AGENT_STREAM_FLUSH_MS="30",
        AGENT_WORKSPACE_ROOT=str(ui_tmp / f"{name}-workspaces"),
    )
    migrate(env)
    server = Server(env, log_dir=ui_tmp, name=name)
    yield server
    server.stop()


def both_sizes(page, shot, name: str) -> None:
    """Screenshots at 1280x800 and 390x844 (a phone), the page back at 1280x800 after."""
    for width, height in ((1280, 800), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        card(page).scroll_into_view_if_needed()
        shot(page, f"approval-{name}-{width}")
    page.set_viewport_size({"width": 1280, "height": 800})


# Two daphne starts (and a migrate) in one test: on a loaded machine each takes up to a minute.
@pytest.mark.timeout(480)
def test_a_waiting_card_the_socket_down_and_a_server_restart(own_server, browser, replies, shot):
    """While the card waits the composer says the run waits for the user; with the socket down
    Approve and Deny are disabled with the reason; a restart (SIGTERM, as a deploy does; the next
    server takes the run over) expires the request and the card says the server did it."""
    server = own_server.start(timeout=120)  # a loaded machine takes its time to start one
    context = browser.new_context(viewport={"width": 1280, "height": 800}, locale="en-US", base_url=server.base)
    context.set_default_timeout(15000)
    page = context.new_page()
    page.watch = PageWatch(page, server.base)
    sign_up(page)
    message = unique("Clean the build folder")
    replies.set(
        message,
        tool_call_reply(("bash", {"command": "rm -rf build"})),
        text_reply("The server restarted; ask me again."),
    )
    send(page, message)
    cid = conversation_id(page)
    expect(card(page)).to_have_attribute("data-state", "pending")
    expect(page.locator("#composer-reason")).to_have_text(WAITING_FOR_YOU)
    expect(card(page).locator(".approval-offline")).to_be_hidden()
    expect(card(page).locator("button[data-action=approve]")).to_be_enabled()
    both_sizes(page, shot, "waiting")

    server.terminate()
    expect(page.locator("#connection-status")).to_have_attribute("data-mode", re.compile("waiting|connecting|offline"))
    expect(card(page)).to_have_attribute("data-offline", "true")
    for action in ("approve", "deny"):
        expect(card(page).locator(f"button[data-action={action}]")).to_be_disabled()
    expect(card(page).locator(".approval-offline")).to_be_visible()
    expect(card(page).locator(".approval-offline")).to_contain_text(re.compile("Not connected|Connecting"))
    page.fill("li.tl-approval input.approval-reason", "typed while offline")  # still typeable
    both_sizes(page, shot, "socket-down")

    # The server comes back (on a new port: the same database and session) and takes the run over.
    old_base = server.base
    server.start(timeout=120)
    page.watch = PageWatch(page, server.base)
    page.goto(f"{server.base}/?c={cid}")
    turn = last_turn(page)
    expect(turn.locator(".answer")).to_have_text("The server restarted; ask me again.", timeout=30000)
    expect(card(page)).to_have_attribute("data-state", "expired")
    outcome = card(page).locator(".approval-outcome")
    expect(outcome).to_have_text("Not run: the server restarted while the request waited for your decision")
    assert "nobody" not in card(page).inner_text()
    resumed = turn.locator("li.tl-error")
    expect(resumed.locator(".tl-title > span").first).to_have_text("The server restarted; the run went on where it was")
    expect(resumed.locator(".code-badge")).to_have_text("INTERRUPTED")
    expect(page.locator("#composer-reason")).to_be_hidden()
    both_sizes(page, shot, "after-restart")
    # The page on the old address went on asking it until it was left: not foreign.
    old_host = old_base.split("://", 1)[1]
    foreign = [url for url in page.watch.foreign_requests if url.split("://", 1)[1].split("/", 1)[0] != old_host]
    assert page.watch.dialogs == [] and foreign == []
    context.close()
