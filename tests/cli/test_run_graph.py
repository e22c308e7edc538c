"""`tenxgraph run` and `tenxgraph graph` on graphs written to tmp_path, by module name and by
file path; pauses, resumes, and the not-found / usage exit statuses."""

from __future__ import annotations

import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import Cli

GRAPH = '''
from typing import Literal

from tenxgraph import END, START, StateGraph
from tenxgraph.core.llm import FunctionModel
from tenxgraph.core.state import AgentState
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import interrupt


def greet(state: AgentState) -> str:
    return "Hello, " + state.context[-1].text() + "!"


def approve(state: AgentState) -> str:
    answer = interrupt({"asked": state.context[-2].text()}, message="Allow it?")
    return f"You said {answer!r}."


def route(state: AgentState) -> str:
    return "yes" if "please" in state.context[-1].text() else "no"


def boom(state: AgentState) -> str:
    raise ValueError("this node always fails")


builder = StateGraph()
builder.add_node(greet)
builder.add_node(approve)
builder.add_edge(START, "greet")
builder.add_conditional_edges("greet", route, {"yes": "approve", "no": END})
app = builder.compile()

memory_app = builder.compile(checkpointer=InMemoryCheckpointer())

broken = StateGraph()
broken.add_node(boom)
broken.add_edge(START, "boom")


def make_app():
    return builder.compile()


def needs_args(x):
    return builder


def lookup(order_id: int) -> str:
    """Find an order."""
    return f"order {order_id}: delivered"


def model(messages, info):
    from tenxgraph.core.state import ToolCallBlock

    if messages[-1].role == "tool":
        return "It was delivered."
    return ToolCallBlock(id="c1", name="lookup", args={"order_id": 7})


react = ReactAgent(FunctionModel(model), [lookup])
not_a_graph = 42
'''


@pytest.fixture
def graph_file(tmp_path: Path) -> Path:
    path = tmp_path / "usergraph.py"
    path.write_text(GRAPH)
    return path


