"""The import structure of the whole project (docs/architecture.md, "Dependencies"):

- no import cycle among the project's modules, counting imports inside functions and those made
  only for type hints (a function-local import is how a cycle hides: it only shows when that
  function first runs);
- no function-local import in chat/, agentsite/ or serving/ but in migrations and the few places listed
  in DEFERRED, each with the reason it must wait;
- chat/agent imports nothing of the project outside itself; chat/agent and chat/tools import no
  Django, Channels or daphne (they are usable on their own);
- no two folders of chat/ import each other, and no cycle runs through its folders (a module
  at the top of chat/ counts as a folder of its own): a folder that imports its caller is not a
  layer (docs/architecture.md, "Dependencies");
- serving/ (the server under the project) imports nothing of chat/ or agentsite/;
- no module of chat/ or serving/ over MAX_LINES lines.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ("chat", "agentsite", "serving", "bench", "tests")
FRAMEWORKS = ("django", "channels", "daphne")
MAX_LINES = 450

# Function-local imports that must wait, and why. Anything else is imported at module level.
DEFERRED = {
    # Django's documented place for imports that need the app registry ready.
    ("chat/apps.py", "ready"): "the modules import the models",
    # pypdf is loaded only by a server that is sent a PDF.
    ("chat/conversations/uploads.py", "pdf_text"): "pypdf on first use",
    # The OpenTelemetry SDK and exporter load only when OTEL_EXPORTER_OTLP_ENDPOINT is set.
    ("chat/ops/tracing.py", "_provider"): "the SDK on first use",
    ("chat/ops/tracing.py", "__init__"): "the API on first use",
}


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _sources(*tops: str) -> list[Path]:
    found = []
    for top in tops:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = path.relative_to(ROOT).parts
            if "migrations" in parts or any(part.startswith(".") for part in parts):
                continue
            found.append(path)
    return found


FILES = _sources(*PROJECT)
MODULES = {_module_name(path): path for path in FILES}
FREE = [
    path
    for path in FILES
    if path.is_relative_to(ROOT / "chat" / "agent") or path.is_relative_to(ROOT / "chat" / "tools")
]


def _imports(path: Path) -> list[tuple[ast.AST, str, ast.AST | None]]:
    """(import node, the project module it names, the function it sits in or None)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    found = []

    def visit(node: ast.AST, function: ast.AST | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Import):
                found.extend((child, alias.name, function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                for alias in child.names:
                    # `from a import b`: the module a.b when there is one, else a.
                    found.append(
                        (child, f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base, function)
                    )
            visit(child, inner)

    visit(tree, None)
    return found


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for _, target, _ in _imports(path):
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_project_is_read():
    assert {"chat.agent.loop", "chat.runtime.registry", "chat.doors.socket.consumers", "agentsite.settings"} <= set(
        MODULES
    )
    graph = _graph()
    assert "chat.runtime.registry" in graph["chat.doors.socket.consumers"]


def test_no_import_cycle_anywhere():
    assert cycles(_graph()) == []


def test_a_cycle_is_seen():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _folder(module: str) -> str:
    """The folder a module is in (a package's own folder for its __init__): chat.runtime.registry
    -> chat/runtime, chat.doors.api.files -> chat/doors/api; a module at the top of chat/ is a
    folder of its own: chat.checks -> chat/checks.py."""
    parts = module.split(".")
    if f"{module}.__init__" in MODULES or (module in MODULES and MODULES[module].name == "__init__.py"):
        return "/".join(parts)
    return "/".join(parts[:-1]) if len(parts) > 2 else "/".join(parts) + ".py"


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The folders of chat/ and the folders each imports (by any of its modules)."""
    folders: dict[str, set[str]] = {}
    for name, targets in graph.items():
        if not name.startswith("chat."):
            continue
        source = _folder(name)
        folders.setdefault(source, set())
        for target in targets:
            if target.startswith("chat.") and (folder := _folder(target)) != source:
                folders[source].add(folder)
                folders.setdefault(folder, set())
    return folders


def two_way_pairs(folders: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted({(a, b) for a, targets in folders.items() for b in targets if a < b and a in folders[b]})


def test_no_two_folders_of_chat_import_each_other_and_no_folder_cycle():
    folders = folder_graph(_graph())
    assert {"chat/runtime", "chat/realtime", "chat/doors/api", "chat/doors/socket", "chat/models"} <= set(folders)
    assert two_way_pairs(folders) == []
    assert cycles(folders) == []


def test_a_two_way_folder_pair_is_seen():
    folders = folder_graph({"chat.doors.api.files": {"chat.realtime.hub"}, "chat.realtime.hub": {"chat.doors.api.x"}})
    assert two_way_pairs(folders) == [("chat/doors/api", "chat/realtime")]
    assert cycles(folders) == [["chat/doors/api", "chat/realtime"]]


# The rule of which folder of chat/ may import which (docs/architecture.md, "Dependencies"): a
# folder imports only folders of the layers below its own, never one of its own layer. Bottom first.
LAYERS = [
    # the core and what everything may use
    {"chat/agent", "chat/models", "chat/exceptions.py", "chat/nesting.py", "chat/http_urls.py"}
    | {"chat/redis_errors.py", "chat/script_strings.py", "chat/pricing.py", "chat/management"},
    {"chat/tools"},  # the built-in tools, on the core
    {"chat/mcp", "chat/accounts"},  # MCP servers' tools; who is asking and how much they may
    {"chat/agents", "chat/ops"},  # agent profiles; metrics and tracing
    {"chat/eventlog"},  # the one writer of events
    {"chat/conversations"},  # what users write outside a run
    {"chat/runtime", "chat/sharing", "chat/inspector"},  # the run runtime; shared links; staff views
    {"chat/runs", "chat/realtime", "chat/checks.py"},  # the front door; live delivery
    {"chat/doors/http"}  # what the HTTP doors share: bodies, error shapes, the signed-in user
    | {"chat/scheduling"},  # schedules, a door of its own that fires on the front door
    {"chat/doors/api", "chat/doors/socket", "chat/doors/sse", "chat/doors/openai", "chat/doors/a2a"}  # the doors, none
    | {"chat/doors/agui"}
    | {"chat/doors/pages", "chat/doors/openapi", "chat/management/commands"},  # importing another; commands
    {"chat/doors", "chat/urls.py", "chat/apps.py", "chat/admin.py"},  # the wiring
]


def layer_breaches(folders: dict[str, set[str]], layers: list[set[str]]) -> list[str]:
    """Each import of a folder that is not in a layer below its own, and each folder in no layer."""
    rank = {folder: index for index, layer in enumerate(layers) for folder in layer}
    breaches = [f"{folder} is in no layer" for folder in sorted(folders) if folder not in rank]
    for folder, targets in sorted(folders.items()):
        for target in sorted(targets):
            if folder in rank and target in rank and rank[target] >= rank[folder]:
                breaches.append(f"{folder} (layer {rank[folder]}) imports {target} (layer {rank[target]})")
    return breaches


def test_every_folder_imports_only_the_layers_below_its_own():
    assert layer_breaches(folder_graph(_graph()), LAYERS) == []


def test_an_import_up_or_across_a_layer_is_seen():
    folders = {"chat/runtime": {"chat/runs"}, "chat/runs": {"chat/realtime"}, "chat/new": set()}
    assert layer_breaches(folders, LAYERS) == [
        "chat/new is in no layer",
        "chat/runs (layer 7) imports chat/realtime (layer 7)",
        "chat/runtime (layer 6) imports chat/runs (layer 7)",
    ]


@pytest.mark.parametrize(
    "path",
    [p for p in FILES if p.parts[len(ROOT.parts)] in ("chat", "agentsite", "serving")],
    ids=lambda p: _module_name(p),
)
def test_no_imports_inside_functions(path):
    rel = str(path.relative_to(ROOT))
    local = [
        f"line {node.lineno} in {function.name}()"
        for node, _, function in _imports(path)
        if function is not None and (rel, function.name) not in DEFERRED and (rel, "*") not in DEFERRED
    ]
    assert local == []


@pytest.mark.parametrize(
    "path", [p for p in FILES if p.is_relative_to(ROOT / "chat" / "agent")], ids=lambda p: _module_name(p)
)
def test_the_agent_core_imports_only_itself(path):
    outside = [
        f"line {node.lineno}: {target}"
        for node, target, _ in _imports(path)
        if target.split(".")[0] in PROJECT and not (target == "chat.agent" or target.startswith("chat.agent."))
    ]
    assert outside == []


@pytest.mark.parametrize(
    "path", [p for p in FILES if p.is_relative_to(ROOT / "serving")], ids=lambda p: _module_name(p)
)
def test_the_server_layer_imports_nothing_of_the_project_above_it(path):
    above = [
        f"line {node.lineno}: {target}"
        for node, target, _ in _imports(path)
        if target.split(".")[0] in ("chat", "agentsite")
    ]
    assert above == []


@pytest.mark.parametrize("path", FREE, ids=lambda p: _module_name(p))
def test_no_django_in_the_core_and_the_tools(path):
    """Also inside functions, where importing the modules would not see it."""
    found = [
        f"line {node.lineno}: {target}" for node, target, _ in _imports(path) if target.split(".")[0] in FRAMEWORKS
    ]
    assert found == []


def test_no_module_of_chat_or_serving_is_long():
    long = {
        str(path.relative_to(ROOT)): n
        for path in FILES
        if (path.is_relative_to(ROOT / "chat") or path.is_relative_to(ROOT / "serving"))
        and (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


BLOCK_DJANGO = """
import importlib, sys
for name in ("django", "channels", "daphne"):
    sys.modules[name] = None  # importing it, or anything below it, now raises ImportError
for name in sys.argv[1:]:
    importlib.import_module(name)
print("imported", len(sys.argv) - 1)
"""


def test_the_core_and_the_tools_import_with_django_blocked():
    names = [_module_name(path) for path in FREE]
    result = subprocess.run(
        [sys.executable, "-c", BLOCK_DJANGO, *names], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"imported {len(names)}"
