"""The agent core, the tools and the skills stay free of Django and of import cycles.

chat/agent, chat/tools and chat/skills.py are meant to be usable on their own (DESIGN.md:
"the agent core knows nothing of Django"), and a cycle hidden by an import inside a
function only shows when that function first runs.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted(
    [*(ROOT / "chat" / "agent").glob("*.py"), *(ROOT / "chat" / "tools").glob("*.py"), ROOT / "chat" / "skills.py"]
)
MODULES = [".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__") for path in FILES]
FRAMEWORKS = ("django", "channels", "daphne")


def _imported_names(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module]
    return []


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", script, *args], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )


def test_the_framework_free_modules_are_found():
    assert {
        "chat.agent",
        "chat.agent.loop",
        "chat.tools",
        "chat.tools.files",
        "chat.tools.config",
        "chat.skills",
    } <= set(MODULES)


@pytest.mark.parametrize("path", FILES, ids=MODULES)
def test_no_django_anywhere_in_the_source(path):
    """Also inside functions, where importing the modules below would not see it."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = [
        f"line {node.lineno}: {name}"
        for node in ast.walk(tree)
        for name in _imported_names(node)
        if name.split(".")[0] in FRAMEWORKS
    ]
    assert found == []


@pytest.mark.parametrize("path", FILES, ids=MODULES)
def test_no_imports_inside_functions(path):
    """A function-local import is how a cycle hides; every import is at module level."""
    tree = ast.parse(path.read_text(), filename=str(path))
    local = [
        f"line {inner.lineno} in {node.name}()"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for inner in ast.walk(node)
        if isinstance(inner, (ast.Import, ast.ImportFrom))
    ]
    assert local == []


BLOCK_DJANGO = """
import importlib, sys
for name in ("django", "channels", "daphne"):
    sys.modules[name] = None  # importing it, or anything below it, now raises ImportError
for name in sys.argv[1:]:
    importlib.import_module(name)
print("imported", len(sys.argv) - 1)
"""


def test_the_modules_import_with_django_blocked():
    result = _run(BLOCK_DJANGO, *MODULES)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"imported {len(MODULES)}"


# Each module imported first, as in a fresh interpreter: the chat modules are forgotten
# between two (third-party ones stay loaded; they cannot take part in a cycle of ours).
EACH_FIRST = """
import importlib, sys
failures = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "chat" or m.startswith("chat.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failures.append(f"{name}: {type(exc).__name__}: {exc}")
print("\\n".join(failures))
"""


def test_each_module_imports_first_without_a_cycle():
    result = _run(EACH_FIRST, *MODULES)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_a_cycle_is_caught(tmp_path):
    """The check above sees a cycle: two modules importing a name from each other at module level."""
    package = tmp_path / "chat"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "one.py").write_text("from chat.two import TWO\nONE = 1\n")
    (package / "two.py").write_text("from chat.one import ONE\nTWO = 2\n")
    result = subprocess.run(
        [sys.executable, "-c", EACH_FIRST, "chat.one", "chat.two"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.stdout.count("ImportError") == 2 and "partially initialized" in result.stdout
