"""bench/costs.py end to end, one round of each cost and two schedules: every figure is there and
positive (never a duration asserted), the fake model's orders of several model calls read as
the runs need them, and the figures make the doc's table."""

from __future__ import annotations

import json

from bench import costs, docs
from bench.cost_runs import gaps, model_calls
from bench.fakemodel import calls_order

from .test_docs import RUN


def _positive(ms: dict) -> bool:
    return ms["n"] > 0 and 0 < ms["p50"] <= ms["p95"]


def test_a_calls_order_calls_a_tool_until_its_last_call_and_counts_the_steers():
    order = {"role": "user", "content": "bench calls=2 tokens=3 rate=0"}
    first = calls_order({"messages": [order]})
    assert first["tool"][:2] == (0, "calculator") and first["prefix"].startswith("c0s0@")
    after = [{"role": "assistant", "content": ""}, {"role": "tool", "content": "2"}, {"role": "user", "content": "x"}]
    second = calls_order({"messages": [order, *after]})
    assert second["tool"] is None and second["prefix"].startswith("c1s1@")
    delegate = calls_order({"messages": [{"role": "user", "content": "bench delegate=kid tokens=4 rate=100"}]})
    assert delegate["tool"] == (0, "agent__kid", {"task": "bench tokens=4 rate=100"})
    assert calls_order({"messages": [{"role": "user", "content": "bench tokens=3 rate=0"}]}) is None


def test_model_calls_are_read_from_the_runs_text():
    frames = [
        (0.0, {"type": "text", "content": "c0s0@10.0000 0@10.0010 1@10.0020 "}),
        (0.0, {"type": "text", "content": "child 0@11.0", "parentRunId": "r"}),
        (0.0, {"type": "text", "content": "c1s1@10.0520 0@10.0530 "}),
    ]
    calls = model_calls(frames)
    assert [(c["k"], c["steers"]) for c in calls] == [(0, 0), (1, 1)]
    assert [round(g, 4) for g in gaps(calls)] == [0.05]


async def test_one_round_of_each_cost_has_every_figure(tmp_path):
    model = costs.FakeModel()
    try:
        result = await costs.measure_sqlite(model, rounds=1)
        result["schedule"] = await costs.measure_schedules(model, schedules=2)
    finally:
        model.stop()
    assert "error" not in result, result.get("error")
    for part in ("queued", "steer", "subagent", "budget", "schedule"):
        assert result[part]["problems"] == [], (part, result[part]["problems"])
    for key in ("user_message", "model", "first_text"):
        assert _positive(result["queued"]["queued_ms"][key]) and _positive(result["queued"]["direct_ms"][key])
    for key in ("steer_to_model_ms", "gap_steered_ms", "gap_ms"):
        assert _positive(result["steer"][key])
    for key in ("first_text", "total"):
        assert _positive(result["subagent"]["delegated_ms"][key]) and _positive(result["subagent"]["direct_ms"][key])
    assert result["budget"]["gap_budget_ms"]["n"] == costs.CALLS - 1 and _positive(result["budget"]["gap_budget_ms"])
    assert _positive(result["budget"]["gap_ms"])
    for side in ("budget_ms", "none_ms"):
        check = result["budget"]["check_ms"][side]
        assert check["n"] == costs.CHECKS and 0 < check["p50"] <= check["p95"]
    assert result["budget"]["check_ms"]["budget_queries"] > result["budget"]["check_ms"]["none_queries"] > 0
    assert _positive(result["queued"]["complete_seen_ms"])
    assert result["schedule"]["fired"] == 2 and _positive(result["schedule"]["delay_ms"])
    assert _positive(result["schedule"]["model_ms"])
    source = docs.take(json.loads(json.dumps({"run": RUN, "costs": result})))["costs"]
    assert "| sub-agent: a 20-token answer by a delegate, send -> first text |" in docs.render("costs", source)
    assert "\n".join(costs.lines(result)).count("p50") >= 5
