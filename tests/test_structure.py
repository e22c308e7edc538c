"""The shape of the source a newcomer reads: layers that do not import upwards, no import
cycles, and a run loop that fits in one's head (issue 16)."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import tenxgraph

SRC = Path(tenxgraph.__file__).parent.parent
ENGINE = SRC / "tenxgraph" / "core" / "graph" / "engine.py"


def _modules() -> dict[str, Path]:
    found = {}
    for path in SRC.joinpath("tenxgraph").rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()
PACKAGES = {m for m, p in MODULES.items() if p.name == "__init__.py"}
TREES = {m: ast.parse(p.read_text(encoding="utf-8")) for m, p in MODULES.items()}


def _provider(package: str, name: str) -> str | None:
    """The module `from package import name` really reads: the submodule, or the module the
    package's `__init__` takes the name from."""
    if f"{package}.{name}" in MODULES:
        return f"{package}.{name}"
    for node in TREES[package].body:
        if isinstance(node, ast.ImportFrom) and node.module in MODULES:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    if node.module in PACKAGES:
                        return _provider(node.module, alias.name)
                    return node.module
    return None


def _imports(module: str) -> Iterator[str]:
    """Every tenxgraph module `module` imports, at any level: top, in functions, and under
    TYPE_CHECKING (a cycle for the type checker is a cycle for the reader too)."""
    for node in ast.walk(TREES[module]):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in MODULES:
            for alias in node.names:
                target = (
                    _provider(node.module, alias.name) if node.module in PACKAGES else node.module
                )
                if target is not None and target not in PACKAGES:
                    yield target
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name in MODULES)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_itself_back_through_others() -> None:
    edges = {m: set(_imports(m)) for m in MODULES if m not in PACKAGES}
    assert _cycles(edges) == []


def test_the_data_model_imports_no_model_client_graph_or_storage() -> None:
    upward = ("tenxgraph.core.llm", "tenxgraph.core.graph", "tenxgraph.storage", "tenxgraph.cli")
    state = [m for m in MODULES if m.startswith("tenxgraph.core.state")]
    assert state
    # the one exception: the package's lazy `SummaryContextManager`, its documented import path
    allowed = {("tenxgraph.core.state", "tenxgraph.core.llm.summary")}
    wrong = {
        (m, t) for m in state for t in _imports(m) if t.startswith(upward) and (m, t) not in allowed
    }
    assert wrong == set()


#: lowest first; a module may import from its own layer and those before it
LAYERS = [
    ("tenxgraph._lazy", "tenxgraph.utils", "tenxgraph.core.exceptions", "tenxgraph.core.redaction"),
    ("tenxgraph.core.state",),
    ("tenxgraph.storage",),
    ("tenxgraph.observability",),
    ("tenxgraph.core.llm",),
    ("tenxgraph.core.graph",),
    ("tenxgraph.prebuilt",),
    ("tenxgraph.mcp",),  # the MCP SDK's tools: built on core, imported by nothing below
    ("tenxgraph.serve",),  # the Agent Protocol server: built on core and storage
    ("tenxgraph.cli",),
]


def _layer(module: str) -> int:
    for i, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    raise AssertionError(f"{module} belongs to no layer: add it to LAYERS")


def test_each_layer_imports_only_the_layers_below_it() -> None:
    upward = {
        (m, t)
        for m in MODULES
        if m not in PACKAGES and m != "tenxgraph.__main__"
        for t in _imports(m)
        if _layer(t) > _layer(m)
    }
    assert upward == set()


def test_the_engine_does_not_know_the_app_object() -> None:
    graph = "tenxgraph.core.graph."
    parts = ["engine", "opening", "execution", "scheduler", "keeper", "chunks", "merge"]
    for part in parts:
        assert graph + "compiled_graph" not in set(_imports(graph + part)), part


def test_the_run_loop_fits_in_600_lines_and_no_function_of_the_graph_package_in_80() -> None:
    assert len(ENGINE.read_text(encoding="utf-8").splitlines()) <= 600
    long = []
    for module, tree in TREES.items():
        if not module.startswith("tenxgraph.core.graph"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > 80:
                    long.append(f"{module}.{node.name}: {length} lines")
    assert long == []


def test_summary_context_manager_is_still_importable_from_the_data_model_lazily() -> None:
    code = (
        "import sys, tenxgraph.core.state as s\n"
        "assert 'tenxgraph.core.llm.summary' not in sys.modules\n"
        "from tenxgraph.core.state import SummaryContextManager\n"
        "from tenxgraph.core.llm.summary import SummaryContextManager as Same\n"
        "assert SummaryContextManager is Same is s.SummaryContextManager\n"
        "assert 'SummaryContextManager' in s.__all__\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr
