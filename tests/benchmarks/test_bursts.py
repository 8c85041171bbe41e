"""bench/bursts.py: the project and the relay answer bursts in turn, and each level's verdict is
read from the bursts of both sides."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from bench import bursts, docs

ROOT = Path(__file__).resolve().parents[2]
RUN = {
    "command": "python -m bench --only bursts",
    "commit": "abc1234",
    "started": "2026-12-05 23:30",
    "elapsed_s": 228.0,
    "load": {"note": "a test's run"},
}


def _bursts(c: int, p50s: list[float], ok: int | None = None) -> list[dict]:
    return [{"first_text_p50_ms": p, "first_text_p95_ms": p + 5, "ok": c if ok is None else ok} for p in p50s]


def test_a_level_is_judged_on_the_median_of_each_sides_bursts_and_round_by_round():
    level = {"C": 50, "project": _bursts(50, [70.0, 90.0, 66.0, 200.0]), "relay": _bursts(50, [80.0, 85.0, 60.0, 75.0])}

    verdict = bursts.verdict(level)

    assert verdict == {
        "project_median_ms": 80.0,  # (70 + 90) / 2: one slow burst does not decide
        "relay_median_ms": 77.5,
        "ratio": 1.03,
        "rounds_no_later": 1,  # 70 <= 80 only; a tie would count
        "rounds": 4,
        "whole": True,
    }
    level["relay"][1]["ok"] = 49
    assert bursts.verdict(level)["whole"] is False


def test_the_bursts_table_gives_every_burst_and_the_verdict():
    level = {"C": 100, "project": _bursts(100, [124.3, 99.1]), "relay": _bursts(100, [186.1, 204.0], ok=99)}
    level["verdict"] = bursts.verdict(level)
    source = docs.take({"run": RUN, "bursts": {"rounds": 2, "levels": [level]}})["bursts"]

    table = docs.render("bursts", source).splitlines()

    assert table[1].startswith("| burst | project: each burst's first text p50 (ms) |")
    assert table[3] == "| C = 100 | 124, 99 | 186, 204 | 112 ms / 195 ms | **0.57x** | 2 of 2 | **no** |"
    assert docs.take({"run": RUN, "bursts": {"error": "boom", "levels": []}}).get("bursts") is None


def test_a_short_run_takes_turns_and_keeps_every_stream_whole(tmp_path):
    out = tmp_path / "bursts.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--only", "bursts", "--levels", "4", "--burst-rounds", "2", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert re.search(r"C=4: first text p50, median of 2 bursts each: project [\d.]+ ms, relay [\d.]+ ms", done.stdout)
    [level] = json.loads(out.read_text())["bursts"]["levels"]
    assert level["C"] == 4
    for side in ("project", "relay"):
        assert [b["ok"] for b in level[side]] == [4, 4]
        assert all(0 < b["first_text_p50_ms"] <= b["first_text_p95_ms"] for b in level[side])
    assert level["project"][0]["server_cpu_s"] > 0
    assert level["verdict"]["whole"] is True and level["verdict"]["rounds"] == 2
