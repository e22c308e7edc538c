"""The `tenxgraph` command: `demo`, `chat`, `run`, `graph`, `threads`, `media` and `serve`.

Every failure ends as one line on stderr and an exit status scripts can rely on (see
`tenxgraph --help`); set TENXGRAPH_DEBUG=1 to get the traceback instead. Either way, the
credentials the process holds are redacted from what is shown.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from logging import Handler
from typing import Any, TextIO

from tenxgraph.cli._console import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NO_KEY,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Console,
)
from tenxgraph.cli._parser import build_parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line `argv` (default: sys.argv[1:]) and return its exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error (2), already printed
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    if getattr(args, "handler", None) is None:
        parser.print_help()
        return EXIT_OK
    console = Console.detect()
    logger, level, handler = _log_to(console.err, args)
    try:
        return _run(args, console)
    finally:  # main() called in a process that goes on (a test, a script): as it was
        logger.removeHandler(handler)
        logger.setLevel(level)


def _run(args: argparse.Namespace, console: Console) -> int:
    problem = _bad_thread(args)
    if problem is not None:  # before anything is opened or written
        console.err.write(f"tenxgraph: error: {problem}\n")
        return EXIT_USAGE
    module_name, _, function_name = str(args.handler).partition(":")
    try:
        module = importlib.import_module(f"tenxgraph.cli.{module_name}")
        handler: Callable[[argparse.Namespace, Console], int] = getattr(module, function_name)
        return handler(args, console)
    except KeyboardInterrupt:
        console.err.write("\ntenxgraph: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `tenxgraph ... | head`: the reader left, nothing to report
        _silence_stdout()
        return EXIT_OK
    except Exception as exc:
        if os.environ.get("TENXGRAPH_DEBUG", "").lower() in ("1", "true", "yes"):
            from tenxgraph.core.redaction import scrub_exception

            scrub_exception(exc)  # the traceback Python prints next
            raise
        code, message = describe(exc)
        console.err.write(f"tenxgraph: error: {message}\n")
        console.err.flush()
        return code


def _log_to(stream: TextIO, args: argparse.Namespace) -> tuple[logging.Logger, int, Handler]:
    """Show the ``tenxgraph`` logs on `stream` at the level -v/-vv/--log-level chose (WARNING
    by default): only tenxgraph's loggers, not the root logger, so never litellm's own
    output. The logger, its level before, and the handler added, to undo it."""
    name = args.log_level or ("WARNING", "INFO", "DEBUG")[min(args.verbose, 2)]
    logger = logging.getLogger("tenxgraph")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(_Format(name == "DEBUG"))
    if args.log_level is None and not args.verbose:  # the command says why a run failed
        handler.addFilter(lambda record: record.name != "tenxgraph.run")
    before = logger.level
    logger.addHandler(handler)
    logger.setLevel(getattr(logging, name))
    return logger, before, handler


class _Format(logging.Formatter):
    """``time LEVEL logger: message``; the traceback of an error only at DEBUG (the command
    already says what failed, in one line)."""

    def __init__(self, tracebacks: bool) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.tracebacks = tracebacks

    def formatException(self, ei: Any) -> str:
        return super().formatException(ei) if self.tracebacks else ""


def _bad_thread(args: argparse.Namespace) -> str | None:
    """What is wrong with `--thread`/THREAD, in one line, or None (the rules of every store:
    non-empty, at most 255 characters, no control characters)."""
    thread = getattr(args, "thread", None)
    if thread is None:
        return None
    from tenxgraph.storage.checkpointer.base import valid_thread_id

    try:
        valid_thread_id(thread)
    except ValueError as exc:
        return one_line(str(exc))
    return None


def describe(exc: BaseException) -> tuple[int, str]:
    """The exit status and the one-line message for an error a command raised, with the
    credentials the process holds redacted."""
    from tenxgraph.core.redaction import redact

    code, message = _describe(exc)
    return code, redact(message)


def _describe(exc: BaseException) -> tuple[int, str]:
    if isinstance(exc, CliError):
        return exc.code, one_line(exc.message)
    from tenxgraph.core.exceptions import GraphError, ModelAuthError, ResourceNotFoundError

    seen: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and cause not in seen:
        seen.append(cause)
        if isinstance(cause, ModelAuthError):
            return EXIT_NO_KEY, one_line(cause.message)
        cause = cause.__cause__
    if isinstance(exc, ResourceNotFoundError):
        return EXIT_NOT_FOUND, one_line(exc.message)
    if isinstance(exc, GraphError):
        return EXIT_FAILED, one_line(str(exc))
    return EXIT_FAILED, one_line(f"{type(exc).__name__}: {exc}")


def one_line(text: str) -> str:
    return " ".join(text.split())


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


__all__ = ["build_parser", "describe", "main"]

if __name__ == "__main__":  # pragma: no cover - `python -m tenxgraph.cli` runs __main__.py
    raise SystemExit(main())
