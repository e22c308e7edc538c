"""What a thread takes on disk, as a whole, against its messages' JSON (issue 17's stored bytes).

    python benchmarks/stored_bytes.py [--turns 200] [--user-chars 300] [--reply-chars 500]
    TENXGRAPH_TEST_PG_DSN=postgresql://... python benchmarks/stored_bytes.py   # and PostgreSQL

One thread (`--threads` to have more, so that what every table and index takes at least
weighs less; `--uuid-threads` to name them by UUIDs, as a service does, not `t0`, `t1`...)
of `--turns` turns (each an `ainvoke` of a one-node graph: a user message of `--user-chars`
characters, answered by an assistant message of `--reply-chars`; 800 characters a turn by
default) in a new store, then:

- `messages_json`: the bytes of the messages' JSON (`model_dump_json()`), the yardstick; and
  `message rows`, the JSON the SQL stores write for them (`encode_message(m, id_column=True)`:
  without the top-level fields that hold their default, text blocks' empty annotations, and
  the id, which a column of the row holds);
- SQLite: the database file as a user has it while the app runs (`file_open`: the main file
  plus its write-ahead log), and after the checkpointer is closed (`file_closed`: SQLite then
  folds the log into the file), each over `messages_json`; the file's free pages are counted
  in it (page slack is what a user pays);
- PostgreSQL (when TENXGRAPH_TEST_PG_DSN is set; a fresh schema, dropped afterwards):
  `pg_total_relation_size` of each table of the schema (its heap, TOAST and indexes) summed,
  over `messages_json`, and per table. Each relation takes whole 8 KB pages, so a small thread
  pays some fixed cost.

The issue's goal: the file (and the tables) at most 1.3x the messages' JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import BaseCheckpointer, PgCheckpointer, SqliteCheckpointer
from tenxgraph.storage.checkpointer._codec import encode_message
from tenxgraph.utils.constants import END, START

PG_DSN_VAR = "TENXGRAPH_TEST_PG_DSN"
_FILLER = (
    "The quick brown fox jumps over the lazy dog while the storage layer keeps every word "
    "of this conversation safe on disk, turn after turn, without rewriting what it already has. "
)


def text(turn: int, role: str, size: int) -> str:
    return (f"[{role} {turn}] " + _FILLER * (size // len(_FILLER) + 1))[:size]


ROWS = [0]  # the bytes of the rows the store wrote for those messages (`encode_message`)


UUID_IDS = [False]  # `--uuid-threads`: thread ids as a service makes them (36 characters)


def thread_name(thread: int) -> str:
    return str(uuid.UUID(int=thread + 1)) if UUID_IDS[0] else f"t{thread}"


async def run_threads(
    store: BaseCheckpointer, threads: int, turns: int, user: int, reply: int
) -> int:
    """`turns` turns on each of `threads` threads; the bytes of their messages' JSON."""

    async def answer(state: AgentState) -> Message:
        turn = len(state.context) // 2
        return Message.text_message(text(turn, "assistant", reply), "assistant")

    graph = StateGraph(AgentState)
    graph.add_node("answer", answer)
    graph.add_edge(START, "answer")
    graph.add_edge("answer", END)
    app = graph.compile(checkpointer=store)
    total = 0
    for thread in range(threads):
        thread_id = thread_name(thread)
        for turn in range(turns):
            message = Message.text_message(text(turn, "user", user))
            await app.ainvoke({"messages": [message]}, {"thread_id": thread_id})
        snapshot = await store.aload(thread_id, AgentState)
        assert snapshot is not None
        assert len(snapshot.state.context) == 2 * turns
        total += sum(len(m.model_dump_json().encode()) for m in snapshot.state.context)
        context = snapshot.state.context
        rows = sum(len(encode_message(m, id_column=True).encode()) for m in context)
        ROWS[0] += rows
    return total


async def sqlite(threads: int, turns: int, user: int, reply: int) -> None:
    with tempfile.TemporaryDirectory(prefix="tenxgraph-bytes-") as tmp:
        path = Path(tmp) / "threads.db"
        store = SqliteCheckpointer(path)
        json_bytes = await run_threads(store, threads, turns, user, reply)
        wal = path.with_name(path.name + "-wal")
        main_open = path.stat().st_size
        wal_open = wal.stat().st_size if wal.exists() else 0
        await store.aclose()
        closed = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
        print(f"messages_json {json_bytes} B ({threads} x {2 * turns} messages)")
        print(f"message rows {ROWS[0]} B = {ROWS[0] / json_bytes:.2f}x")
        print(
            f"sqlite file_open {main_open + wal_open} B = "
            f"{(main_open + wal_open) / json_bytes:.2f}x (the file {main_open} B, "
            f"its write-ahead log {wal_open} B)"
        )
        print(f"sqlite file_closed {closed} B = {closed / json_bytes:.2f}x")
        with sqlite3.connect(path) as conn:  # where the pages go (SQLite's dbstat table)
            rows = conn.execute(
                "SELECT name, SUM(pgsize), SUM(unused) FROM dbstat GROUP BY name ORDER BY 2 DESC"
            ).fetchall()
            free = conn.execute("PRAGMA freelist_count").fetchone()[0]
            page = conn.execute("PRAGMA page_size").fetchone()[0]
        for name, size, unused in rows:
            print(f"  {name:<28} {size:>9} B ({unused} B of it unused)")
        print(f"  {'free pages':<28} {free * page:>9} B")


async def postgres(dsn: str, threads: int, turns: int, user: int, reply: int) -> None:
    import asyncpg  # type: ignore[import-untyped]

    schema = f"bytes_{uuid.uuid4().hex[:12]}"
    store = PgCheckpointer(dsn, schema=schema)
    try:
        json_bytes = await run_threads(store, threads, turns, user, reply)
        await store.aclose()
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute("VACUUM ANALYZE")  # nothing is reclaimed: sizes as they are
            rows = await conn.fetch(
                "SELECT c.relname, pg_total_relation_size(c.oid) AS total, "
                "pg_relation_size(c.oid) AS heap FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = $1 AND c.relkind = 'r' ORDER BY c.relname",
                schema,
            )
        finally:
            await conn.close()
    finally:
        await store.aclose()
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()
    total = sum(int(r["total"]) for r in rows)
    print(f"postgres tables {total} B = {total / json_bytes:.2f}x")
    for r in rows:
        print(f"  {r['relname']:<20} {int(r['total']):>9} B (heap {int(r['heap'])} B)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--user-chars", type=int, default=300)
    parser.add_argument("--reply-chars", type=int, default=500)
    parser.add_argument("--uuid-threads", action="store_true", help="UUIDs as thread ids")
    args: Any = parser.parse_args()
    UUID_IDS[0] = args.uuid_threads
    asyncio.run(sqlite(args.threads, args.turns, args.user_chars, args.reply_chars))
    dsn = os.environ.get(PG_DSN_VAR)
    if dsn:
        asyncio.run(postgres(dsn, args.threads, args.turns, args.user_chars, args.reply_chars))
    else:
        print(f"postgres skipped: {PG_DSN_VAR} is not set")


if __name__ == "__main__":
    main()
