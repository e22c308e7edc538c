"""`tenxgraph threads list|show|delete`: look into the threads of a SQLite file or a
PostgreSQL database (`--dsn`), or remove one."""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

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
from tenxgraph.core.state.usage import Usage
from tenxgraph.storage.checkpointer import BaseCheckpointer, SqliteCheckpointer
from tenxgraph.utils.interrupt import pending_interrupt

T = TypeVar("T")
_PAUSED = {"interrupted_before": "paused", "interrupted_after": "paused"}

#: threads read per query by `threads list`
LIST_PAGE_SIZE = 1_000


@dataclass(slots=True)
class _Source:
    """The store the command reads, and how messages name it (never with a password)."""

    store: BaseCheckpointer
    where: str
    dsn: str | None = None  # PostgreSQL: checked for tenxgraph tables before the first read
    schema: str = "public"
    checked: bool = False

    async def check(self) -> None:
        """Fail, creating nothing, when a PostgreSQL database has no tenxgraph tables (a
        SQLite file is checked by `existing_db`)."""
        if self.dsn is None or self.checked:
            return
        await _check_pg(self.dsn, self.schema, self.where)
        self.checked = True


def command(args: argparse.Namespace, console: Console) -> int:
    source = _source(args)
    if args.action == "list":
        return asyncio.run(_closing(source, lambda: _list(console, source)))
    if args.action == "show":
        return asyncio.run(_closing(source, lambda: _show(console, source, args.thread)))
    return _delete(console, source, args.thread, bool(args.yes))


def _source(args: argparse.Namespace) -> _Source:
    dsn, db = getattr(args, "dsn", None), getattr(args, "db", None)
    schema = getattr(args, "schema", None)
    if dsn is None:
        if schema is not None:
            raise CliError("--schema goes with --dsn (a PostgreSQL database)", EXIT_USAGE)
        path = existing_db(db)
        return _Source(SqliteCheckpointer(path), str(path))
    if db is not None:
        raise CliError("pass either --db (SQLite) or --dsn (PostgreSQL), not both", EXIT_USAGE)
    from tenxgraph.storage.checkpointer import PgCheckpointer

    schema = schema or "public"
    try:
        store = PgCheckpointer(dsn, schema=schema, min_size=1, max_size=2)
    except ValueError as exc:  # a bad schema name
        raise CliError(str(exc), EXIT_USAGE) from None
    where = redacted_dsn(dsn) + ("" if schema == "public" else f" (schema {schema})")
    return _Source(store, where, dsn, schema)


def redacted_dsn(dsn: str) -> str:
    """`dsn` without its password (in a URL's user part or query, or a `password=` pair)."""
    if "://" not in dsn:  # key=value form
        return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", dsn)
    parts = urlsplit(dsn)
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}@{host}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k.lower() != "password"])
    return urlunsplit(parts._replace(netloc=netloc, query=query))


async def _check_pg(dsn: str, schema: str, where: str) -> None:
    import asyncpg  # type: ignore[import-untyped]

    try:
        conn = await asyncpg.connect(dsn, timeout=10)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        message = str(exc)
        password = urlsplit(dsn).password if "://" in dsn else None
        if password:
            message = message.replace(password, "***")
        raise CliError(f"Cannot connect to PostgreSQL at {where}: {message}") from None
    try:
        found = await conn.fetchval("SELECT to_regclass($1)", f'"{schema}".tx_schema_version')
    finally:
        await conn.close()
    if found is None:
        raise CliError(
            f"No tenxgraph threads at {where}: schema {schema!r} has no tenxgraph tables "
            "(pass --schema if they are in another one)",
            EXIT_NOT_FOUND,
        )


async def _closing(source: _Source, work: Callable[[], Awaitable[T]]) -> T:
    """Check the source, then run `work` on it, closing the store afterwards."""
    try:
        await source.check()
        return await work()
    finally:
        await source.store.aclose()


async def _delete_with_media(store: BaseCheckpointer, thread: str) -> bool:
    """Delete the thread and release its media in the store's default media store (the
    same database), as an app compiled with this store would."""
    from tenxgraph.storage.media.defaults import default_media_store

    media = default_media_store(store)
    try:
        return bool(await store.adelete_thread(thread))
    finally:
        if media is not None:
            await media.aclose()


def status_word(status: str) -> str:
    return _PAUSED.get(status, status)


async def _list(console: Console, source: _Source) -> int:
    """Every thread, oldest first, read `LIST_PAGE_SIZE` at a time: one query per page."""
    rows = [("THREAD", "MESSAGES", "STATUS", "UPDATED")]
    async for info in source.store.aiter_threads(page_size=LIST_PAGE_SIZE):
        updated = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.updated_at))
        rows.append((info.thread_id, str(info.message_count), status_word(info.status), updated))
    if len(rows) == 1:
        console.line(f"No threads in {source.where}.")
        return EXIT_OK
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        padded = [cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)]
        console.line("  ".join([*padded, row[3]]))
    return EXIT_OK


async def _show(console: Console, source: _Source, thread: str) -> int:
    snapshot = await source.store.aload(thread, AgentState)
    if snapshot is None:
        raise CliError(f"No thread {thread!r} in {source.where}", EXIT_NOT_FOUND)
    state = snapshot.state
    status = status_word(state.execution_meta.status.value)
    console.line(
        console.style(f"thread {thread}", "bold")
        + f": {status}, {len(state.context)} messages, version {snapshot.version} "
        f"({source.where})"
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
    usage = state.execution_meta.usage
    if usage.model_calls:  # the thread's running total: every call of every run
        console.line(usage_line(usage))
    elif tokens_in or tokens_out:  # a thread kept before runs added up their usage
        console.line(f"tokens: {tokens_in} in, {tokens_out} out, {tokens_in + tokens_out} total")
    return EXIT_OK


def usage_line(usage: Usage) -> str:
    """What a thread's model calls cost: calls, tokens, and the cost (or why it is unknown);
    the tools it ran, if any."""
    calls, tools = usage.model_calls, usage.tool_calls
    cost = usage.cost
    if cost is None:
        unpriced = usage.unpriced_calls
        shown = (
            f"cost unknown ({unpriced} call{'' if unpriced == 1 else 's'} without a known price)"
        )
    else:
        shown = f"cost ${cost:.6f}"
    return (
        f"tokens: {usage.input_tokens} in, {usage.output_tokens} out, "
        f"{usage.input_tokens + usage.output_tokens} total; "
        f"{calls} model call{'' if calls == 1 else 's'}; "
        + (f"{tools} tool call{'' if tools == 1 else 's'}; " if tools else "")
        + shown
    )


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


def _delete(console: Console, source: _Source, thread: str, yes: bool) -> int:
    """Delete after a confirmation: --yes, or a "y" typed on the terminal (asked outside the
    event loop, so Ctrl-C stops it at once)."""
    store, path = source.store, source.where
    if asyncio.run(_closing(source, lambda: store.aversion(thread))) is None:
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
    asyncio.run(_closing(source, lambda: _delete_with_media(store, thread)))
    console.line(f"Deleted thread {thread!r} from {path}.")
    return EXIT_OK


__all__ = ["LIST_PAGE_SIZE", "command", "describe_message", "redacted_dsn", "status_word"]
