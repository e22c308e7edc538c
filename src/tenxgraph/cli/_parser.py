"""The command line's grammar. Each command names the module that runs it, imported only when
that command is chosen, so `tenxgraph --help` and `--version` stay instant."""

from __future__ import annotations

import argparse
from typing import Any

from tenxgraph import __version__

EPILOG = """\
exit codes:
  0    success
  1    the run failed (a model, tool or graph error; the reason is on stderr)
  2    usage error (bad arguments)
  3    no API key for the model (or the provider refused it)
  4    not found: module, attribute, file, thread or database
  130  interrupted (Ctrl-C)

environment:
  TENXGRAPH_DB     SQLite file for chat, run and threads (default ~/.tenxgraph/checkpoints.db)
  NO_COLOR         no colours (there are none anyway when output is not a terminal)
  TENXGRAPH_DEBUG  set to 1 to see the full traceback of an error

Start with:  tenxgraph demo
"""

DB_HELP = "SQLite file with the threads (default: $TENXGRAPH_DB or ~/.tenxgraph/checkpoints.db)"
DSN_HELP = (
    "read the threads from PostgreSQL instead of SQLite, e.g. "
    "postgresql://user:password@host:5432/dbname"
)
SCHEMA_HELP = "the PostgreSQL schema holding the threads (with --dsn; default: public)"
APP_HELP = (
    "your graph: module.path:attribute or path/to/file.py:attribute; the attribute is a "
    "compiled graph, a StateGraph (compiled here), or a function without arguments returning one"
)


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def log_level(text: str) -> str:
    """A `--log-level` value, by name in any case."""
    level = text.strip().upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(
            f"unknown log level {text!r}; choose one of {', '.join(LOG_LEVELS)}"
        )
    return level


