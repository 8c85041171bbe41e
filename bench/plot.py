"""The growth curves as a PNG (matplotlib, headless): docs/bench-growth.png for docs/performance.md.

python -m bench.plot [bench/results/growth.json] [out.png]    # re-plot saved figures
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .growth import LENGTH_CURVES, RESULTS, TABLE_CURVES, curves

DOCS_PNG = Path(__file__).resolve().parent.parent / "docs" / "bench-growth.png"


def growth(results: list[dict], path: Path = DOCS_PNG) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # no display: the suite runs on servers
    import matplotlib.pyplot as plt

    figure, (by_length, by_table) = plt.subplots(1, 2, figsize=(13, 6.8), constrained_layout=True)
    styles = {"sqlite": "-", "postgres": "--"}
    for result in results:
        style, fitted = styles.get(result["database"], ":"), curves(result)
        for axis, part, size, names in (
            (by_length, "length", "turns", LENGTH_CURVES),
            (by_table, "table", "events", TABLE_CURVES),
        ):
            rows = result.get(part) or []
            for index, (key, name) in enumerate(names.items()):
                kind, b = fitted[part][key]
                axis.plot(
                    [r[size] for r in rows],
                    [r[key]["p50"] for r in rows],
                    style,
                    marker="o",
                    color=f"C{index}",
                    label=f"{name}, {result['database']}: {kind} (b={b})",
                )
    by_length.set_title("Conversation length (each turn: a tool call and an answer)")
    by_length.set_xlabel("turns in the conversation")
    by_table.set_title("Table size (1,000 users, 100 events per conversation)")
    by_table.set_xlabel("events in the table (conversations = events / 100)")
    for axis in (by_length, by_table):
        if axis.has_data():  # a failed database leaves nothing to scale
            axis.set_xscale("log")
            axis.set_yscale("log")
        axis.set_ylabel("p50, ms (log)")
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)  # below: off the curves
    figure.suptitle(
        "agentsite growth curves: solid SQLite + in-memory, dashed PostgreSQL + Redis; 1 daphne, fake model "
        "(python -m bench --only growth)",
        fontsize=10,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path


def main() -> None:
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else RESULTS
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else DOCS_PNG
    print(growth(json.loads(source.read_text())["growth"], out))


if __name__ == "__main__":
    main()
