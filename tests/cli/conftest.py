"""Running the `tenxgraph` command in-process: `cli("demo", "--yes")` calls `main([...])`
with a stdin of our choosing (a terminal or not) and returns its exit status and output."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tenxgraph.cli import main


class FakeStdin(io.StringIO):
    """Text to read, and whether it claims to be a terminal."""

    def __init__(self, text: str, tty: bool) -> None:
        super().__init__(text)
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


class TtyStdout(io.StringIO):
    """An stdout that says it is a terminal, to see the colours."""

    def isatty(self) -> bool:
        return True


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


Cli = Callable[..., Result]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home directory and default database of the test's own; no colour settings."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.setenv("TENXGRAPH_DB", str(tmp_path / "threads.db"))
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TENXGRAPH_DEBUG", raising=False)
    return folder


@pytest.fixture
def cli(home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    def run(*args: str, stdin: str = "", tty: bool = False) -> Result:
        monkeypatch.setattr(sys, "stdin", FakeStdin(stdin, tty))
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run