@pytest.fixture
def graph_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The same graph as an importable module with a name of its own, from the cwd."""
    name = f"usergraph_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(GRAPH)
    monkeypatch.chdir(tmp_path)
    yield name
    sys.modules.pop(name, None)


def test_run_prints_the_final_answer(cli: Cli, graph_file: Path) -> None:
    result = cli("run", f"{graph_file}:app", "--input", "Ada")
    assert result.code == 0, result.err
    assert result.out == "Hello, Ada!\n"


def test_run_by_module_name(cli: Cli, graph_module: str) -> None:
    result = cli("run", f"{graph_module}:app", "--input", "Bob")
    assert result.code == 0, result.err
    assert result.out == "Hello, Bob!\n"


def test_run_a_state_graph_a_factory_and_a_react_agent(cli: Cli, graph_file: Path) -> None:
    assert cli("run", f"{graph_file}:builder", "--input", "A").out == "Hello, A!\n"
    assert cli("run", f"{graph_file}:make_app", "--input", "B").out == "Hello, B!\n"
    streamed = cli("run", f"{graph_file}:react", "--input", "where is 7?", "--stream")
    assert streamed.code == 0, streamed.err
    assert "  -> lookup(order_id=7)" in streamed.out
    assert "  <- lookup: order 7: delivered" in streamed.out
    assert streamed.out.endswith("It was delivered.\n")


def test_run_pauses_prints_the_resume_command_and_resumes(
    cli: Cli, graph_file: Path, tmp_path: Path
) -> None:
    db = str(tmp_path / "run.db")
    spec = f"{graph_file}:app"
    paused = cli("run", spec, "--input", "Ada please", "--thread", "t1", "--db", db)
    assert paused.code == 0, paused.err
    assert paused.out.splitlines() == [
        "Hello, Ada please!",
        "paused: Allow it?",
        f"resume with: tenxgraph run {spec} --thread t1 --resume ANSWER --db {db}",
    ]
    again = cli("run", spec, "--input", "more", "--thread", "t1", "--db", db)
    assert again.code == 1
    assert "Thread 't1' is paused (Allow it?): answer it with --resume ANSWER" in again.err

    resumed = cli("run", spec, "--thread", "t1", "--db", db, "--resume", "yes", "--stream")
    assert resumed.code == 0, resumed.err
    assert resumed.out == "You said 'yes'.\n"
    shown = cli("threads", "show", "t1", "--db", db)
    assert "completed, 3 messages" in shown.out
    assert "tokens:" not in shown.out  # no model, no usage


def test_run_resume_parses_json_objects(cli: Cli, graph_file: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "run.db")
    cli("run", f"{graph_file}:app", "--input", "please", "--thread", "j", "--db", db)
    resumed = cli("run", f"{graph_file}:app", "--thread", "j", "--db", db, "--resume", '{"ok": 1}')
    assert resumed.out == "You said {'ok': 1}.\n"


def test_run_keeps_threads_in_the_default_db(cli: Cli, graph_file: Path, tmp_path: Path) -> None:
    cli("run", f"{graph_file}:app", "--input", "Ada", "--thread", "d1")
    listed = cli("threads", "list")  # $TENXGRAPH_DB, set by the fixture
    assert listed.code == 0, listed.err
    assert "d1" in listed.out
    assert (tmp_path / "threads.db").is_file()


def test_run_an_in_memory_app_says_it_cannot_be_resumed(cli: Cli, graph_file: Path) -> None:
    result = cli("run", f"{graph_file}:memory_app", "--input", "please")
    assert result.code == 0
    assert "paused: Allow it?" in result.out
    assert "keeps its threads in memory" in result.out
    refused = cli("run", f"{graph_file}:memory_app", "--input", "x", "--db", "other.db")
    assert refused.code == 2
    assert "own checkpointer" in refused.err


def test_run_input_from_stdin(cli: Cli, graph_file: Path) -> None:
    assert cli("run", f"{graph_file}:app", "--input", "-", stdin="Cleo").out == "Hello, Cleo!\n"


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["no_such_module_xyz:app", "--input", "x"], 4, "No module named 'no_such_module_xyz'"),
        (["{file}:nope", "--input", "x"], 4, "has no attribute 'nope' (graphs it has: app,"),
        (["missing/file.py:app", "--input", "x"], 4, "No file 'missing/file.py'"),
        (["{file}", "--input", "x"], 2, "Expected MODULE:APP"),
        (["{file}:not_a_graph", "--input", "x"], 2, "is a int, not a graph"),
        (["{file}:needs_args", "--input", "x"], 2, "is a function that needs arguments"),
        (["{file}:broken", "--input", "x"], 1, "[NODE_001] Error in node 'boom'"),
        (["{file}:app"], 2, "run needs --input TEXT"),
        (["{file}:app", "--resume", "yes"], 2, "need --thread ID"),
        (["{file}:app", "--resume", "y", "--continue", "--thread", "t"], 2, "not both"),
        (["{file}:app", "--resume", "y", "--thread", "nope"], 4, "No thread 'nope' in"),
        (["{file}:app", "--input", "x", "--resume", "y", "--thread", "t"], 2, "give one of"),
    ],
)
def test_run_errors(cli: Cli, graph_file: Path, args: list[str], code: int, message: str) -> None:
    result = cli("run", *(a.replace("{file}", str(graph_file)) for a in args))
    assert result.code == code, result
    assert message in result.err
    assert result.err.startswith("tenxgraph: error: ")
    assert result.err.count("\n") == 1
    assert "Traceback" not in result.err


def test_run_reports_a_module_that_fails_to_import(cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import not_installed_dependency_xyz\n")
    result = cli("run", f"{bad}:app", "--input", "x")
    assert result.code == 1
    assert "Importing" in result.err
    assert "not_installed_dependency_xyz" in result.err


def test_debug_shows_the_traceback(
    cli: Cli, graph_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TENXGRAPH_DEBUG", "1")
    with pytest.raises(Exception, match="NODE_001"):
        cli("run", f"{graph_file}:broken", "--input", "x")


def test_graph_prints_mermaid(cli: Cli, graph_file: Path) -> None:
    result = cli("graph", f"{graph_file}:app")
    assert result.code == 0, result.err
    assert result.out == textwrap.dedent(
        """\
        flowchart TD
            __start__(["START"])
            greet["greet"]
            approve["approve"]
            __end__(["END"])
            __start__ --> greet
            greet -.->|"yes"| approve
            greet -.->|"no"| __end__
            approve --> __end__
        """
    )


def test_graph_of_a_react_agent_by_module_in_markdown(cli: Cli, graph_module: str) -> None:
    result = cli("graph", f"{graph_module}:react", "--markdown")
    assert result.code == 0, result.err
    assert result.out.startswith("```mermaid\nflowchart TD\n")
    assert result.out.endswith("```\n")
    assert '    agent("agent<br/>Agent(function)")' in result.out
    assert '    tools[["tools<br/>ToolNode: lookup"]]' in result.out
    assert '    agent -.->|"tools"| tools' in result.out


def test_graph_not_found(cli: Cli) -> None:
    result = cli("graph", "nowhere_module_abc:app")
    assert result.code == 4
    assert "No module named 'nowhere_module_abc'" in result.err
