"""`python -m bench.docs [RESULTS.json ...]` (`make bench-docs`): docs/performance.md's tables,
made from the bench's results so that no figure in them is typed by hand.

A generated block sits between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->`; its source is
bench/results/docs/NAME.json, the part of a results file its table shows with the run's `run`
entry (command, commit, date, the machine's load; bench/runinfo.py). The results files given
replace the sources of the blocks they have figures for (a later file wins); then every block
of the doc is made again from its source (bench/doc_tables.py). The sources are committed with
the doc, so that the doc can be checked against them:

python -m bench.docs bench/results/latest.json     # after `make bench`
python -m bench.docs bench/results/idle10k.json    # after `make bench-idle10k`
python -m bench.docs bench/results/soak.json       # after `make bench-soak`
python -m bench.docs bench/results/costs.json      # after `python -m bench --only costs`
python -m bench.docs --check                        # exit 1 when the doc is not what its sources make
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from . import costs_table, doc_tables
from .doc_tables import MissingFigure, run_line
from .report import RESULTS

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "performance.md"
SOURCES = RESULTS / "docs"
BLOCKS = doc_tables.BLOCKS | costs_table.BLOCKS
MARKER = re.compile(r"^<!-- (/?)bench:([\w-]+) -->$", re.MULTILINE)


class Malformed(ValueError):
    pass


def blocks(text: str) -> list[tuple[str, int, int]]:
    """(name, start, end) of each block's inside, between its markers; Malformed when a marker is
    unmatched, nested, repeated or names no known block."""
    found, opened = [], None
    for match in MARKER.finditer(text):
        closing, name = match.group(1) == "/", match.group(2)
        if name not in BLOCKS:
            raise Malformed(f"unknown block {name!r}")
        if not closing:
            if opened is not None:
                raise Malformed(f"bench:{name} opens inside bench:{opened[0]}")
            if any(name == n for n, _, _ in found):
                raise Malformed(f"bench:{name} appears twice")
            opened = (name, match.end())
        elif opened is None or opened[0] != name:
            raise Malformed(f"/bench:{name} closes nothing")
        else:
            found.append((name, opened[1], match.start()))
            opened = None
    if opened is not None:
        raise Malformed(f"bench:{opened[0]} is never closed")
    return found


def render(name: str, source: dict) -> str:
    """A block's inside: its table and the line of its run, between blank lines."""
    try:
        table = BLOCKS[name].render(source)
    except (MissingFigure, KeyError) as exc:
        raise MissingFigure(f"bench:{name}: its source lacks a figure ({exc})") from None
    return "\n" + "\n".join(table) + "\n\n" + run_line(source) + "\n"


def regenerate(text: str, sources: dict[str, dict]) -> str:
    """The doc with every block that has a source made again from it."""
    out, at = [], 0
    for name, start, end in blocks(text):
        out.append(text[at:start])
        out.append(render(name, sources[name]) if name in sources else text[start:end])
        at = end
    return "".join(out) + text[at:]


def take(results: dict) -> dict[str, dict]:
    """The sources a results file has figures for, each with the file's run."""
    if "run" not in results:
        raise Malformed("the results have no `run` entry (a file from before bench/runinfo.py)")
    sources = {}
    for name, block in BLOCKS.items():
        part = block.take(results)
        if part is not None:
            sources[name] = {"run": results["run"], **part}
    return sources


def load_sources(directory: Path = SOURCES) -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text()) for path in sorted(directory.glob("*.json"))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.docs", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("results", nargs="*", type=Path, help="results files of the bench (bench/results/*.json)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if the doc differs")
    parser.add_argument("--doc", type=Path, default=DOC)
    parser.add_argument("--sources", type=Path, default=SOURCES)
    args = parser.parse_args(argv)
    text = args.doc.read_text()
    sources = load_sources(args.sources)
    for path in args.results:
        for name, source in take(json.loads(path.read_text())).items():
            print(f"bench:{name} <- {path} ({source['run']['command']}, {source['run']['started']})")
            sources[name] = source
    made = regenerate(text, sources)
    if args.check:
        if made != text:
            print(f"{args.doc} differs from what {args.sources} makes: run python -m bench.docs", file=sys.stderr)
            return 1
        return 0
    names = {name for name, _, _ in blocks(text)}
    args.sources.mkdir(parents=True, exist_ok=True)
    for name, source in sources.items():
        if name in names:
            (args.sources / f"{name}.json").write_text(json.dumps(source, indent=1) + "\n")
    args.doc.write_text(made)
    print(f"{args.doc}: {len(names)} generated tables" + ("" if made != text else ", unchanged"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
