"""The soak's own arithmetic: the slopes that say whether memory grows, and RSS by mapping."""

from __future__ import annotations

import os

import pytest

from bench.procs import rss_by_kind, rss_bytes
from bench.soak import SAMPLE_SECONDS, WINDOW_SECONDS, slope_per_hour, window_slopes


def samples(rise_per_hour: list[float], seconds: float) -> list[dict]:
    """`rss` sampled every 10 s, rising by each window's own rate, for `seconds`."""
    out, value, t = [], 100.0, 0.0
    while t < seconds:
        out.append({"t": t, "rss": value})
        rate = rise_per_hour[min(int(t // WINDOW_SECONDS), len(rise_per_hour) - 1)]
        value += rate * SAMPLE_SECONDS / 3600
        t += SAMPLE_SECONDS
    return out


def test_each_whole_window_has_its_own_slope_and_a_cut_last_window_has_none():
    # Three whole windows (slowing growth, then none) and a fourth cut after two minutes.
    found = window_slopes(samples([50, 10, 0, 30], 3 * WINDOW_SECONDS + 120), "rss")
    assert found == pytest.approx([50, 10, 0], abs=0.5)


def test_the_run_slope_reads_only_its_second_half():
    # Warm-up growth in the first half must not count: the second half is flat.
    assert slope_per_hour(samples([60, 60, 0, 0], 4 * WINDOW_SECONDS), "rss") == pytest.approx(0, abs=0.5)


def test_rss_by_kind_adds_up_to_the_resident_size():
    kinds = rss_by_kind(os.getpid())
    assert set(kinds) == {"heap", "anon", "file"}
    assert kinds["file"] > 0  # the interpreter's own code is mapped from a file
    assert sum(kinds.values()) == pytest.approx(rss_bytes(os.getpid()), rel=0.05)
