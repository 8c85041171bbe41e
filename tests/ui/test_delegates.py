"""A child run on the chat page (docs/protocol.md, "Sub-agents"): no turn of its own, drawn inside
the card of the delegate call that started it as a nested timeline (its agent, task, steps and
answer), folded once done, before a reload and after; the same on the shared view."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.fakellm import FakeLLM, text_reply, tool_call_reply
from tests.ui.test_timeline import assert_clean, conversation_id, last_turn, send, unique

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def agents_llm():
    with FakeLLM() as fake:
        yield fake


def test_a_child_run_is_drawn_in_its_call_s_card(user_page, ui_env, agents_llm, shot):
    page = user_page
    subprocess.run(
        [sys.executable, "-m", "tests.ui.seed_delegates", page.username, agents_llm.base_url],
        cwd=ROOT, env=ui_env, check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    tool = f"agent__helper-{page.username}"

    def respond(body):
        last = body["messages"][-1]
        if body["model"] == "helper-1":
            return text_reply("The helper found 42.")
        if last["role"] == "user":
            return tool_call_reply((tool, {"task": "find the answer"}))
        return text_reply("The boss says: " + last["content"])

    agents_llm.responder = respond
    page.reload()
    page.locator("#agent-select").select_option(label="Boss · boss-1")
    send(page, unique("Delegate it"))
    conversation_id(page)
    for reloaded in (False, True):
        if reloaded:
            page.reload()
        turn = last_turn(page)
        expect(turn.locator(".answer")).to_have_text("The boss says: The helper found 42.", timeout=15000)
        expect(page.locator("article.turn")).to_have_count(1)
        card = turn.locator("li.tl-tool")
        expect(card).to_have_count(1)
        expect(card.locator(".tool-name")).to_have_text(tool)
        if turn.locator("details.timeline").get_attribute("open") is None:
            turn.locator("summary.timeline-summary").click()  # folded once the answer is done
        child = card.locator("details.child-run")
        expect(child).to_have_count(1)
        expect(child).to_have_attribute("data-state", "done")
        if card.locator("details.tool").get_attribute("open") is None:
            card.locator("details.tool > summary").click()  # folded once the child is done
        expect(child.locator(".child-agent")).to_have_text("Helper · helper-1")
        expect(child.locator(".child-task")).to_be_hidden()
        child.locator("summary").click()
        expect(child.locator(".child-task")).to_have_text("find the answer")
        expect(child.locator(".child-answer")).to_have_text("The helper found 42.")
    shot(page, "delegate-child-desktop")
    page.set_viewport_size({"width": 390, "height": 844})
    shot(page, "delegate-child-phone")
    assert_clean(page)
