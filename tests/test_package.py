"""The installed package: entry points import cleanly and cheaply, lazy names, version, CLI."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.resources
import subprocess
import sys
from pathlib import Path

import pytest

import tenxgraph

ENTRY_POINTS = [
    "tenxgraph",
    "tenxgraph.core",
    "tenxgraph.core.state",
    "tenxgraph.utils",
    "tenxgraph.utils.constants",
    "tenxgraph.core.exceptions",
    "tenxgraph.core.graph",
    "tenxgraph.core.llm",
]

# Libraries that do I/O (network, databases, tokenizers): the data model must not pull them in.
IO_LIBRARIES = [
    "litellm",
    "httpx",
    "openai",
    "aiohttp",
    "requests",
    "aiosqlite",
    "asyncpg",
    "tiktoken",
    "mcp",  # tenxgraph.mcp imports the MCP SDK; nothing else does
]

IMPORT_BUDGET_MS = 150.0


def run_python(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_entry_point_imports_cleanly_as_the_first_import(module: str, tmp_path: Path) -> None:
    code = (
        f"import {module} as m\n"
        "for name in getattr(m, '__all__', ()):\n"
        "    getattr(m, name)\n"
        "print('ok')\n"
    )
    proc = run_python("-c", code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ok\n"
    assert proc.stderr == ""


@pytest.mark.parametrize("module", ["tenxgraph", "tenxgraph.core.state"])
def test_import_does_not_pull_in_io_libraries(module: str, tmp_path: Path) -> None:
    code = (
        f"import sys, {module}\n"
        f"roots = {IO_LIBRARIES!r}\n"
        "print(sorted(k for k in sys.modules if k.split('.')[0] in roots))\n"
    )
    proc = run_python("-c", code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_the_first_import_leaves_the_stores_for_compile(tmp_path: Path) -> None:
    """`import tenxgraph` with `StateGraph`, `AgentState` and `Message` loads no checkpointer
    and no codec of theirs (nor `json`): `compile()` loads the store it needs. (A run's code
    checks a kept version with `checkpointer.versions`, not the stores' base.)"""
    code = (
        "import sys\n"
        "import tenxgraph\n"
        "from tenxgraph import StateGraph, AgentState, Message\n"
        "stores = 'tenxgraph.storage.checkpointer.'\n"
        "names = ['json', stores + 'base', stores + '_codec', stores + 'memory']\n"
        "print([n for n in names if n in sys.modules])\n"
    )
    proc = run_python("-c", code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_building_an_agent_graph_does_not_import_litellm(tmp_path: Path) -> None:
    """litellm costs seconds to import: it loads on the first real model call, not before."""
    code = (
        "import sys\n"
        "from tenxgraph import Agent, StateGraph, START, END\n"
        "g = StateGraph()\n"
        "g.add_node('agent', Agent('openai/gpt-4o-mini', temperature=0))\n"
        "g.add_edge(START, 'agent'); g.add_edge('agent', END)\n"
        "g.compile()\n"
        "print('litellm' in sys.modules, 'openai' in sys.modules)\n"
    )
    proc = run_python("-c", code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False"]


def test_lazy_attributes() -> None:
    from tenxgraph.core.state import AgentState, Message
    from tenxgraph.utils.constants import END, START

    assert tenxgraph.AgentState is AgentState
    assert tenxgraph.Message is Message
    assert tenxgraph.START == START == "__start__"
    assert tenxgraph.END == END == "__end__"
    assert {"AgentState", "Message", "START", "END"} <= set(dir(tenxgraph))
    assert {"AgentState", "Message", "START", "END", "__version__"} <= set(tenxgraph.__all__)


def test_lazy_attributes_resolve_on_first_use(tmp_path: Path) -> None:
    code = (
        "import sys, tenxgraph\n"
        "before = 'tenxgraph.core.state' in sys.modules\n"
        "state_cls = tenxgraph.AgentState\n"
        "print(before, state_cls.__module__, 'tenxgraph.core.state' in sys.modules)\n"
    )
    proc = run_python("-c", code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "tenxgraph.core.state.agent_state", "True"]


def test_unknown_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        tenxgraph.no_such_thing  # noqa: B018
    assert not hasattr(tenxgraph, "StateGraphh")
    with pytest.raises(ImportError):
        from tenxgraph import no_such_thing  # type: ignore[attr-defined]  # noqa: F401


def test_version_matches_the_installed_metadata() -> None:
    assert tenxgraph.__version__ == importlib.metadata.version("tenxgraph")


def test_py_typed_is_shipped() -> None:
    assert importlib.resources.files("tenxgraph").joinpath("py.typed").is_file()


def test_console_script_is_declared() -> None:
    (entry,) = importlib.metadata.entry_points(group="console_scripts", name="tenxgraph")
    assert entry.value == "tenxgraph.cli:main"
    assert entry.load() is importlib.import_module("tenxgraph.cli").main


def test_cli_version(tmp_path: Path) -> None:
    proc = run_python("-m", "tenxgraph.cli", "--version", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"tenxgraph {tenxgraph.__version__}"


def test_cli_help(tmp_path: Path) -> None:
    proc = run_python("-m", "tenxgraph.cli", "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: tenxgraph")
    assert "--version" in proc.stdout


def _own_import_ms(stderr: str) -> float:
    """Sum of the self time of tenxgraph's modules in `python -X importtime` output."""
    total_us = 0
    seen = 0
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cumulative, name = line[len("import time:") :].split("|")
        if name.strip().startswith("tenxgraph"):
            total_us += int(self_us)
            seen += 1
    assert seen > 0, "no tenxgraph module in the -X importtime output"
    return total_us / 1000


def test_state_import_time_budget(tmp_path: Path) -> None:
    runs = []
    for _ in range(3):
        proc = run_python("-X", "importtime", "-c", "import tenxgraph.core.state", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        runs.append(_own_import_ms(proc.stderr))
    assert min(runs) < IMPORT_BUDGET_MS, f"tenxgraph's own import time (ms) per run: {runs}"
