"""The benchmark's own arithmetic: growth classification, the table and the plot of its figures."""

from __future__ import annotations

import math

import pytest

from bench import growth, plot

SIZES = [10, 100, 1_000, 10_000]


@pytest.mark.parametrize(
    ("values", "kind"),
    [
        ([5.0, 5.2, 4.9, 5.1], "flat"),
        ([10 * math.log10(s) for s in SIZES], "log"),
        ([0.3 * s for s in SIZES], "linear"),
        ([0.001 * s * s for s in SIZES], "superlinear"),
    ],
)
def test_growth_classifies_by_the_log_log_slope(values, kind):
    found, b = growth.growth(SIZES, values)
    assert found == kind
    if kind == "linear":
        assert b == pytest.approx(1.0, abs=0.01)


def test_growth_needs_two_positive_points():
    assert growth.growth([10], [1.0])[0] == "-"
    assert growth.growth([10, 100], [0.0, 0.0])[0] == "-"


def _figures(factor: float) -> dict:
    ms = lambda v: {"p50": v, "p95": 2 * v, "n": 5}  # noqa: E731
    return {
        "database": "sqlite",
        "label": "sqlite+memory, 1x daphne",
        "length": [
            {
                "turns": n,
                "events": 7 * n,
                "run_start_ms": ms(20.0),
                "memory_ms": ms(factor * n),
                "replay_ms": ms(factor * 3 * n),
                "reconnect_ms": ms(8.0),
                "memory_messages": 4 * n,
            }
            for n in SIZES
        ],
        "table": [
            {
                "conversations": e // 100,
                "events": e,
                "users": 1000,
                "seed_s": 1.0,
                "list_ms": ms(12.0),
                "search_ms": ms(factor * e / 1000),
                "search_common_ms": ms(30.0),
                "replay_ms": ms(15.0),
                "run_start_ms": ms(21.0),
            }
            for e in (10_000, 100_000, 1_000_000)
        ],
    }


def test_table_states_each_curves_growth():
    text = growth.table([_figures(0.5)])
    lines = {line.split("  ")[1].strip(): line for line in text.splitlines() if line.startswith("  ") and "(" in line}
    assert "flat" in lines["message -> model request"] and "linear (1.0)" in lines["memory derivation"]
    assert "linear (1.0)" in lines["search (rare word)"] and "flat" in lines["conversation list"]


def test_plot_writes_a_png(tmp_path):
    path = plot.growth([_figures(0.5), {**_figures(0.2), "database": "postgres"}], tmp_path / "growth.png")
    assert path.read_bytes().startswith(b"\x89PNG")
    assert path.stat().st_size > 20_000


def test_growth_leaves_out_the_smallest_size_where_a_fixed_cost_hides_the_rest():
    # 100 ms of fixed cost, then 1 ms a turn: over all four points the slope would be ~0.6.
    kind, b = growth.growth(SIZES, [100 + s for s in SIZES])
    assert kind == "linear" and b > 0.75
