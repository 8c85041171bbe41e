"""bench/inserts.py in its own process, a few small groups: both ways insert the group and print
their figures (the rows themselves are checked in tests/eventlog/test_inserts.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_bench_times_both_ways_of_inserting_a_group_of_starts():
    done = subprocess.run(
        [sys.executable, "-m", "bench.inserts", "--count", "5", "--repeats", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "5 run starts' Run + user_message rows, sqlite, 2 groups each way:" in done.stdout
    for way in ("bulk_create", "inserts"):
        figures = re.search(rf"{way} +p50 +([\d.]+) ms +fastest +([\d.]+) ms .* CPU p50 +([\d.]+) ms", done.stdout)
        assert figures, done.stdout
        assert 0 < float(figures[2]) <= float(figures[1])
