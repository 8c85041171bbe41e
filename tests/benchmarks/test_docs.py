"""docs/performance.md's generated tables (bench/docs.py): made from results files, the doc's
blocks well formed and what their committed sources make, and every results file saying which
run it is and how busy the machine was (bench/runinfo.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench import docs, runinfo
from bench.doc_tables import MissingFigure

RUN = {
    "command": "python -m bench",
    "commit": "abc1234",
    "started": "2026-12-05 10:00",
    "elapsed_s": 300.0,
    "load": {
        "cpus": 2,
        "loadavg_before": 0.4,
        "loadavg_after": 1.9,
        "bench_cpu_s": 480.0,
        "others_cpu_s": 12.5,
        "others_cores": 0.04,
    },
}
RUN_LINE = (
    "Run: `python -m bench` at abc1234, 2026-12-05 10:00, 300 s; load average 0.4 before, 1.9 after (2 cores); "
    "other processes used 12.5 CPU s (0.04 cores on average), the bench's own 480."
)


def _level(c: int, stretch: float, p95: float, server_cpu: float) -> dict:
    return {"C": c, "stretch": stretch, "first_text_ms": {"p50": p95 / 2, "p95": p95}, "cpu_s": {"server0": server_cpu}}


def _stack(name: str, label: str) -> dict:
    return {
        "name": name,
        "label": label,
        "relay": {"ratio": 0.1},
        "first_text": {"first_text_ms": {"p50": 20.0}, "model_first_token_ms": {"p50": 16.0}},
        "concurrency": {
            "tokens": 300,
            "levels": [_level(50, 1.05, 150, 0.8), _level(200, 1.2, 600, 3.3), _level(400, 1.5, 1250, 4.4)],
        },
        "doors": {
            "tokens": 100,
            "levels": [
                {
                    "door": "websocket",
                    "C": 1,
                    "first_text_ms": {"p50": 16.0, "p95": 18.0},
                    "answered_ms": None,
                    "stretch": 1.02,
                    "cpu_s": {"server0": 0.00812, "model": 0.01, "client": 0.0},
                    "ok": 1,
                },
                {
                    "door": "v1",
                    "C": 1,
                    "first_text_ms": {"p50": 20.0, "p95": 22.0},
                    "answered_ms": 9.0,
                    "stretch": 1.1,
                    "cpu_s": {"server0": 0.0124, "model": 0.01, "client": 0.0},
                    "ok": 1,
                },
            ],
        },
        "idle": {"kib_per_socket": 40.94, "idle_cpu_pct": 0.27},
        "replay": {"sync_s": 0.318},
        "writes_fast": {"rows_per_1k_tokens": 1.2},
        "writes_paced": {"rows_per_1k_tokens": 43.0},
    }


RESULTS = {
    "run": RUN,
    "stacks": [_stack("sqlite-daphne", "sqlite+memory, 1x daphne")],
    "reference": {
        "first_text": {"first_text_ms": {"p50": 16.0}, "model_first_token_ms": {"p50": 14.0}},
        "concurrency": {"tokens": 300, "levels": [_level(50, 1.05, 160, 1.0), _level(200, 4.0, 12000, 11.76)]},
    },
    "model_tls": {
        "calls": 50,
        "rounds": 5,
        "tokens": 5,
        "tls": {
            "warm": {"first_text_ms": {"p50": 3.0, "p95": 4.5, "n": 50}, "connections_opened": 0},
            "new": {"first_text_ms": {"p50": 9.25, "p95": 11.0, "n": 50}, "connections_opened": 50},
        },
        "plain": {
            "warm": {"first_text_ms": {"p50": 2.0, "p95": 3.0, "n": 50}, "connections_opened": 0},
            "new": {"first_text_ms": {"p50": 4.0, "p95": 5.0, "n": 50}, "connections_opened": 50},
        },
    },
}

DOC = """# Title

Prose before.

<!-- bench:latest -->
old table
<!-- /bench:latest -->

Prose between.

