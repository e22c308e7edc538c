"""`SqliteStore`: items in a SQLite file, in the table `tx_store_items` (the checkpointer's
file may hold it too: pass the same path).

One `sqlite3` connection per store, used by one call at a time (a lock) in a worker thread
(`asyncio.to_thread`): any event loop, and the sync twins' loop thread, can use the same
store. Every call is one statement, so one transaction; across processes SQLite's write
lock serialises writes (WAL mode: readers never wait for a writer).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, TypeVar

from tenxgraph.storage.checkpointer._sql import SqliteFile
from tenxgraph.storage.store._sql import (
    STORE_SCHEMA_VERSION,
    TABLE,
    VERSION_TABLE,
    check_version,
    namespaces_query,
    rows_query,
    vector_rows_query,
)
from tenxgraph.storage.store._values import Namespace
from tenxgraph.storage.store.base import BaseStore, Row, VectorRow
from tenxgraph.storage.store.index import IndexConfig

T = TypeVar("T")

DEFAULT_DB_PATH = "~/.tenxgraph/checkpoints.db"

_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version INTEGER NOT NULL)",
    f"""CREATE TABLE IF NOT EXISTS {TABLE} (
        namespace TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        vectors BLOB,
        PRIMARY KEY (namespace, key))""",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_updated ON {TABLE} (updated_at DESC, key)",
)

_UPSERT = (
    f"INSERT INTO {TABLE} (namespace, key, value, created_at, updated_at, vectors) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (namespace, key) DO UPDATE SET "
    "value = excluded.value, updated_at = excluded.updated_at, vectors = excluded.vectors"
)


class SqliteStore(SqliteFile, BaseStore):
    """Items in one SQLite file (default `~/.tenxgraph/checkpoints.db`, the checkpointer's).

    A write that waits longer than `busy_timeout` seconds for another process's write lock
    raises `TransientStorageError`; retry it. `index`: embed items for
    `asearch(..., query=...)` (`IndexConfig`)."""

    what = "store"

    def __init__(
        self,
        db_path: str | Path = DEFAULT_DB_PATH,
        *,
        busy_timeout: float = 5.0,
        index: IndexConfig | None = None,
    ) -> None:
        if str(db_path) == ":memory:":
            raise ValueError(
                "SqliteStore keeps memories across runs in a file; for memories in this process "
                "only, use InMemoryStore()"
            )
        SqliteFile.__init__(self, db_path, busy_timeout)
        self._set_index(index)

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.db_path)!r})"

    # -- connection ------------------------------------------------------------------------

    def _create(self, conn: sqlite3.Connection) -> None:
        """Create the tables, or check that their version is one this code reads."""
        for statement in _SCHEMA:
            conn.execute(statement)
        found = conn.execute(f"SELECT MAX(version) FROM {VERSION_TABLE}").fetchone()[0]
        check_version(f"SQLite database {str(self.db_path)!r}", found)
        if found is None:
            conn.execute(f"INSERT INTO {VERSION_TABLE} VALUES (?)", (STORE_SCHEMA_VERSION,))
        elif found < 2:  # version 1: no vectors column
            conn.execute(f"ALTER TABLE {TABLE} ADD COLUMN vectors BLOB")
            conn.execute(f"UPDATE {VERSION_TABLE} SET version = ?", (STORE_SCHEMA_VERSION,))

    # -- rows ------------------------------------------------------------------------------

    async def _write(
        self, namespace: str, key: str, value: str, now: float, vectors: bytes | None
    ) -> None:
        row = (namespace, key, value, now, now, vectors)
        await self._run(lambda conn: conn.execute(_UPSERT, row))

    async def _write_many(self, rows: list[tuple[str, str, str, float, bytes | None]]) -> None:
        args = [
            (namespace, key, value, now, now, vectors)
            for namespace, key, value, now, vectors in rows
        ]
        await self._transaction(lambda conn: conn.executemany(_UPSERT, args))

    async def _read(self, namespace: str, key: str) -> Row | None:
        query = (
            f"SELECT namespace, key, value, created_at, updated_at FROM {TABLE} "
            "WHERE namespace = ? AND key = ?"
        )
        rows = await self._run(lambda conn: conn.execute(query, (namespace, key)).fetchall())
        return _row(rows[0]) if rows else None

    async def _remove(self, namespace: str, key: str) -> None:
        query = f"DELETE FROM {TABLE} WHERE namespace = ? AND key = ?"
        await self._run(lambda conn: conn.execute(query, (namespace, key)))

    async def _rows(self, prefix: Namespace, limit: int | None, offset: int) -> list[Row]:
        query, args = rows_query(prefix, limit, offset)
        rows = await self._run(lambda conn: conn.execute(query, args).fetchall())
        return [_row(row) for row in rows]

    async def _vector_rows(self, prefix: Namespace) -> list[VectorRow]:
        query, args = vector_rows_query(prefix)
        rows = await self._run(lambda conn: conn.execute(query, args).fetchall())
        return [(*_row(row), bytes(row[5])) for row in rows]

    async def _namespace_texts(self, prefix: Namespace) -> list[str]:
        query, args = namespaces_query(prefix)
        rows = await self._run(lambda conn: conn.execute(query, args).fetchall())
        return [str(row[0]) for row in rows]


def _row(row: Any) -> Row:
    return (str(row[0]), str(row[1]), str(row[2]), float(row[3]), float(row[4]))


__all__ = ["DEFAULT_DB_PATH", "SqliteStore"]
