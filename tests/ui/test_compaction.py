"""Compaction in a real browser (docs/protocol.md, "Compaction"): a summary of earlier turns is a
folded row after the newest turn it summarized, opening to the summary as plain text; the
composer's gauge says how full the agent's context is; both drawn from the stored events."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.ui.axe import violations
from tests.ui.test_composer import shoot
from tests.ui.test_timeline import assert_clean

pytestmark = pytest.mark.browser

SUMMARY = "The user plans a trip to Kyoto in May. <b>not bold</b>"


def exported() -> str:
    """Three turns; the third's run summarized the first."""
    events = []

    def add(run: str, **payload) -> int:
        events.append({"seq": len(events) + 1, "runId": run, **payload})
        return len(events)

    first = add("r1", type="user_message", content="Where should I go in May?", parentSeq=None)
    add("r1", type="text", content="Kyoto is lovely in May.")
    through = add("r1", type="complete", status="succeeded", context={"tokens": 900, "limit": 32000})
    second = add("r2", type="user_message", content="How many days?", parentSeq=first)
    add("r2", type="text", content="Four or five.")
    second_done = add("r2", type="complete", status="succeeded", context={"tokens": 1800, "limit": 32000})
    add("r3", type="user_message", content="And the budget?", parentSeq=second)
    add(
        "r3",
        type="compaction",
        summary=SUMMARY,
        throughSeq=through,
        previousSeq=None,
        turns=1,
        tokensBefore=27000,
        tokensAfter=24000,
        trigger="auto",
    )
    add("r3", type="text", content="About 150,000 yen.")
    add("r3", type="complete", status="succeeded", context={"tokens": 24000, "limit": 32000})
    # A compaction asked for (docs/protocol.md, "Compaction", on demand): a run that is no turn.
    add(
        "r4",
        type="compaction",
        summary="Kyoto in May, four or five days.",
        throughSeq=second_done,
        previousSeq=None,
        turns=2,
        tokensBefore=1800,
        tokensAfter=400,
        trigger="manual",
    )
    add("r4", type="complete", status="succeeded")
    return json.dumps({"conversation": {"title": "Kyoto"}, "events": events})


def test_a_summary_row_after_the_summarized_turn_and_the_context_gauge(user_page):
    page = user_page
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    made = page.request.post(
        "/api/conversations/import/",
        data=exported(),
        headers={"X-CSRFToken": token, "Content-Type": "application/json"},
    )
    assert made.status == 201, made.text()
    page.goto(f"/?c={made.json()['id']}")
    turns = page.locator("article.turn")
    expect(turns).to_have_count(3)
    row = turns.nth(0).locator(".compaction-row")
    expect(row).to_have_count(1)
    expect(turns.nth(1).locator(".compaction-row .compaction-count")).to_have_text(" · 2 turns")  # the manual one
    expect(turns.nth(2).locator(".compaction-row")).to_have_count(0)
    expect(row.locator("summary")).to_have_text("Earlier conversation summarized · 1 turn")
    expect(row.locator(".compaction-summary")).to_be_hidden()
    row.locator("summary").click()
    expect(row.locator(".compaction-summary")).to_have_text(SUMMARY)  # model output: text, never markup
    assert row.locator(".compaction-summary b").count() == 0

    gauge = page.locator("#context-gauge")
    expect(gauge).to_be_visible()
    expect(gauge).to_have_attribute("aria-valuenow", "75")
    expect(gauge).to_have_attribute("aria-valuetext", "24,000 of 32,000 tokens of context")
    expect(gauge).to_have_attribute("data-level", "mid")
    expect(gauge.locator(".gauge-label")).to_have_text("75%")
    assert violations(page) == []
    shoot(page, "compaction")

    # A draft has no context yet.
    page.click("#new-chat")
    expect(gauge).to_be_hidden()
    assert_clean(page)