def seconds(text: str) -> float:
    """A number of seconds >= 0 (`media gc --older-than`)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected seconds, a number >= 0, not {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tenxgraph",
        description="tenxgraph: an async-first agent runtime for Python.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tenxgraph {__version__}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log what runs do on stderr: -v at INFO (each run's start and end, its tokens and "
        "cost, retries, fallbacks), -vv at DEBUG",
    )
    parser.add_argument(
        "--log-level",
        type=log_level,
        metavar="LEVEL",
        help="the level of the tenxgraph logs on stderr: DEBUG, INFO, WARNING (the default), "
        "ERROR or CRITICAL; overrides -v",
    )
    commands = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="watch a support agent stream, call tools, pause for approval and resume from disk",
        description=(
            "A support agent with two tools (lookup_order, refund; a refund waits for your "
            "approval) on the embedded SQLite checkpointer. It streams its reasoning, tokens and "
            "tool calls, pauses, then a new app resumes the same thread from disk. Offline by "
            "default (a scripted model, no API key); --model uses a real one."
        ),
    )
    demo.add_argument(
        "--model",
        help="a litellm model name, e.g. openai/gpt-4o-mini, or 'test' for the offline "
        "TestModel (default: a scripted offline model)",
    )
    demo.add_argument("--yes", action="store_true", help="approve the refund without asking")
    demo.add_argument(
        "--db",
        help="SQLite file (default: ~/.tenxgraph/demo.db, or one in the temp directory "
        "when the home directory is not writable)",
    )
    demo.add_argument(
        "--thread",
        help="thread id (default: a new demo-XXXXXXXX); a paused thread is picked up "
        "where it stopped",
    )
    demo.set_defaults(handler="demo:command")

    chat = commands.add_parser(
        "chat",
        help="a streaming chat on a persistent thread",
        description=(
            "Chat with a model on a thread kept in SQLite; start it again with the same --thread "
            "to go on where you left off. /exit or Ctrl-D ends it. Piped stdin works: each line "
            "is one turn. Exit status 1 if a turn failed."
        ),
    )
    chat.add_argument(
        "--model",
        default="test",
        help="a litellm model name, e.g. openai/gpt-4o-mini (default: test, the offline model)",
    )
    chat.add_argument("--thread", default="chat", help="thread id (default: chat)")
    chat.add_argument("--db", help=DB_HELP)
    chat.set_defaults(handler="chat:command")

    run = commands.add_parser(
        "run",
        help="run your own graph with one user message",
        description=(
            "Import your graph and run it with --input as the user message; prints the final "
            "assistant text (or streams with --stream). If the run pauses at an interrupt, it "
            "prints the question and the command that answers it. An app without a "
            "checkpointer keeps its threads in SQLite (--db)."
        ),
    )
    run.add_argument("app", metavar="MODULE:APP", help=APP_HELP)
    run.add_argument("--input", help="the user message ('-' reads it from stdin)")
    run.add_argument("--thread", help="thread id (default: a new run-XXXXXXXX)")
    run.add_argument("--stream", action="store_true", help="print tokens and tool calls live")
    run.add_argument(
        "--resume",
        metavar="ANSWER",
        help="answer the interrupt the thread is paused at (a JSON object or list is parsed, "
        "anything else is text)",
    )
    run.add_argument(
        "--continue",
        dest="proceed",
        action="store_true",
        help="continue a thread paused before or after a node",
    )
    run.add_argument("--db", help=DB_HELP)
    run.set_defaults(handler="run:command")

    graph = commands.add_parser(
        "graph",
        help="print your graph as a Mermaid flowchart",
        description="Print the graph as Mermaid (paste it into a ```mermaid block of any "
        "Markdown file). Dotted edges are conditional, labelled with the condition's result.",
    )
    graph.add_argument("app", metavar="MODULE:APP", help=APP_HELP)
    graph.add_argument("--markdown", action="store_true", help="wrap it in a ```mermaid fence")
    graph.set_defaults(handler="run:graph_command")

    threads = commands.add_parser(
        "threads",
        help="list, show or delete stored threads",
        description="Inspect the threads in a SQLite file, or in PostgreSQL with --dsn.",
    )
    threads.add_argument("--db", help=DB_HELP)
    threads.add_argument("--dsn", help=DSN_HELP)
    threads.add_argument("--schema", help=SCHEMA_HELP)
    actions = threads.add_subparsers(title="actions", dest="action", metavar="ACTION")
    actions.required = True
    listing = actions.add_parser("list", help="thread ids, message counts and status")
    show = actions.add_parser("show", help="one thread's messages and status")
    show.add_argument("thread", metavar="THREAD")
    delete = actions.add_parser("delete", help="delete one thread")
    delete.add_argument("thread", metavar="THREAD")
    delete.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    for action in (listing, show, delete):
        # also after the action; SUPPRESS keeps a --db given before it
        action.add_argument("--db", default=argparse.SUPPRESS, help=DB_HELP)
        action.add_argument("--dsn", default=argparse.SUPPRESS, help=DSN_HELP)
        action.add_argument("--schema", default=argparse.SUPPRESS, help=SCHEMA_HELP)
    threads.set_defaults(handler="threads:command")

    _media_command(commands)

    serve = commands.add_parser(
        "serve",
        help="serve your graphs over HTTP (the Agent Protocol; LangGraph's clients work)",
        description="Serve graphs over HTTP: the Agent Protocol and the part of LangGraph's "
        "server API its clients use, with a chat page at /. Needs the serve extra: "
        'pip install "tenxgraph[serve]". Several processes given one PostgreSQL --db share '
        "the work.",
    )
    serve.add_argument("apps", metavar="MODULE:APP", nargs="+", help=APP_HELP)
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=2024, help="port to bind (default 2024)")
    serve.add_argument(
        "--db",
        default=None,
        help="a SQLite file (default tenxgraph-server.db) or a postgresql:// DSN: the server's "
        "threads, runs and events, and the checkpoints of graphs compiled without a checkpointer",
    )
    serve.add_argument("--redis", default=None, help="a redis:// URL: wake workers through Redis")
    serve.add_argument(
        "--auth-token",
        action="append",
        default=None,
        metavar="TOKEN=USER",
        help="accept `Authorization: Bearer TOKEN` as USER (repeatable); also "
        "TENXGRAPH_AUTH_TOKENS=tok1=alice,tok2=bob. Without any, anyone may call the server",
    )
    serve.add_argument(
        "--lease-ttl",
        type=float,
        default=30.0,
        help="seconds a run stays this worker's without a heartbeat (default 30): how soon "
        "another worker resumes the runs of one that died",
    )
    serve.add_argument(
        "--max-runs",
        type=int,
        default=64,
        help="runs this worker executes at once (0: serve the API only, other workers execute)",
    )
    serve.set_defaults(handler="serve:command")
    return parser


def _media_command(commands: Any) -> None:
    media = commands.add_parser(
        "media",
        help="clean up the media store of a database",
        description="The media store of a SQLite file (--db) or a PostgreSQL database (--dsn, "
        "or a postgresql:// DSN as --db): images and documents kept out of the checkpoints.",
    )
    media.add_argument("--db", help=DB_HELP + "; a postgresql:// DSN reads PostgreSQL")
    media.add_argument("--dsn", help=DSN_HELP)
    media.add_argument("--schema", help=SCHEMA_HELP)
    actions = media.add_subparsers(title="actions", dest="action", metavar="ACTION")
    actions.required = True
    gc = actions.add_parser(
        "gc",
        help="delete the media no thread owns, older than a grace period",
        description="Delete the media blobs no thread owns (put in the store but never saved "
        "into a thread, e.g. by a Message.with_image that was never sent) that were stored "
        "more than --older-than seconds ago, and print how many and how many bytes.",
    )
    gc.add_argument(
        "--older-than",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="only blobs stored more than SECONDS ago (default 86400, one day: a blob about "
        "to be saved into a thread is not swept)",
    )
    gc.add_argument("--dry-run", action="store_true", help="list what would go; delete nothing")
    gc.add_argument("--db", default=argparse.SUPPRESS, help=DB_HELP)
    gc.add_argument("--dsn", default=argparse.SUPPRESS, help=DSN_HELP)
    gc.add_argument("--schema", default=argparse.SUPPRESS, help=SCHEMA_HELP)
    media.set_defaults(handler="media:command")


__all__ = ["EPILOG", "build_parser"]
