"""The documentation's examples work as written: every ```sh, ```bash, ```python and ```js block
of docs/*.md runs, verbatim (a ```js block as a Node.js module, with the npm packages of
tests/agui installed beside it, as a front-end's would be), against a real daphne on the offline
demo model (as `make run` serves it) with a real user's API token in TOKEN (and a staff user's in STAFF_TOKEN) and the server's
address in BASE, exits 0, and prints what the doc says it prints: the plain block after it,
introduced by "printed", where `...` stands for anything within a line and, on a line of its own,
for any lines, and any UUID for any UUID.

A block that is not meant to run (a configuration file, a deployment command, an excerpt) says
so on its fence line, ```sh no-run, and is left out by that mark; none is skipped otherwise.
The working directory holds `photo.jpg`, the 4032 x 3024 photo the image examples name."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from PIL import Image

from tests.e2e.harness import Server, SyncUser, migrate, server_env, shell

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))
RUNNABLE = {"sh", "bash", "python", "js"}
NO_RUN = "no-run"
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)(?P<attrs>[^\n`]*)$")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
ANY = "..."


@dataclass
class Block:
    page: str
    line: int
    lang: str
    attrs: str
    body: str
    printed: str | None = None  # the output the doc says it prints

    @property
    def runs(self) -> bool:
        return self.lang in RUNNABLE and NO_RUN not in self.attrs.split()

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def blocks_of(path: Path) -> list[Block]:
    """The fenced blocks of a page, each runnable one with the `printed` block that follows it."""
    lines = path.read_text().splitlines()
    found: list[Block] = []
    between: list[str] = []
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if not fence:
            between.append(lines[index])
            index += 1
            continue
        indent, start = len(fence["indent"]), index
        body = []
        index += 1
        while not lines[index].strip().startswith("```"):
            body.append(lines[index][indent:])
            index += 1
        index += 1
        block = Block(path.name, start + 1, fence["lang"], fence["attrs"].strip(), "\n".join(body) + "\n")
        text = " ".join(" ".join(between).split())
        if found and found[-1].runs and not block.lang and text.startswith("printed") and text.endswith(":"):
            found[-1].printed = block.body
        else:
            found.append(block)
        between = []
    return found


EXAMPLES = [block for page in DOCS for block in blocks_of(page) if block.runs]


def line_pattern(expected: str) -> re.Pattern:
    pieces = re.split(r"(\.\.\.|" + UUID.pattern + ")", expected)
    return re.compile(
        "".join(".*" if p == ANY else UUID.pattern if UUID.fullmatch(p) else re.escape(p) for p in pieces)
    )


def output_matches(expected: str, actual: str) -> bool:
    want = expected.rstrip("\n").split("\n")
    got = actual.rstrip("\n").split("\n")
    patterns = [None if line == ANY else line_pattern(line) for line in want]

    @functools.cache
    def match(i: int, j: int) -> bool:
        if i == len(want):
            return j == len(got)
        if patterns[i] is None:
            return any(match(i + 1, k) for k in range(j, len(got) + 1))
        return j < len(got) and bool(patterns[i].fullmatch(got[j].rstrip())) and match(i + 1, j + 1)

    return match(0, 0)


def test_the_pages_with_api_examples_have_runnable_blocks():
    pages = {block.page for block in EXAMPLES}
    assert "api-examples.md" in pages
    assert sum(block.page == "api-examples.md" for block in EXAMPLES) >= 7
    # Every runnable block says what it prints, so that running it checks something.
    assert [block.name for block in EXAMPLES if block.printed is None] == []


def test_the_matching_is_strict():
    assert output_matches("a ... c\n...\nz", "a bb c\nx\ny\nz")
    assert output_matches("id 648b6b04-867b-40f3-af37-e2c1e8d4c17c", "id 00000000-1111-2222-3333-444444444444")
    assert not output_matches("id 648b6b04-867b-40f3-af37-e2c1e8d4c17c", "id 42")
    assert not output_matches("a\nb", "a\nb\nc")  # nothing more than the doc says
    assert not output_matches("a (b)", "a b")  # the doc's brackets are literal


@pytest.fixture(scope="module")
def docs_server():
    with tempfile.TemporaryDirectory(prefix="agentsite-docs-") as tmp:
        folder = Path(tmp)
        env = server_env(
            database_url=f"sqlite:///{folder / 'docs.sqlite3'}",
            llm_base_url="http://127.0.0.1:9/unused",
            AGENT_MODEL="demo",  # what `make run` serves without a key
            AGENT_TOOLS="calculator,current_time,read_file,write_file,list_files,load_skill",
            AGENT_DEMO_CHUNK_DELAY="0.001",
            AGENT_WORKSPACE_ROOT=str(folder / "workspaces"),
        )
        migrate(env)
        server = Server(env, log_dir=folder, name="daphne-docs").start()
        try:
            user, staff = SyncUser(server), SyncUser(server)
            shell(
                server,
                f"from django.contrib.auth.models import User; print(User.objects.filter(username='{staff.username}').update(is_staff=True))",
            )
            work = folder / "work"
            work.mkdir()
            Image.new("RGB", (4032, 3024), (40, 120, 200)).save(work / "photo.jpg", quality=80)
            (work / "node_modules").symlink_to(ROOT / "tests" / "agui" / "node_modules")  # `make agui-client`
            bin_dir = str(Path(sys.executable).parent)  # python3 and the openai SDK of this venv
            yield {
                "env": {
                    **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "AGENT_", "OPENAI_"))},
                    "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}",
                    "PYTHONPATH": str(ROOT),  # this checkout's chat/, which a library example imports
                    "BASE": server.base,
                    "TOKEN": user.token("docs"),
                    "STAFF_TOKEN": staff.token("docs-staff"),
                },
                "cwd": work,
                "server": server,
            }
            user.close()
            staff.close()
        finally:
            server.stop()


@pytest.mark.parametrize("block", EXAMPLES, ids=[block.name for block in EXAMPLES])
def test_the_example_runs_and_prints_what_the_doc_says(block, docs_server):
    command = {
        "python": [sys.executable, "-c", block.body],
        "js": ["node", "--input-type=module", "-e", block.body],
    }.get(block.lang, ["bash", "-e", "-o", "pipefail", "-c", block.body])
    result = subprocess.run(
        command, env=docs_server["env"], cwd=docs_server["cwd"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"{block.name} exited {result.returncode}:\n{result.stderr}\n{result.stdout}"
    assert output_matches(block.printed, result.stdout), (
        f"{block.name} printed:\n{result.stdout}\nthe doc says:\n{block.printed}"
    )
