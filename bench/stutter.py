"""Stutter as the user sees it: the longest gap between screen updates of a streaming answer.

`python -m bench.stutter` starts a fresh SQLite + daphne stack and the bench model,
opens the chat page in headless Chromium (Playwright, as tests/ui), sends a bench
order of TOKENS tokens at RATE tokens/s, and samples the answer's text length on
every animation frame (what reaches the screen). From the first text to the
last: the longest gap between two frames that changed the answer, its p99, and
screen updates per second. RUNS runs, each figure's median and range.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

from . import clients
from .server import FakeModel, Stack

TOKENS = 500
RATE = 100
RUNS = 3
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")

# Runs in the page: the time of every animation frame at which the last answer's length changed.
SAMPLER = """
window.__updates = [];
(() => {
  let shown = -1;
  const tick = (now) => {
    const answers = document.querySelectorAll("article.turn .answer");
    const answer = answers[answers.length - 1];
    const length = answer ? answer.textContent.length : 0;
    if (length !== shown && length > 0) window.__updates.push([now, length]);
    shown = length;
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})();
"""


def gaps_of(updates: list[list[float]]) -> dict:
    times = [t for t, _ in updates]
    gaps = sorted(b - a for a, b in zip(times, times[1:]))
    span = (times[-1] - times[0]) / 1000 if len(times) > 1 else float("nan")
    return {
        "longest_gap_ms": round(gaps[-1], 1) if gaps else None,
        "gap_p99_ms": round(gaps[min(len(gaps) - 1, int(0.99 * len(gaps)))], 1) if gaps else None,
        "updates_per_s": round((len(times) - 1) / span, 1) if gaps else None,
    }


def one_run(page, base: str, conversation: str, tokens: int, rate: float) -> dict:
    page.goto(f"{base}/?c={conversation}")
    page.wait_for_selector("#message-input")
    page.evaluate(SAMPLER)
    page.fill("#message-input", clients.order(tokens, rate))
    page.wait_for_function("!document.querySelector('#send-button').disabled")
    page.press("#message-input", "Enter")
    last = f"{tokens - 1}@"
    page.wait_for_function(
        f"[...document.querySelectorAll('article.turn .answer')].some(a => a.textContent.includes({last!r}))",
        timeout=30_000 + 3_000 * tokens / rate,
    )
    updates = page.evaluate("window.__updates")
    text = page.evaluate(
        "(() => { const a = document.querySelectorAll('article.turn .answer'); return a[a.length - 1].textContent })()"
    )
    if len(text.split()) != tokens:
        raise RuntimeError(f"the page shows {len(text.split())} of {tokens} tokens")
    return gaps_of(updates)


def measure(*, tokens: int = TOKENS, rate: float = RATE, runs: int = RUNS, **stack_options) -> dict:
    from playwright.sync_api import sync_playwright

    model = FakeModel()
    stack = Stack(name="stutter", **stack_options)
    results = []
    try:
        stack.start(model)
        seeded = stack.seed(op="users", count=1, conversations=runs)["users"][0]
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"])
            # The page's CSP forbids string evaluation, which wait_for_function uses.
            context = browser.new_context(viewport={"width": 1280, "height": 820}, bypass_csp=True)
            host = stack.base().split("//", 1)[1].split(":")[0]
            context.add_cookies([{"name": "sessionid", "value": seeded["session"], "domain": host, "path": "/"}])
            page = context.new_page()
            for conversation in seeded["conversations"]:
                results.append(one_run(page, stack.base(), conversation, tokens, rate))
            browser.close()
    finally:
        stack.stop()
        model.stop()
    summary = {}
    for key in results[0]:
        values = [r[key] for r in results if r[key] is not None]
        summary[key] = {"median": round(statistics.median(values), 1), "min": min(values), "max": max(values)}
    return {"tokens": tokens, "rate": rate, "runs": results, "summary": summary}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.stutter", description=__doc__)
    parser.add_argument("--tokens", type=int, default=TOKENS)
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--flush-ms", type=int, default=None)
    parser.add_argument("--max-flush-ms", type=int, default=None)
    args = parser.parse_args()
    result = measure(tokens=args.tokens, runs=args.runs, flush_ms=args.flush_ms, max_flush_ms=args.max_flush_ms)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
