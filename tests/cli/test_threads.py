"""`tenxgraph threads list|show|delete` on a SQLite file of threads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import Cli


@pytest.fixture
def db(cli: Cli, tmp_path: Path) -> str:
    """A database with a chat thread 'c' (2 turns) and a demo thread 'd'."""
    path = str(tmp_path / "t.db")
    assert cli("chat", "--thread", "c", "--db", path, stdin="one\ntwo\n").code == 0
    assert cli("demo", "--yes", "--thread", "d", "--db", path).code == 0
    return path


def test_list(cli: Cli, db: str) -> None:
    result = cli("threads", "list", "--db", db)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].split() == ["THREAD", "MESSAGES", "STATUS", "UPDATED"]
    assert [line.split()[:3] for line in lines[1:]] == [
        ["c", "4", "completed"],
        ["d", "6", "completed"],
    ]


def test_db_may_come_before_the_action(cli: Cli, db: str) -> None:
    assert "completed" in cli("threads", "--db", db, "list").out


def test_show(cli: Cli, db: str) -> None:
    result = cli("threads", "show", "c", "--db", db)
    assert result.code == 0, result.err
    assert result.out.splitlines()[1:5] == [
        "user: one",
        "assistant: test answer to: one",
        "user: two",
        "assistant: test answer to: two",
    ]
    assert result.out.splitlines()[-1].startswith("tokens: ")


def test_show_a_paused_thread(cli: Cli, tmp_path: Path) -> None:
    path = str(tmp_path / "p.db")
    graph = tmp_path / "pausing.py"
    graph.write_text(
        "from tenxgraph import START, StateGraph\n"
        "from tenxgraph.utils import interrupt\n"
        "def ask(state):\n"
        "    return interrupt({'n': 1}, message='Go on?')\n"
        "g = StateGraph()\n"
        "g.add_node(ask)\n"
        "g.add_edge(START, 'ask')\n"
    )
    assert cli("run", f"{graph}:g", "--input", "hi", "--thread", "p", "--db", path).code == 0
    shown = cli("threads", "show", "p", "--db", path)
    assert "thread p: paused, 1 messages" in shown.out
    assert "paused: Go on?" in shown.out
    assert cli("threads", "list", "--db", path).out.splitlines()[1].split()[:3] == [
        "p",
        "1",
        "paused",
    ]


def test_delete_needs_yes_without_a_terminal(cli: Cli, db: str) -> None:
    refused = cli("threads", "delete", "c", "--db", db)
    assert refused.code == 2
    assert "there is no terminal to confirm on; add --yes" in refused.err
    deleted = cli("threads", "delete", "c", "--db", db, "--yes")
    assert deleted.code == 0
    assert "Deleted thread 'c'" in deleted.out
    assert [line.split()[0] for line in cli("threads", "list", "--db", db).out.splitlines()] == [
        "THREAD",
        "d",
    ]


def test_delete_asks_on_a_terminal(cli: Cli, db: str) -> None:
    kept = cli("threads", "delete", "d", "--db", db, stdin="n\n", tty=True)
    assert kept.code == 0
    assert "Delete thread 'd' from" in kept.out
    assert "Nothing deleted." in kept.out
    gone = cli("threads", "delete", "d", "--db", db, stdin="y\n", tty=True)
    assert gone.code == 0
    assert "Deleted thread 'd'" in gone.out
    assert cli("threads", "show", "d", "--db", db).code == 4


@pytest.mark.parametrize("action", [["show", "zz"], ["delete", "zz", "--yes"]])
def test_unknown_thread_is_not_found(cli: Cli, db: str, action: list[str]) -> None:
    result = cli("threads", *action, "--db", db)
    assert result.code == 4
    assert result.err == f"tenxgraph: error: No thread 'zz' in {db}\n"


def test_missing_database_is_not_found_and_not_created(cli: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "nope.db"
    result = cli("threads", "list", "--db", str(missing))
    assert result.code == 4
    assert "No database at" in result.err
    assert not missing.exists()


def test_empty_database(cli: Cli, db: str) -> None:
    cli("threads", "delete", "c", "--db", db, "--yes")
    cli("threads", "delete", "d", "--db", db, "--yes")
    assert cli("threads", "list", "--db", db).out == f"No threads in {db}.\n"
