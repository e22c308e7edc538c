"""`tenxgraph threads list|show|delete`: look into a SQLite file of threads, or remove one."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

from tenxgraph.cli._console import (
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Console,
    existing_db,
    stdin_is_terminal,
)
from tenxgraph.cli._render import call_text, pause_question, reasoning_of, short
from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state.message_block import ToolResultBlock
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tenxgraph.utils.interrupt import pending_interrupt

T = TypeVar("T")
_PAUSED = {"interrupted_before": "paused", "interrupted_after": "paused"}


def command(args: argparse.Namespace, console: Console) -> int:
    path = existing_db(getattr(args, "db", None))
    store = SqliteCheckpointer(path)
    if args.action == "list":
        return asyncio.run(_closing(store, _list(console, store, path)))
    if args.action == "show":
        return asyncio.run(_closing(store, _show(console, store, path, args.thread)))
    return _delete(console, store, path, args.thread, bool(args.yes))


async def _closing(store: SqliteCheckpointer, work: Awaitable[T]) -> T:
    try:
        return await work
    finally:
        await store.aclose()


def status_word(status: str) -> str:
    return _PAUSED.get(status, status)


async def _list(console: Console, store: SqliteCheckpointer, path: Path) -> int:
    ids = await store.alist_threads()
    if not ids:
        console.line(f"No threads in {path}.")
        return EXIT_OK
    rows = [("THREAD", "MESSAGES", "STATUS", "UPDATED")]
    for thread in ids:
        latest = await store.ahistory(thread, limit=1)
        if not latest:
            rows.append((thread, "?", "?", "?"))
            continue
        info = latest[0]
        updated = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.created_at))
        rows.append((thread, str(info.message_count), status_word(info.status), updated))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        padded = [cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)]
        console.line("  ".join([*padded, row[3]]))
    return EXIT_OK


async def _show(console: Console, store: SqliteCheckpointer, path: Path, thread: str) -> int:
    snapshot = await store.aload(thread, AgentState)
    if snapshot is None:
        raise CliError(f"No thread {thread!r} in {path}", EXIT_NOT_FOUND)
    state = snapshot.state
    status = status_word(state.execution_meta.status.value)
    console.line(
        console.style(f"thread {thread}", "bold")
        + f": {status}, {len(state.context)} messages, version {snapshot.version} ({path})"
    )
    tokens_in = tokens_out = 0
    for message in state.context:
        for line in describe_message(console, message):
            console.line(line)
        if message.usages is not None:
            tokens_in += message.usages.prompt_tokens
            tokens_out += message.usages.completion_tokens
    waiting = pending_interrupt(state)
    if waiting is not None:
        question = pause_question({"interrupt": waiting.model_dump()})
        console.line(console.style(f"paused: {question}", "yellow"))
    if state.context_summary:
        console.line(console.style(f"summary: {short(state.context_summary)}", "dim"))
    if tokens_in or tokens_out:
        console.line(f"tokens: {tokens_in} in, {tokens_out} out, {tokens_in + tokens_out} total")
    return EXIT_OK


def describe_message(console: Console, message: Message) -> list[str]:
    """A stored message as lines: ``role: text``; tool calls and results in one line each."""
    lines: list[str] = []
    thought = reasoning_of(message)
    if thought:
        lines.append(console.style(f"{message.role} (thinking): {short(thought)}", "dim"))
    if message.role == "tool":
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                name = message.metadata.get("function_name") or block.call_id
                failed = " (error)" if block.is_error else ""
                text = Message(role="tool", content=[block]).text()
                lines.append(console.style(f"tool {name}{failed}: {short(text)}", "green"))
        return lines
    if message.text():
        lines.append(f"{message.role}: {message.text()}")
    for call in message.tool_call_blocks():
        lines.append(console.style(f"{message.role} -> {call_text(call.name, call.args)}", "cyan"))
    return lines


def _delete(console: Console, store: SqliteCheckpointer, path: Path, thread: str, yes: bool) -> int:
    """Delete after a confirmation: --yes, or a "y" typed on the terminal (asked outside the
    event loop, so Ctrl-C stops it at once)."""
    if asyncio.run(_closing(store, store.aversion(thread))) is None:
        raise CliError(f"No thread {thread!r} in {path}", EXIT_NOT_FOUND)
    if not yes:
        if not stdin_is_terminal():
            raise CliError(
                f"Not deleting thread {thread!r}: there is no terminal to confirm on; add --yes",
                EXIT_USAGE,
            )
        try:
            answer = input(f"Delete thread {thread!r} from {path}? [y/N] ")
        except EOFError:
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            console.line("Nothing deleted.")
            return EXIT_OK
    asyncio.run(_closing(store, store.adelete_thread(thread)))
    console.line(f"Deleted thread {thread!r} from {path}.")
    return EXIT_OK


__all__ = ["command", "describe_message", "status_word"]
