"""`tenxgraph chat`: a streaming chat on a thread kept in SQLite, so starting it again with the
same --thread goes on with the same conversation."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from tenxgraph.cli._console import (
    EXIT_FAILED,
    EXIT_OK,
    CliError,
    Console,
    db_path,
    require_key,
    stdin_is_terminal,
)
from tenxgraph.cli._render import StreamPrinter, pause_question
from tenxgraph.core.graph import Agent, CompiledGraph, StateGraph
from tenxgraph.core.state import Message
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tenxgraph.utils.constants import END, START
from tenxgraph.utils.interrupt import pending_interrupt

SYSTEM_PROMPT = "You are a helpful assistant. Answer clearly and briefly."
_EXIT_WORDS = frozenset({"/exit", "/quit"})


def chat_app(model: str, db: Path) -> CompiledGraph:
    graph = StateGraph()
    graph.add_node("assistant", Agent(model, system_prompt=SYSTEM_PROMPT))
    graph.add_edge(START, "assistant")
    graph.add_edge("assistant", END)
    return graph.compile(checkpointer=SqliteCheckpointer(db))


def command(args: argparse.Namespace, console: Console) -> int:
    require_key(args.model)
    return asyncio.run(_chat(console, args.model, db_path(args.db), args.thread))


async def _chat(console: Console, model: str, db: Path, thread: str) -> int:
    app = chat_app(model, db)
    config = {"thread_id": thread}
    interactive = stdin_is_terminal()
    failed = False
    try:
        state = await app.aget_state(config)
        if state is not None and (waiting := pending_interrupt(state)) is not None:
            raise CliError(
                f"Thread {thread!r} is paused at an interrupt of another app "
                f"({pause_question({'interrupt': waiting.model_dump()})}); chat on another "
                "--thread"
            )
        console.note(f"model {model}, thread {thread!r} in {db}")
        if state is not None and state.context:
            console.line(
                f"Continuing thread {thread!r}: {len(state.context)} earlier messages loaded."
            )
        else:
            console.line(f"New thread {thread!r}.")
        console.note("Type a message; /exit or Ctrl-D ends the chat.")
        while (text := _read(console, interactive)) is not None:
            if not text:
                continue
            if text in _EXIT_WORDS:
                break
            if text.startswith("/"):
                console.line("Commands: /exit (or Ctrl-D) ends the chat.")
                continue
            if not await _turn(console, app, text, config):
                failed = True
    finally:
        await app.aclose()
    return EXIT_FAILED if failed else EXIT_OK


async def _turn(console: Console, app: CompiledGraph, text: str, config: dict[str, str]) -> bool:
    """One exchange, streamed. A failed turn is reported and the chat goes on (a missing or
    refused key ends it: no later turn could work)."""
    from tenxgraph.cli import describe

    printer = StreamPrinter(console, speaker="assistant")
    try:
        async for chunk in app.astream({"messages": [Message.text_message(text)]}, config):
            printer.feed(chunk)
    except Exception as exc:
        printer.finish()
        code, message = describe(exc)
        if code != EXIT_FAILED:
            raise
        console.err.write(f"tenxgraph: error: {message}\n")
        console.err.flush()
        return False
    printer.finish()
    console.note(printer.usage_line())
    return True


def _read(console: Console, interactive: bool) -> str | None:
    """The next line the user typed (stripped), or None at the end of input."""
    if interactive:
        try:
            return input("you: ").strip()
        except EOFError:
            console.line()
            return None
    line = sys.stdin.readline()
    if not line:
        return None
    console.line(console.style("you: ", "bold") + line.rstrip("\n"))
    return line.strip()


__all__ = ["chat_app", "command"]
