"""The version tree has one statement of its shape, version_trees.json, and both of its readers are held to
it: the server's (chat.eventlog.versions: the export, the memory, the branch a run answers) and
the page's (static/chat/versions.js, run here by Node.js as the browser runs it)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from chat.eventlog.versions import ancestry, tree, turn_parents, viewed_leaf

HERE = Path(__file__).resolve().parent
CASES = json.loads((HERE / "version_trees.json").read_text())["cases"]


def _rows(heads):
    return [(head["seq"], None, head.get("parentSeq"), "parentSeq" in head) for head in heads]


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_the_server_reads_each_tree_as_stated(case):
    _, versions = tree(case["heads"])
    read = {str(seq): [v.question, v.questions, v.answer, v.answers] for seq, v in versions.items()}
    assert read == case["versions"]
    rows = _rows(case["heads"])
    assert ancestry(turn_parents(rows), viewed_leaf(rows, case["view"])) == case["branch"]


def test_the_page_reads_every_tree_as_stated():
    node = shutil.which("node")
    assert node, "the page's reading is checked with Node.js (installed with the machine, as npm is)"
    out = subprocess.run(
        [node, str(HERE / "version_trees.mjs")], capture_output=True, text=True, timeout=60, check=True
    )
    read = json.loads(out.stdout)
    assert [{"name": case["name"], **seen} for case, seen in zip(CASES, read, strict=True)] == [
        {"name": case["name"], "versions": case["versions"], "branch": case["branch"]} for case in CASES
    ]


def test_the_cases_cover_every_kind_of_version():
    kinds = {key for case in CASES for head in case["heads"] for key in head if key in ("edits", "regenerates")}
    assert kinds == {"edits", "regenerates"}
    assert any(all("parentSeq" not in head for head in case["heads"]) for case in CASES)