<!-- bench:model-tls -->
<!-- /bench:model-tls -->
"""


def test_a_results_file_makes_the_tables_of_its_blocks():
    made = docs.regenerate(DOC, docs.take(RESULTS))
    assert made == (
        "# Title\n\nProse before.\n\n<!-- bench:latest -->\n"
        "| stack | relay ratio | C=200 stretch | C=200 first text p95 | C=400 stretch | KiB per idle socket | "
        "idle CPU | replay 10k | rows/1k tokens (full speed / 100 per s) |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
        "| SQLite + in-memory, 1 daphne | 0.10x | 1.20 | 0.6 s | 1.50 | 40.9 | 0.3% | 0.32 s | 1.2 / 43 |\n"
        "\n" + RUN_LINE + "\n<!-- /bench:latest -->\n\nProse between.\n\n<!-- bench:model-tls -->\n"
        "| connection (50 calls each) | TLS: first text p50 / p95 | plain HTTP | connections opened |\n"
        "|---|---|---|---|\n"
        "| kept and reused (one client) | 3.0 / 4.5 ms | 2.0 / 3.0 ms | 0 / 0 |\n"
        "| new for each call (a client each) | 9.2 / 11.0 ms | 4.0 / 5.0 ms | 50 / 50 |\n"
        "| a new connection's cost (p50) | +6.2 ms | +2.0 ms | |\n"
        "\n" + RUN_LINE + "\n<!-- /bench:model-tls -->\n"
    )


def test_the_reference_table_divides_the_project_by_the_relay():
    table = docs.render("reference", docs.take(RESULTS)["reference"]).splitlines()
    assert table[3] == (
        "| project, SQLite + in-memory, 1 daphne | 20.0 ms (model's first token 16.0 ms) | 1.05 | 1.20 | 1.50 "
        "| 0.6 s | 1.25 s | 0.055 s |"
    )
    # The relay has no C=400 level in this run: its cells and the ratios they need are "-".
    assert (
        table[4]
        == "| relay, no persistence, 1 daphne | 16.0 ms (model's first token 14.0 ms) | 1.05 | 4.00 | - | 12 s | - | 0.196 s |"
    )
    assert table[5] == "| **project / relay** | **1.25x** | **1.00x** | **0.30x** | - | **0.05x** | - | **0.28x** |"


def test_the_doors_table_gives_each_door_against_the_websocket():
    table = docs.render("doors", docs.take(RESULTS)["doors"]).splitlines()
    assert table[1] == (
        "| door | C=1 first text p50 / p95 (against the WebSocket) | C=1 stretch | C=1 server CPU per 1k tokens "
        "| answered at C=1 (p50) |"
    )
    assert table[3] == "| WebSocket | 16.0 / 18.0 ms | 1.02 | 0.081 s | - |"
    assert table[4] == "| `/v1` streaming | 20.0 / 22.0 ms (1.25x) | 1.10 | 0.124 s | 9.0 ms |"


def test_doors_measured_before_their_stretch_and_cpu_show_a_dash():
    levels = [
        {k: v for k, v in row.items() if k not in ("stretch", "cpu_s")}
        for row in RESULTS["stacks"][0]["doors"]["levels"]
    ]
    older = {"run": RUN, "stacks": [{"name": "sqlite-daphne", "label": "x", "doors": {"tokens": 20, "levels": levels}}]}
    table = docs.render("doors", docs.take(older)["doors"]).splitlines()
    assert table[4] == "| `/v1` streaming | 20.0 / 22.0 ms (1.25x) | - | - | 9.0 ms |"


def test_a_part_of_the_suite_replaces_only_the_blocks_it_has_figures_for():
    doors_only = {
        "run": RUN,
        "stacks": [{"name": "sqlite-daphne", "label": "x", "doors": RESULTS["stacks"][0]["doors"]}],
    }
    assert set(docs.take(doors_only)) == {"doors"}
    assert docs.regenerate(DOC, docs.take(doors_only)) == DOC


def test_results_without_their_run_or_a_figure_are_refused():
    with pytest.raises(docs.Malformed, match="no `run` entry"):
        docs.take({"stacks": RESULTS["stacks"]})
    broken = json.loads(json.dumps(RESULTS))
    del broken["stacks"][0]["idle"]["kib_per_socket"]
    with pytest.raises(MissingFigure, match="bench:latest: .*idle.kib_per_socket"):
        docs.regenerate(DOC, docs.take(broken))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("<!-- bench:latest -->\n", "never closed"),
        ("<!-- /bench:latest -->\n", "closes nothing"),
        ("<!-- bench:latest -->\n<!-- bench:doors -->\n<!-- /bench:doors -->\n<!-- /bench:latest -->\n", "inside"),
        ("<!-- bench:latest -->\n<!-- /bench:latest -->\n" * 2, "twice"),
        ("<!-- bench:lastest -->\n<!-- /bench:lastest -->\n", "unknown block"),
    ],
)
def test_malformed_markers_are_named(text, problem):
    with pytest.raises(docs.Malformed, match=problem):
        docs.blocks(text)


def test_the_performance_doc_is_what_its_committed_sources_make():
    text = docs.DOC.read_text()
    names = [name for name, _, _ in docs.blocks(text)]
    assert sorted(names) == sorted(docs.BLOCKS), "every generated table of bench/doc_tables.py is in the doc, once"
    sources = docs.load_sources()
    assert set(sources) == set(names), "every block has its source in bench/results/docs/, and no source is stray"
    assert docs.regenerate(text, sources) == text, "the doc's tables were edited by hand: run python -m bench.docs"


def test_the_sources_are_committed_not_ignored():
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", str(docs.SOURCES / "latest.json")], cwd=docs.ROOT, capture_output=True
    )
    assert ignored.returncode == 1  # 1: not ignored
    assert subprocess.run(["git", "check-ignore", "-q", "bench/results/latest.json"], cwd=docs.ROOT).returncode == 0


def test_a_run_records_its_command_commit_and_the_machines_load():
    info = runinfo.RunInfo(command="python -m bench --quick").start()
    finished = info.finish()
    assert finished["command"] == "python -m bench --quick"
    assert finished["commit"] != "unknown"
    assert set(finished["load"]) == set(RUN["load"])
    assert finished["load"]["others_cpu_s"] >= 0
    assert docs.take({"run": finished, "model_tls": RESULTS["model_tls"]})  # what the docs take


def test_the_bench_cpu_counts_its_children_that_ended():
    before = runinfo.tree_cpu_seconds()
    # A child that spends 0.5 s of CPU (not of wall time) and is waited for.
    burn = "import time\nwhile time.process_time() < 0.5: pass"
    subprocess.run([sys.executable, "-c", burn], check=True)
    assert runinfo.tree_cpu_seconds() - before >= 0.45  # /proc counts in clock ticks


def test_a_storm_in_which_no_socket_got_its_sync_says_so():
    source = docs.load_sources()["idle10k"]  # a real run's figures (bench/results/docs/)
    storm = source["idle10k"]["storm"]
    storm.update(
        reconnected=0,
        failed=source["idle10k"]["sockets"],
        total_s=None,
        sync_s=None,
        synced_by={"5 s": 0, "300 s": 0},
        queries_per_reconnect=None,
        server_cpu_ms_per_reconnect=None,
    )
    table = docs.render("idle10k", source)
    assert f"| none of {source['idle10k']['sockets']:,} within {storm['deadline_s']} s |" in table
    assert "| synced by then | 5 s: 0, 300 s: 0 |" in table
    assert f"| server CPU in the storm | {storm['server_cpu_s']:g} s; the client {storm['client_cpu_s']:g} s |" in table


def _soak_figure(first, last, slope, windows=None):
    figure = {"first": first, "last": last, "max": last, "slope_per_hour": slope}
    if windows is not None:
        figure["window_slopes_per_hour"] = windows
    return figure


SOAK = {
    "run": RUN,
    "duration_s": 1800,
    "allocator": "libjemalloc.so.2",
    "process_env": ["1:LD_PRELOAD="],
    "operations": {"run (text)": 1200, "sign-in": 40},
    "errors": {},
    "figures": {
        "rss_mb_0": _soak_figure(160.5, 170.0, 2.0, [30.0, 1.5]),
        "rss_mb_1": _soak_figure(161.0, 190.0, 12.5, [35.0, 12.0]),
        "lag_ms_0": _soak_figure(2.0, 3.0, 0.1),
        "lag_ms_1": _soak_figure(2.5, 4.0, -0.2),
        "db_connections": _soak_figure(8, 16, 0.0),
    },
    "samples": [{"t": 0.0}],
}


def test_a_soak_makes_its_table_with_each_windows_slope_and_leaves_its_samples_out():
    sources = docs.take(SOAK)
    assert set(sources) == {"soak"}
    assert "samples" not in sources["soak"]["soak"]
    table = docs.render("soak", sources["soak"]).splitlines()
    assert table[3] == "| RSS, MB | 160.5 / 161 | 170 / 190 | 170 / 190 | +2 / +12.5 | +30 / +35, +1.5 / +12 |"
    assert table[4] == "| event-loop lag (a ping's round trip), ms | 2 / 2.5 | 3 / 4 | 3 / 4 | +0.1 / -0.2 | - |"
    assert table[5] == "| database connections (both) | 8 | 16 | 16 | +0 | - |"
    assert table[7] == (
        "1800 s of load; allocator libjemalloc.so.2, per-process settings: 1:LD_PRELOAD=. "
        "Operations: 1,240 (run (text) 1,200, sign-in 40). Errors: none."
    )
    failed = docs.render("soak", docs.take({**SOAK, "errors": {"storm reconnect": 3}})["soak"])
    assert "Errors: storm reconnect 3." in failed
