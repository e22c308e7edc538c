"""`tenxgraph run` (run a user's graph with one message, or answer its pause) and `tenxgraph
graph` (print it as Mermaid)."""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
import uuid
from typing import TYPE_CHECKING, Any

from tenxgraph.cli._console import EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, CliError, Console, db_path
from tenxgraph.cli._loading import load_target, to_app
from tenxgraph.cli._render import StreamPrinter, pause_question
from tenxgraph.core.graph import CompiledGraph
from tenxgraph.core.state import Message
from tenxgraph.storage.checkpointer import InMemoryCheckpointer, SqliteCheckpointer
from tenxgraph.utils.interrupt import pending_interrupt

if TYPE_CHECKING:
    from tenxgraph.core.graph import RunResult


def graph_command(args: argparse.Namespace, console: Console) -> int:
    app = to_app(load_target(args.app), args.app)
    mermaid = app.get_graph().draw_mermaid()
    console.write(f"```mermaid\n{mermaid}```\n" if args.markdown else mermaid)
    return EXIT_OK


def command(args: argparse.Namespace, console: Console) -> int:
    answering = args.resume is not None or args.proceed
    if args.resume is not None and args.proceed:
        raise CliError("Give either --resume ANSWER or --continue, not both", EXIT_USAGE)
    if answering and args.input is not None:
        raise CliError(
            "--input starts a new turn and --resume/--continue go on with a paused one: give "
            "one of them",
            EXIT_USAGE,
        )
    if not answering and args.input is None:
        raise CliError("run needs --input TEXT (or --resume ANSWER --thread ID)", EXIT_USAGE)
    if answering and args.thread is None:
        raise CliError("--resume and --continue need --thread ID: the paused thread", EXIT_USAGE)
    text = sys.stdin.read() if args.input == "-" else args.input
    return asyncio.run(_run(args, console, text))


def _app(args: argparse.Namespace) -> CompiledGraph:
    """The user's app, keeping its threads in SQLite unless it brought a checkpointer (the
    in-memory store `compile()` gives an app without one is not a choice: it is replaced)."""
    store = SqliteCheckpointer(db_path(args.db))
    app = to_app(load_target(args.app), args.app, store)
    if not app.adopt_checkpointer(store) and app.checkpointer is not store and args.db:
        raise CliError(
            f"{args.app} was compiled with its own checkpointer "
            f"({type(app.checkpointer).__name__}); leave out --db",
            EXIT_USAGE,
        )
    return app


async def _run(args: argparse.Namespace, console: Console, text: str | None) -> int:
    app = _app(args)
    thread = args.thread if args.thread is not None else f"run-{uuid.uuid4().hex[:8]}"
    config = {"thread_id": thread}
    where = _where(app)
    try:
        state = await app.aget_state(config)
        waiting = pending_interrupt(state) if state is not None else None
        payload: dict[str, Any] | None
        if text is not None:
            if waiting is not None:
                question = pause_question({"interrupt": waiting.model_dump()})
                raise CliError(
                    f"Thread {thread!r} is paused ({question}): answer it with --resume ANSWER"
                )
            payload = {"messages": [Message.text_message(text)]}
        else:
            if state is None:
                raise CliError(f"No thread {thread!r} in {where}", EXIT_NOT_FOUND)
            payload = {"resume": _answer(args.resume)} if args.resume is not None else None
        if args.stream:
            printer = StreamPrinter(console, speaker=None)
            async for chunk in app.astream(payload, config):
                printer.feed(chunk)
            printer.finish()
            pause = printer.pause
        else:
            result = await app.ainvoke(payload, config)
            answer = _final_text(result.get("messages") or [])
            if answer:
                console.line(answer)
            pause = _pause_of(result)
    finally:
        await app.aclose()
    if pause is not None:
        _explain_pause(console, app, args, thread, pause)
    return EXIT_OK


def _answer(raw: str) -> Any:
    """--resume's text; a JSON object or list is parsed (for a response_schema)."""
    if raw.lstrip().startswith(("{", "[")):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            pass
    return raw


def _final_text(messages: list[Message]) -> str:
    for message in reversed(messages):
        if message.role == "assistant" and message.text():
            return message.text()
    return ""


def _pause_of(result: RunResult) -> dict[str, Any] | None:
    paused = result.get("interrupted")
    if paused is None:
        return None
    return {**paused, "interrupt": result.get("interrupt")}


def _explain_pause(
    console: Console,
    app: CompiledGraph,
    args: argparse.Namespace,
    thread: str,
    pause: dict[str, Any],
) -> None:
    console.line(console.style(f"paused: {pause_question(pause)}", "yellow"))
    if isinstance(app.checkpointer, InMemoryCheckpointer):
        console.line(
            "This app keeps its threads in memory, so the pause ended with this command: compile "
            "it without a checkpointer (threads then go to --db) or with SqliteCheckpointer to "
            "resume it later."
        )
        return
    how = ["--resume", "ANSWER"] if pause.get("interrupt") else ["--continue"]
    line = ["tenxgraph", "run", args.app, "--thread", thread, *how]
    if args.db:
        line += ["--db", args.db]
    console.line(f"resume with: {shlex.join(line)}")


def _where(app: CompiledGraph) -> str:
    if isinstance(app.checkpointer, SqliteCheckpointer) and app.checkpointer.db_path is not None:
        return str(app.checkpointer.db_path)
    return f"the app's {type(app.checkpointer).__name__}"


__all__ = ["command", "graph_command"]
