"""Typed results, as a user's type checker sees them: small scripts checked by `mypy --strict`.

`StateGraph(MyState).compile()` is a `CompiledGraph[MyState]`: `ainvoke` returns a
`RunResult[MyState]` (a TypedDict), `aget_state` a `MyState | None`, and
`interrupt(..., response_schema=Model)` a `Model`. A correct script passes; each mistake in
the wrong one is reported on its line, with its error code.

mypy reads this clone's `src` (found from this file, so any clone works, whatever is installed)
and keeps its cache in a temporary directory: offline, one mypy run per script.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("mypy")

SRC = Path(__file__).resolve().parents[1] / "src"

# The user's view of the package: errors inside tenxgraph are the repository's own `mypy
# --strict src/tenxgraph` job (as for an installed package, mypy would not report them), and
# litellm and the MCP SDK (thousands of modules, never in these scripts' types) are not read.
CONFIG = """\
[mypy]
plugins = pydantic.mypy

[mypy-tenxgraph.*]
ignore_errors = True

[mypy-litellm.*,mcp.*]
follow_imports = skip
"""

PRELUDE = """\
from typing import Any

from pydantic import BaseModel

from tenxgraph import END, START, AgentState, CompiledGraph, Message, RunResult, StateGraph
from tenxgraph.core.state import StreamChunk
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.utils import interrupt


class MyState(AgentState):
    topic: str = ""


class Approval(BaseModel):
    ok: bool


def ask(state: MyState) -> dict[str, Any]:
    answer: Approval = interrupt("ok?", response_schema=Approval)
    free = interrupt("anything else?")  # no schema: the answer as given (Any)
    return {"topic": state.topic if answer.ok else str(free)}


graph = StateGraph(MyState)
graph.add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
app: CompiledGraph[MyState] = graph.compile()
cfg = {"thread_id": "t1"}
"""

CORRECT = """
from_instance: CompiledGraph[MyState] = StateGraph(MyState(topic="owls")).compile()
plain: CompiledGraph[AgentState] = StateGraph().compile()
bare: CompiledGraph = app  # a bare CompiledGraph is a CompiledGraph[AgentState]
agent_app: CompiledGraph[MyState] = ReactAgent("test", [], state=MyState).compile()
plain_agent: CompiledGraph[AgentState] = ReactAgent("test", []).compile()


async def main() -> None:
    result = await app.ainvoke({"messages": [Message.text_message("hi")]}, cfg, "full")
    messages: list[Message] = result["messages"]
    usage: dict[str, Any] = result["token_usage"]
    s: MyState = result["state"]
    topic: str = result["state"].topic
    x: MyState | None = await app.aget_state(cfg)
    if x is not None:
        topic = x.topic
    y: MyState | None = app.get_state(cfg)
    again: RunResult[MyState] = app.invoke(None, cfg)
    node: str | None = None
    if "interrupted" in again:
        node = again["interrupted"]["node"]
    partial = await app.ainvoke(None, cfg, "partial")
    history: list[Message] = partial["context"]
    summary: str | None = partial["summary"]
    async for chunk in app.astream(None, cfg):
        first: StreamChunk = chunk
        print(first)
    child: AgentState | None = await app.aget_subgraph_state(cfg, "ask")
    async with app as entered:
        z: MyState | None = await entered.aget_state(cfg)
    print(messages, usage, s, topic, y, node, history, summary, child, z)
"""

# each line ending in `# E: <code>` must get that error, and no other line any
WRONG = """
async def main() -> None:
    result = await app.ainvoke({"messages": [Message.text_message("hi")]}, cfg, "full")
    print(result["state"].not_a_field)  # E: attr-defined
    state = await app.aget_state(cfg)
    if state is not None:
        print(state.not_a_field)  # E: attr-defined
    app.invoke(42)  # E: arg-type
    print(result["not_a_key"])  # E: typeddict-item
    print(interrupt("ok?", response_schema=Approval).not_a_field)  # E: attr-defined
    plain = StateGraph().compile().get_state(cfg)
    if plain is not None:
        print(plain.topic)  # E: attr-defined
    agent_state = ReactAgent("test", [], state=MyState).compile().get_state(cfg)
    if agent_state is not None:
        print(agent_state.not_a_field)  # E: attr-defined
"""

_ERROR = re.compile(
    r"^(?P<file>[^:\n]+):(?P<line>\d+): error: (?P<text>.*)  \[(?P<code>[a-z-]+)\]$"
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory (and mypy cache) for the module's scripts: the second run reuses what
    the first one read of tenxgraph and pydantic."""
    path = tmp_path_factory.mktemp("typing")
    (path / "mypy.ini").write_text(CONFIG, encoding="utf-8")
    return path


def _mypy(workdir: Path, name: str, body: str) -> tuple[subprocess.CompletedProcess[str], str]:
    script = PRELUDE + textwrap.dedent(body)
    (workdir / name).write_text(script, encoding="utf-8")
    env = {**os.environ, "MYPYPATH": str(SRC)}
    env.pop("MYPY_CACHE_DIR", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--config-file",
            "mypy.ini",
            "--cache-dir",
            str(workdir / ".mypy_cache"),
            "--no-error-summary",
            "--show-error-codes",
            "--hide-error-context",
            name,
        ],
        capture_output=True,
        text=True,
        cwd=workdir,
        env=env,
        timeout=300,
    )
    return proc, script


def test_the_src_under_test_is_this_clones() -> None:
    assert (SRC / "tenxgraph" / "core" / "graph" / "results.py").is_file()


@pytest.mark.timeout(300)
def test_a_correctly_typed_script_passes_mypy_strict(workdir: Path) -> None:
    proc, _ = _mypy(workdir, "correct.py", CORRECT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "", proc.stdout


@pytest.mark.timeout(300)
def test_mistakes_on_typed_results_are_reported(workdir: Path) -> None:
    proc, script = _mypy(workdir, "wrong.py", WRONG)
    expected = {
        (number, line.rpartition("# E: ")[2].strip())
        for number, line in enumerate(script.splitlines(), start=1)
        if "# E: " in line
    }
    got: dict[tuple[int, str], str] = {}
    for line in proc.stdout.splitlines():
        match = _ERROR.match(line)
        if match is not None:
            assert match["file"] == "wrong.py", proc.stdout
            got[int(match["line"]), match["code"]] = match["text"]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert set(got) == expected, proc.stdout + proc.stderr
    texts = sorted(got.items())
    # the types named are the user's: MyState, not AgentState or Any
    assert texts[0][1] == '"MyState" has no attribute "not_a_field"'
    assert texts[1][1] == '"MyState" has no attribute "not_a_field"'
    assert 'Argument 1 to "invoke" of "CompiledGraph" has incompatible type "int"' in texts[2][1]
    assert texts[3][1] == 'TypedDict "RunResult[MyState]" has no key "not_a_key"'
    assert texts[4][1] == '"Approval" has no attribute "not_a_field"'
    assert texts[5][1] == '"AgentState" has no attribute "topic"'
    assert texts[6][1] == '"MyState" has no attribute "not_a_field"'
