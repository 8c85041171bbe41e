"""The agent picker in a real browser: profiles added while the server runs appear after a reload,
a conversation started with one goes to its own model server, each answer names its agent and
model, and switching agents in an open conversation applies to the next answer."""

from __future__ import annotations

import subprocess
import sys

import pytest
from playwright.sync_api import expect

from tests.fakellm import FakeLLM, text_reply
from tests.ui.conftest import ROOT
from tests.ui.test_timeline import assert_clean, conversation_id, last_turn, send, unique

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def research_llm():
    with FakeLLM() as fake:
        yield fake


def seed(env, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "tests.ui.seed_profiles", *args],
        cwd=ROOT, env=env, check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_pick_an_agent_see_it_on_each_answer_and_switch(
    user_page, ui_env, replies, research_llm, fake_llm_server, shot
):
    page = user_page
    picker = page.locator("#agent-select")
    expect(page.locator("#agent-pick")).to_be_hidden()  # the default agent alone: nothing to pick
    # An operator adds two profiles for this user while the server runs.
    seed(ui_env, page.username, fake_llm_server.base_url, research_llm.base_url)
    page.reload()
    expect(page.locator("#agent-pick")).to_be_visible()
    expect(picker.locator("option")).to_have_text(["Default · fake-model", "Coder · code-1", "Researcher · research-1"])
    expect(picker).to_have_value("default")

    picker.select_option(label="Researcher · research-1")
    question = unique("What time is it?")
    research_llm.responder = lambda body: text_reply("It is noon, says the researcher.")
    send(page, question)
    conversation_id(page)
    turn = last_turn(page)
    expect(turn.locator(".answer")).to_have_text("It is noon, says the researcher.", timeout=15000)
    expect(turn.locator(".turn-agent")).to_have_text("Researcher · research-1")
    (request,) = [r for r in research_llm.requests if r["messages"][-1]["content"] == question]
    assert request["model"] == "research-1"
    assert [t["function"]["name"] for t in request["tools"]] == ["current_time"]
    expect(picker).to_have_value(f"researcher-{page.username}")
    shot(page, "h-profiles-answer-label")

    # Switched in the open conversation: the next answer comes from the other agent, labelled so.
    with page.expect_response(lambda response: response.request.method == "PATCH") as patched:
        picker.select_option(label="Coder · code-1")
    assert patched.value.ok and patched.value.json()["agent"] == f"coder-{page.username}"
    expect(page.locator("#notice")).to_be_hidden()
    follow_up = replies.set(unique("And 6*7?"), text_reply("42, says the coder."))
    send(page, follow_up)
    expect(page.locator("article.turn")).to_have_count(2)
    second = last_turn(page)
    expect(second.locator(".answer")).to_have_text("42, says the coder.", timeout=15000)
    expect(second.locator(".turn-agent")).to_have_text("Coder · code-1")
    expect(page.locator("article.turn").first.locator(".turn-agent")).to_have_text("Researcher · research-1")
    coder = [r for r in fake_llm_server.requests if r["messages"][-1]["content"] == follow_up]
    assert [r["model"] for r in coder] == ["code-1"]
    shot(page, "h-profiles-switched")

    # After a reload the conversation still uses its agent, and the picker says so.
    page.reload()
    expect(picker).to_have_value(f"coder-{page.username}")
    expect(last_turn(page).locator(".turn-agent")).to_have_text("Coder · code-1")

    # The operator takes the Coder away from this user: the next message is refused, with the reason.
    seed(ui_env, page.username, "--revoke", f"coder-{page.username}")
    refused = unique("Still there?")
    send(page, refused)
    expect(page.locator("#notice-text")).to_have_text(
        "This conversation's agent is no longer available to you; pick another."
    )
    expect(page.locator("#message-input")).to_have_value(refused)  # given back, not lost
    expect(picker.locator("option:not([disabled])")).to_have_text(["Default · fake-model", "Researcher · research-1"])
    expect(picker.locator("option[disabled]")).to_have_text("Coder · code-1 (unavailable)")
    expect(page.locator("article.turn")).to_have_count(2)
    shot(page, "h-profiles-unavailable")
    with page.expect_response(lambda response: response.request.method == "PATCH") as patched:
        picker.select_option("default")
    assert patched.value.ok and patched.value.json()["agent"] == "default"
    replies.set(refused, text_reply("The default agent answers."))
    expect(page.locator("#send-button")).to_be_enabled()
    page.press("#message-input", "Enter")
    expect(last_turn(page).locator(".answer")).to_have_text("The default agent answers.", timeout=15000)
    expect(last_turn(page).locator(".turn-agent")).to_have_text("Default · fake-model")
    # A new conversation starts from the draft's own choice (the default until one is picked).
    page.click("#new-chat")
    expect(picker).to_have_value("default")
    shot(page, "h-profiles-picker")
    assert_clean(page)
