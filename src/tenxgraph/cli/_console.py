"""What every command shares: exit codes, the one-line error, terminal output (colour only on
a terminal), where threads are kept, and the API-key check for real models."""

from __future__ import annotations

import os
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

EXIT_OK = 0
EXIT_FAILED = 1  # the run failed: a model, tool or graph error
EXIT_USAGE = 2  # bad arguments (argparse uses 2 as well)
EXIT_NO_KEY = 3  # no API key for the model (or the provider refused it)
EXIT_NOT_FOUND = 4  # module, attribute, thread or database not found
EXIT_INTERRUPTED = 130  # Ctrl-C

DEFAULT_DB = "~/.tenxgraph/checkpoints.db"  # SqliteCheckpointer's own default
DB_ENV = "TENXGRAPH_DB"
OFFLINE_MODELS = frozenset({"test"})


class CliError(Exception):
    """Ends the command with one line on stderr and `code` as the exit status."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def _isatty(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError, OSError):
        return False


def stdin_is_terminal() -> bool:
    """Whether someone can be asked a question (stdin is a terminal)."""
    return _isatty(sys.stdin)


_CODES = {"dim": "2", "bold": "1", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


@dataclass(slots=True)
class Console:
    """stdout for results, stderr for errors; colours only when stdout is a terminal and
    NO_COLOR is not set, so piped output and CI logs stay plain text."""

    out: TextIO
    err: TextIO
    color: bool

    @classmethod
    def detect(cls) -> Console:
        out = sys.stdout
        color = (
            _isatty(out) and not os.environ.get("NO_COLOR") and os.environ.get("TERM", "") != "dumb"
        )
        return cls(out, sys.stderr, color)

    @property
    def interactive(self) -> bool:
        """A person is watching: stdout is a terminal."""
        return _isatty(self.out)

    def style(self, text: str, name: str) -> str:
        if not self.color or not text:
            return text
        return f"\x1b[{_CODES[name]}m{text}\x1b[0m"

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def line(self, text: str = "") -> None:
        self.write(text + "\n")

    def note(self, text: str) -> None:
        """A dimmed remark about what the command does (where the db is, ...)."""
        self.line(self.style(text, "dim"))


def db_path(given: str | None) -> Path:
    """The SQLite file to use: --db, else $TENXGRAPH_DB, else ~/.tenxgraph/checkpoints.db."""
    return Path(given or os.environ.get(DB_ENV) or DEFAULT_DB).expanduser().absolute()


def existing_db(given: str | None) -> Path:
    """`db_path`, which must be a tenxgraph database already: reading threads never creates
    one, nor adds tenxgraph's tables to another program's SQLite file."""
    path = db_path(given)
    if not path.is_file():
        raise CliError(f"No database at {path} (pass --db PATH)", EXIT_NOT_FOUND)
    try:
        conn = sqlite3.connect(path)  # only read from: nothing is written
        try:
            ours = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tx_schema_version'"
            ).fetchone()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise CliError(f"{path} is not a SQLite database ({exc}); pass --db PATH") from exc
    if ours is None:
        raise CliError(
            f"{path} is not a tenxgraph database (it has no tenxgraph tables); pass --db PATH",
            EXIT_NOT_FOUND,
        )
    return path


def require_key(model: str, offline: str = "use --model test to run offline") -> None:
    """Fail early, in one line, when a real model has no API key in the environment: better
    than a failed run after the first message. Imports litellm, so only for real models."""
    if model in OFFLINE_MODELS:
        return
    from tenxgraph.core.llm import load_litellm

    litellm = load_litellm()
    try:
        provider = litellm.get_llm_provider(model)[1]
    except Exception:
        raise CliError(
            f"Unknown model {model!r}: prefix it with its provider, e.g. openai/gpt-4o-mini, "
            "anthropic/claude-sonnet-4-5 or gemini/gemini-2.5-flash (or 'test' for the "
            "offline model)",
            EXIT_USAGE,
        ) from None
    report = litellm.validate_environment(model)
    missing = list(report.get("missing_keys") or [])
    if missing and not report.get("keys_in_environment"):
        raise CliError(
            f"No API key for {provider} (model {model!r}): set {' or '.join(missing)} in the "
            f"environment, or {offline}",
            EXIT_NO_KEY,
        )


__all__ = [
    "DEFAULT_DB",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_FOUND",
    "EXIT_NO_KEY",
    "EXIT_OK",
    "EXIT_USAGE",
    "CliError",
    "Console",
    "db_path",
    "existing_db",
    "require_key",
    "stdin_is_terminal",
]
