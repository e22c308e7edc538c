"""`tenxgraph -v` / `-vv` / `--log-level`: the tenxgraph logs on stderr, nothing else."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.cli.conftest import Cli

GRAPH = """
from tenxgraph import END, START, StateGraph
from tenxgraph.core.state import AgentState


def greet(state: AgentState) -> str:
    return "Hello, " + state.context[-1].text() + "!"


def boom(state: AgentState) -> str:
    raise ValueError("this node always fails")


builder = StateGraph()
builder.add_node(greet)
builder.add_edge(START, "greet")
builder.add_edge("greet", END)
app = builder.compile()

broken = StateGraph()
broken.add_node(boom)
broken.add_edge(START, "boom")
"""


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    path = tmp_path / "loggraph.py"
    path.write_text(GRAPH)
    return path


def log_lines(err: str, level: str = "INFO") -> list[str]:
    return [line for line in err.splitlines() if f" {level} tenxgraph." in line]


def test_run_with_v_prints_the_run_start_and_end_on_stderr(cli: Cli, graph: Path) -> None:
    result = cli("-v", "run", f"{graph}:app", "--input", "Ada", "--thread", "t-v")
    assert result.code == 0, result.err
    assert result.out == "Hello, Ada!\n"  # the answer alone on stdout
    started, ended = log_lines(result.err)
    assert "INFO tenxgraph.run: run started: graph=" in started
    assert "thread=t-v" in started
    assert "INFO tenxgraph.run: run completed:" in ended
    assert " ms; 0 model calls" in ended


def test_without_v_a_run_logs_nothing(cli: Cli, graph: Path) -> None:
    result = cli("run", f"{graph}:app", "--input", "Ada")
    assert result.code == 0
    assert result.err == ""


def test_a_failed_run_is_one_line_by_default_and_logged_with_v(cli: Cli, graph: Path) -> None:
    quiet = cli("run", f"{graph}:broken", "--input", "x")
    assert quiet.code == 1
    assert quiet.err.count("\n") == 1  # the command's own line only
    loud = cli("-v", "run", f"{graph}:broken", "--input", "x")
    assert loud.code == 1
    [failed] = log_lines(loud.err, "ERROR")
    assert "run failed:" in failed
    assert "Traceback" not in loud.err  # tracebacks only at DEBUG
    debug = cli("-vv", "run", f"{graph}:broken", "--input", "x")
    assert "Traceback" in debug.err
    assert "ValueError: this node always fails" in debug.err


def test_chat_and_demo_with_v(cli: Cli, tmp_path: Path) -> None:
    chat = cli("-v", "chat", "--model", "test", "--db", str(tmp_path / "c.db"), stdin="hi\n")
    assert chat.code == 0, chat.err
    assert len([line for line in log_lines(chat.err) if "tenxgraph.run: run " in line]) == 2
    demo = cli("-v", "demo", "--yes", "--db", str(tmp_path / "d.db"))
    assert demo.code == 0, demo.err
    runs = [line for line in log_lines(demo.err) if "tenxgraph.run:" in line]
    assert any("run started" in line for line in runs)
    assert any("run paused" in line for line in runs)  # the refund waits for approval
    assert any("run completed" in line for line in runs)


def test_log_level_debug_and_any_case(cli: Cli, graph: Path) -> None:
    result = cli("--log-level", "debug", "run", f"{graph}:app", "--input", "Ada")
    assert result.code == 0, result.err
    assert len(log_lines(result.err)) == 2
    quiet = cli("--log-level", "ERROR", "-v", "run", f"{graph}:app", "--input", "Ada")
    assert quiet.err == ""  # --log-level wins over -v


def test_a_bad_log_level_is_a_usage_error(cli: Cli) -> None:
    result = cli("--log-level", "LOUD", "run", "x:y")
    assert result.code == 2
    assert "unknown log level 'LOUD'; choose one of DEBUG, INFO, WARNING, ERROR" in result.err


def test_help_documents_the_options(cli: Cli) -> None:
    shown = cli("--help").out
    assert "-v, --verbose" in shown
    assert "--log-level LEVEL" in shown


def test_the_command_leaves_the_loggers_as_they_were(cli: Cli, graph: Path) -> None:
    root = logging.getLogger()
    ours = logging.getLogger("tenxgraph")
    before = (list(root.handlers), root.level, list(ours.handlers), ours.level)
    assert cli("-vv", "run", f"{graph}:app", "--input", "Ada").code == 0
    assert (list(root.handlers), root.level, list(ours.handlers), ours.level) == before
