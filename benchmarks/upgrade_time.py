"""How long the upgrade to the current checkpoint schema (6: threads keyed by a small integer;
7: PostgreSQL keeps message ids as bytes, SQLite the last thread key given) takes on a
database written by schema 5, and what it leaves on disk.

    python benchmarks/upgrade_time.py [--threads 10] [--messages 10000]
    TENXGRAPH_TEST_PG_DSN=postgresql://... python benchmarks/upgrade_time.py   # and PostgreSQL

Builds a schema-5 database (the stores' own migrations 1 to 5, then `--threads` threads of
`--messages` messages of ~300 characters each, written as schema 5 wrote its rows, one
version per 100 messages), then times the first call of a new checkpointer on it: the
upgrade, in one transaction, then one `aversion`. Prints the seconds, and for SQLite the file
before and after (the old tables' pages stay in the file, free for reuse) and after `VACUUM`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import tempfile
import time
import uuid
from pathlib import Path

from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tenxgraph.storage.checkpointer.base import checkpoint_fields, encode_header, encode_message
from tenxgraph.storage.checkpointer.sqlite import MIGRATIONS as SQLITE_MIGRATIONS
from tenxgraph.storage.checkpointer.sqlite import id_key

PER_VERSION = 100


def v5_rows(
    threads: int, messages: int
) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]], list[tuple[object, ...]]]:
    """(thread rows, checkpoint rows, message rows) as schema 5 kept them; message ids as
    text (PostgreSQL's form; SQLite's rows are mapped by the caller)."""
    header = encode_header(AgentState(), "t", listed=True)
    step, status, node = checkpoint_fields(AgentState())
    thread_rows, checkpoint_rows, message_rows = [], [], []
    for t in range(threads):
        thread_id = str(uuid.uuid4())
        versions = -(-messages // PER_VERSION)
        thread_rows.append((thread_id, versions, 0, float(t), float(t), 0, 0))
        for seq in range(messages):
            role = "user" if seq % 2 == 0 else "assistant"
            message = Message.text_message(f"{seq} " + "x" * 300, role)
            body = encode_message(message, id_column=True)
            message_rows.append((thread_id, seq, str(message.message_id), body))
        for version in range(1, versions + 1):
            count = min(version * PER_VERSION, messages)
            checkpoint_rows.append(
                (thread_id, version, header, count, 0, 0, step, status, node, float(version))
            )
    return thread_rows, checkpoint_rows, message_rows


THREADS_SQL = (
    "INSERT INTO tx_threads (thread_id, version, generation, created_at, updated_at, "
    "log_start, oldest_generation) VALUES ({})"
)
CHECKPOINTS_SQL = (
    "INSERT INTO tx_checkpoints (thread_id, version, header, message_count, generation, "
    "log_start, step, status, node, created_at) VALUES ({})"
)
MESSAGES_SQL = "INSERT INTO tx_messages (thread_id, seq, message_id, body) VALUES ({})"


def marks(sql: str, count: int, dollar: bool) -> str:
    places = [f"${i}" for i in range(1, count + 1)] if dollar else ["?"] * count
    return sql.format(", ".join(places))


async def sqlite_upgrade(threads: int, messages: int) -> None:
    path = Path(tempfile.mkdtemp()) / "v5.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("BEGIN")
    for version in range(1, 6):
        for statement in SQLITE_MIGRATIONS[version]:
            conn.execute(statement)
    conn.execute("CREATE TABLE tx_schema_version (version INTEGER)")
    conn.execute("INSERT INTO tx_schema_version VALUES (5)")
    thread_rows, checkpoint_rows, message_rows = v5_rows(threads, messages)
    conn.executemany(marks(THREADS_SQL, 7, False), thread_rows)
    conn.executemany(marks(CHECKPOINTS_SQL, 10, False), checkpoint_rows)
    rows = [(t, s, id_key(i), b) for t, s, i, b in message_rows]
    conn.executemany(marks(MESSAGES_SQL, 4, False), rows)
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    before = path.stat().st_size
    store = SqliteCheckpointer(path)
    started = time.perf_counter()
    await store.aversion(str(thread_rows[0][0]))
    seconds = time.perf_counter() - started
    await store.aclose()
    after = path.stat().st_size
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("VACUUM")
    conn.close()
    vacuumed = path.stat().st_size
    print(
        f"sqlite: {threads * messages:,} messages, upgrade {seconds:.2f} s; file {before:,} B "
        f"before, {after:,} B after, {vacuumed:,} B after VACUUM"
    )


async def postgres_upgrade(dsn: str, threads: int, messages: int) -> None:
    import asyncpg

    from tenxgraph.storage.checkpointer import PgCheckpointer
    from tenxgraph.storage.checkpointer.postgres import MIGRATIONS as PG_MIGRATIONS

    schema = f"upgrade_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
        await conn.execute(f'SET search_path TO "{schema}"')
        for version in range(1, 6):
            for statement in PG_MIGRATIONS[version](f'"{schema}"'):
                await conn.execute(statement)
        await conn.execute("CREATE TABLE tx_schema_version (version INTEGER)")
        await conn.execute("INSERT INTO tx_schema_version VALUES (5)")
        thread_rows, checkpoint_rows, message_rows = v5_rows(threads, messages)
        await conn.executemany(marks(THREADS_SQL, 7, True), thread_rows)
        await conn.executemany(marks(CHECKPOINTS_SQL, 10, True), checkpoint_rows)
        await conn.copy_records_to_table(
            "tx_messages",
            records=message_rows,
            columns=["thread_id", "seq", "message_id", "body"],
            schema_name=schema,
        )
        store = PgCheckpointer(dsn, schema=schema)
        started = time.perf_counter()
        await store.aversion(str(thread_rows[0][0]))
        seconds = time.perf_counter() - started
        await store.aclose()
        print(f"postgres: {threads * messages:,} messages, upgrade {seconds:.2f} s")
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=10)
    parser.add_argument("--messages", type=int, default=10_000)
    args = parser.parse_args()
    await sqlite_upgrade(args.threads, args.messages)
    dsn = os.environ.get("TENXGRAPH_TEST_PG_DSN")
    if dsn:
        await postgres_upgrade(dsn, args.threads, args.messages)


if __name__ == "__main__":
    asyncio.run(main())
