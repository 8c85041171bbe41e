"""The run inspector in a real browser: a real run (a retry, a failed tool call) on its run page,
and the dashboard; no console errors (a CSP violation would be one). Screenshots in artifacts/screenshots
(docs/using.md's are copies of inspector-run.png and inspector-dashboard.png, taken by hand: a
test run never rewrites a tracked file)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from playwright.sync_api import expect

from tests.fakellm import text_reply, tool_call_reply
from tests.ui.conftest import ROOT
from tests.ui.test_timeline import assert_clean, last_turn, send, unique

pytestmark = pytest.mark.browser

FAILING = {"status": 503, "body": {"error": {"message": "upstream overloaded"}}}


def with_usage(reply: dict, prompt: int, completion: int) -> dict:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    return {**reply, "chunks": [*reply["chunks"], {"usage": usage}]}


def test_run_page_and_dashboard(user_page, replies, ui_env, shot):
    page = user_page
    message = unique("Inspect me")
    replies.set(
        message,
        FAILING,
        with_usage(
            tool_call_reply(("calculator", {"expression": "6*7"}), ("calculator", {"expression": "1/0"})), 420, 38
        ),
        # Paced: the answer is stored as several text deltas, which the run page folds into one row.
        with_usage(text_reply("6 × 7 is **42**; 1/0 is undefined.", piece=6, delay=0.05), 510, 24),
    )
    send(page, message)
    turn = last_turn(page)
    expect(turn.locator(".answer")).to_contain_text("is undefined", timeout=20000)
    expect(turn).not_to_have_class(re.compile("is-running"), timeout=15000)
    # The user says the answer was bad; staff read why on the run's page.
    feedback = turn.locator(".feedback")
    feedback.get_by_role("button", name="Bad answer").click()
    feedback.get_by_role("textbox", name="Comment on the answer").fill("1/0 should say why it is undefined.")
    feedback.get_by_role("button", name="Send").click()
    expect(feedback.locator(".feedback-note")).to_have_text("Thanks for the feedback.")
    subprocess.run(
        [sys.executable, "-m", "tests.ui.seed_inspector", page.username],
        cwd=ROOT,
        env=ui_env,
        check=True,
        capture_output=True,
        timeout=120,
    )

    # Staff now: the chat header links to the inspector, to the open conversation's one run.
    page.reload()
    expect(page.locator("a.inspector-link")).to_have_attribute("href", re.compile(r"/inspect/\?conversation="))
    page.click("a.inspector-link")
    page.wait_for_url("**/inspect/?conversation=*")
    expect(page.locator("tr.run-row")).to_have_count(1)
    page.goto("/inspect/")
    expect(page.locator("tr.run-row")).to_have_count(50)  # the first page of all users' runs
    page.select_option("#id_sort", "-duration")
    page.click("form.inspect-filters button[type=submit]")
    page.wait_for_url("**sort=-duration**")
    shot(page, "inspector-runs")
    page.goto(f"/inspect/?user={page.username}")
    rows = page.locator("tr.run-row")
    expect(rows).to_have_count(1)
    expect(rows.first.locator(".rating-down")).to_be_visible()
    # The Feedback cell is a cell of the row like the others (it took the chat's flex `.feedback`).
    cells = rows.first.evaluate(
        """(tr) => [...tr.cells].map((td) => {
             const box = td.getBoundingClientRect();
             return [getComputedStyle(td).display, Math.round(box.top), Math.round(box.height)];
           })"""
    )
    columns = rows.first.evaluate("(tr) => tr.closest('table').tHead.rows[0].cells.length")
    assert len(cells) == columns and {tuple(cell) for cell in cells} == {tuple(cells[0])}, cells
    assert cells[0][0] == "table-cell"
    shot(page, "inspector-runs-feedback")
    rows.first.locator("a").click()
    page.wait_for_url(re.compile(r".*/inspect/runs/[0-9a-f-]{36}/$"))

    figures = page.locator("dl.figures")
    expect(figures).to_contain_text("succeeded")
    expect(figures).to_contain_text("992")  # tokens: 420 + 38 + 510 + 24
    expect(figures.locator(".rating-down")).to_be_visible()
    expect(page.locator(".rating-comment")).to_contain_text("1/0 should say why it is undefined.")
    expect(page.locator(".chart rect")).to_have_count(5)  # 3 model call attempts, 2 tool calls
    expect(page.locator(".chart rect.k-model-error")).to_have_count(1)
    expect(page.locator(".chart rect.k-tool-error")).to_have_count(1)
    expect(page.locator("tr.row-retry")).to_have_count(1)
    # A bar's details: its hover title, and a click that brings its details into view.
    failed_tool = page.locator(".chart a", has=page.locator("rect.k-tool-error"))
    expect(failed_tool.locator("title")).to_contain_text("calculator")
    failed_tool.locator("rect").click()
    target = page.locator("details.tool-call:target")
    expect(target).to_have_class(re.compile("tool-error"))
    expect(target.locator("pre.payload").first).to_have_text('{\n  "expression": "1/0"\n}')
    expect(target).to_contain_text("division by zero")
    expect(page.locator("table.events tbody tr").first).to_contain_text("user_message")
    # The answer's deltas: one row, their joined text and count; opened, each frame.
    folded = page.locator("table.events tr.folded", has=page.locator("td", has_text=re.compile(r"^text")))
    expect(folded).to_have_count(1)
    expect(folded.locator(".joined")).to_have_text("6 × 7 is **42**; 1/0 is undefined.")
    count = int(folded.locator(".tag").inner_text().lstrip("×"))
    assert count >= 2
    expect(folded.locator("pre.payload").first).to_be_hidden()
    folded.locator("summary").click()
    expect(folded.locator("pre.payload")).to_have_count(count)
    expect(folded.locator("pre.payload").first).to_be_visible()
    folded.locator("summary").click()
    # The conversation by its title, linked.
    expect(page.locator("a.conversation-link")).to_have_text(f"“{message}”")
    expect(page.locator("a.conversation-link")).to_have_attribute("href", re.compile(r"^/admin/chat/conversation/"))
    # The replay: the chat page's own Turn, drawn from the run's events.
    replay = page.locator("#replay article.turn")
    expect(replay.locator(".answer")).to_contain_text("6 × 7 is 42; 1/0 is undefined.")
    expect(replay.locator(".answer strong")).to_have_text("42")
    expect(replay.locator("li.tl-tool")).to_have_count(2)
    expect(replay.locator("li.tl-error")).to_have_count(1)
    expect(replay.locator(".bubble")).to_have_text(message)
    # Read, not acted on: staff do not rate another user's answer, nor edit or regenerate it.
    expect(replay.locator(".feedback")).to_be_hidden()
    for name in ("Good answer", "Bad answer", "Regenerate", "Edit"):
        expect(replay.get_by_role("button", name=name)).to_have_count(0)
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, "inspector-run", full_page=True)
    page.set_viewport_size({"width": 1280, "height": 800})
    shot(page, "inspector-run-1280", full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    shot(page, "inspector-run-390", full_page=True)
    page.set_viewport_size({"width": 1280, "height": 820})

    page.goto("/inspect/dashboard/")
    expect(page.locator(".chart")).to_have_count(4)
    expect(page.locator("dl.figures")).to_contain_text("Failure rate")
    expect(page.locator(".chart rect.k-failed").first).to_be_visible()
    shot(page, "inspector-dashboard", full_page=True)
    assert_clean(page)
