"""docs/performance.md's table of the costs of issue 55's features (bench/costs.py): each cost
beside what it is measured against, p50 / p95, and the difference of the p50s."""

from __future__ import annotations

from .doc_tables import Block, _table, figure, millis


def take_costs(results: dict) -> dict | None:
    found = results.get("costs")
    if not found or "error" in found or "error" in found.get("schedule", {}):
        return None
    return {"costs": found}


def _cell(ms: dict) -> str:
    return f"{millis(ms['p50']).removesuffix(' ms')} / {millis(ms['p95'])}"


def _added(ms: float) -> str:
    return f"{ms:+g} ms"


def render_costs(source: dict) -> list[str]:
    c = source["costs"]
    q, s, a, b, sc = (figure(c, k) for k in ("queued", "steer", "subagent", "budget", "schedule"))
    rows = []
    for key, what in (("model", "model request"), ("first_text", "first text")):
        mine, theirs = q["queued_ms"][key], q["direct_ms"][key]
        rows.append(
            [
                f"queued message: the running run's `complete` -> the queued run's {what}",
                _cell(mine),
                f"a direct message: send -> {what}",
                _cell(theirs),
                _added(mine["p50"] - theirs["p50"]),
            ]
        )
    rows.append(
        [
            f"steer (sent during a {s['tokens']}-token stream): the model call's last token -> the next model "
            "request, holding it",
            _cell(s["gap_steered_ms"]),
            "the same gap without a steer",
            _cell(s["gap_ms"]),
            _added(s["added_ms"]),
        ]
    )
    rows.append(
        [
            "steer: its send -> the model request holding it",
            _cell(s["steer_to_model_ms"]),
            "the stream it was sent during: its length, from its first text",
            f"{s['tokens'] * 10} ms (nominal)",
            "",
        ]
    )
    for key, what in (("first_text", "first text"), ("total", "top-level `complete`")):
        rows.append(
            [
                f"sub-agent: a {a['tokens']}-token answer by a delegate, send -> {what}",
                _cell(a["delegated_ms"][key]),
                "the same answer by the agent itself",
                _cell(a["direct_ms"][key]),
                _added(a["added_ms"][key]),
            ]
        )
    rows.append(
        [
            f"schedule ({sc['schedules']} `at` slots over two ticks, {sc['stack']}): due -> its run's "
            f"`user_message` (max {millis(sc['delay_ms']['max'])}; {sc['fired']} of {sc['schedules']} fired)",
            _cell(sc["delay_ms"]),
            "the scheduler's tick (AGENT_SCHEDULE_POLL_SECONDS), each process",
            f"{sc['tick_s']:g} s",
            "",
        ]
    )
    rows.append(
        [
            f"budget check: a model call -> the next model request, a user with a budget ({b['calls']} calls a run)",
            _cell(b["gap_budget_ms"]),
            "a user with no budget",
            _cell(b["gap_ms"]),
            _added(b["added_ms"]),
        ]
    )
    if check := b.get("check_ms"):
        mine, theirs = check["budget_ms"], check["none_ms"]
        rows.append(
            [
                f"budget check itself, timed in a Django process ({mine['n']} checks): a user with a budget "
                f"({check['budget_queries']} queries)",
                f"{mine['p50']:.2f} / {mine['p95']:.2f} ms",
                f"a user with no budget: the check runs and finds none ({check['none_queries']} queries)",
                f"{theirs['p50']:.2f} / {theirs['p95']:.2f} ms",
                f"{mine['p50'] - theirs['p50']:+.2f} ms",
            ]
        )
    head = ["cost", "p50 / p95", "against", "p50 / p95", "added (p50)"]
    return _table(head, rows) + ["", f"{c['rounds']} rounds on {c['stack']}, the feature and its baseline in turn."]


BLOCKS = {"costs": Block(take_costs, render_costs)}
