"""The command itself: help with the exit codes, version, usage errors, error mapping."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tenxgraph
from tenxgraph.cli import describe, main
from tenxgraph.cli._console import DEFAULT_DB, CliError, Console, db_path
from tenxgraph.core.exceptions import ModelAuthError, NodeError, ResourceNotFoundError
from tenxgraph.storage.checkpointer.sqlite import DEFAULT_DB_PATH
from tests.cli.conftest import Cli


def test_help_documents_commands_and_exit_codes(cli: Cli) -> None:
    result = cli("--help")
    assert result.code == 0
    for command in ("demo", "chat", "run", "graph", "threads"):
        assert f"    {command} " in result.out
    for line in (
        "  0    success",
        "  1    the run failed",
        "  2    usage error",
        "  3    no API key",
        "  4    not found",
    ):
        assert line in result.out


def test_no_command_prints_help(cli: Cli) -> None:
    result = cli()
    assert result.code == 0
    assert result.out.startswith("usage: tenxgraph")


def test_version(cli: Cli) -> None:
    result = cli("--version")
    assert result.code == 0
    assert result.out == f"tenxgraph {tenxgraph.__version__}\n"


@pytest.mark.parametrize("args", [["bogus"], ["threads"], ["run"], ["demo", "--nope"]])
def test_usage_errors_exit_2(cli: Cli, args: list[str]) -> None:
    result = cli(*args)
    assert result.code == 2
    assert "error:" in result.err


def test_unknown_model_name_is_a_usage_error(cli: Cli) -> None:
    result = cli("chat", "--model", "no-such-provider-model-xyz")
    assert result.code == 2
    assert "prefix it with its provider" in result.err


def test_describe_maps_errors_to_exit_codes() -> None:
    auth = ModelAuthError("No API key for openai: set OPENAI_API_KEY")
    wrapped = NodeError("Error in node 'agent': ...")
    wrapped.__cause__ = auth
    assert describe(wrapped) == (3, "No API key for openai: set OPENAI_API_KEY")
    assert describe(ResourceNotFoundError("Thread 'x' does not exist"))[0] == 4
    assert describe(CliError("multi\nline   text", 4)) == (4, "multi line text")
    assert describe(RuntimeError("boom")) == (1, "RuntimeError: boom")


def test_describe_redacts_the_credentials_the_process_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = "gsk_" + "Zq3" * 16
    monkeypatch.setenv("GROQ_API_KEY", key)
    for error in (RuntimeError(f"boom {key}"), CliError(f"bad {key}"), NodeError(f"x {key}")):
        message = describe(error)[1]
        assert key not in message
        assert "[REDACTED:GROQ_API_KEY]" in message


def test_default_db_is_the_checkpointer_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert DEFAULT_DB == DEFAULT_DB_PATH
    monkeypatch.delenv("TENXGRAPH_DB", raising=False)
    assert db_path(None) == Path(DEFAULT_DB_PATH).expanduser()
    monkeypatch.setenv("TENXGRAPH_DB", "/tmp/elsewhere.db")
    assert db_path(None) == Path("/tmp/elsewhere.db")
    assert db_path("given.db") == Path("given.db").absolute()


def test_console_colour_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.cli.conftest import TtyStdout

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(sys, "stdout", TtyStdout())
    assert Console.detect().color
    monkeypatch.setenv("NO_COLOR", "1")
    assert not Console.detect().color
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert not Console.detect().color


def test_main_returns_instead_of_exiting_on_usage_errors() -> None:
    assert main(["--definitely-not-an-option"]) == 2


def test_console_script_runs(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("tenxgraph")
    if not script.exists():
        pytest.skip("the console script is not installed next to this interpreter")
    proc = subprocess.run(
        [str(script), "threads", "list", "--db", str(tmp_path / "none.db")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 4
    assert (
        proc.stderr == f"tenxgraph: error: No database at {tmp_path / 'none.db'} (pass --db PATH)\n"
    )
