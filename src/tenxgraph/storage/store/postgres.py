"""`PostgresStore`: items in PostgreSQL, in the table `tx_store_items` of a schema (the
checkpointer's schema may hold it too: pass the same DSN and schema), shared by every process
and host using it.

Every call is one statement, so one round trip and one transaction; a write is an upsert, so
two writers of one key never fail: the last one wins. The namespace and key columns compare
bytewise (`COLLATE "C"`), whatever the database's collation, so that a prefix search is a
range of the primary key (`_sql`).

asyncpg is imported on first use: `pip install 'tenxgraph[postgres]'`.
"""

from __future__ import annotations

from typing import Any, TypeVar

from tenxgraph.storage.checkpointer._pg_pools import (
    Connection,
    PgTables,
    advisory_key,
    check_schema,
    dsn_pools,
    load_asyncpg,
)
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

_PG = "${}"  # placeholders $1, $2...


def _schema(s: str) -> tuple[str, ...]:
    return (
        f"CREATE SCHEMA IF NOT EXISTS {s}",
        f"CREATE TABLE IF NOT EXISTS {s}.{VERSION_TABLE} (version INTEGER NOT NULL)",
        f"""CREATE TABLE IF NOT EXISTS {s}.{TABLE} (
            namespace TEXT COLLATE "C" NOT NULL,
            key TEXT COLLATE "C" NOT NULL,
            value TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            vectors BYTEA,
            PRIMARY KEY (namespace, key))""",
        f"CREATE INDEX IF NOT EXISTS {TABLE}_updated ON {s}.{TABLE} (updated_at DESC, key)",
    )


class PostgresStore(PgTables, BaseStore):
    """Items in PostgreSQL (`dsn`), in `schema` (created on first use).

    Pools as `PgCheckpointer`'s: one per event loop using the store, `min_size`..`max_size`
    connections, closed by `aclose()` or when that loop shuts down. Lost connections are
    retried `retries` times (every call is safe to repeat: an upsert, a delete, a read).
    `index`: embed items for `asearch(..., query=...)` (`IndexConfig`; plain `bytea`
    columns, no pgvector)."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "public",
        min_size: int = 1,
        max_size: int = 10,
        retries: int = 3,
        index: IndexConfig | None = None,
    ) -> None:
        check_schema(schema)
        self._set_index(index)
        if retries < 0:
            raise ValueError("retries must be >= 0")
        load_asyncpg("PostgresStore")  # fail here, with the install hint, not on first use
        self.schema = schema
        self._s = f'"{schema}"'
        self._retries = retries
        self._pools = dsn_pools(dsn, min_size, max_size, "PostgresStore")
        self._ready = False
        self._lock_key = advisory_key(f"tenxgraph-store:{schema}")

    what = "PostgreSQL store"

    def __repr__(self) -> str:
        return f"PostgresStore(schema={self.schema!r})"

    # -- pools, schema, retries ------------------------------------------------------------

    async def _ensure(self, conn: Connection) -> None:
        async with conn.transaction():
            # many processes may start at once: one creates the table, the others wait here
            await conn.execute("SELECT pg_advisory_xact_lock($1)", self._lock_key)
            for statement in _schema(self._s):
                await conn.execute(statement)
            found = await conn.fetchval(f"SELECT MAX(version) FROM {self._s}.{VERSION_TABLE}")
            check_version(f"PostgreSQL schema {self.schema!r}", found)
            if found is None:
                await conn.execute(
                    f"INSERT INTO {self._s}.{VERSION_TABLE} VALUES ($1)", STORE_SCHEMA_VERSION
                )
            elif found < 2:  # version 1: no vectors column
                await conn.execute(f"ALTER TABLE {self._s}.{TABLE} ADD COLUMN vectors BYTEA")
                await conn.execute(
                    f"UPDATE {self._s}.{VERSION_TABLE} SET version = $1", STORE_SCHEMA_VERSION
                )

    # -- rows ------------------------------------------------------------------------------

    def _upsert(self) -> str:
        return (
            f"INSERT INTO {self._s}.{TABLE} "
            "(namespace, key, value, created_at, updated_at, vectors) "
            "VALUES ($1, $2, $3, $4, $4, $5) ON CONFLICT (namespace, key) DO UPDATE SET "
            "value = excluded.value, updated_at = excluded.updated_at, vectors = excluded.vectors"
        )

    async def _write(
        self, namespace: str, key: str, value: str, now: float, vectors: bytes | None
    ) -> None:
        query = self._upsert()
        await self._run(lambda conn: conn.execute(query, namespace, key, value, now, vectors))

    async def _write_many(self, rows: list[tuple[str, str, str, float, bytes | None]]) -> None:
        query = self._upsert()

        async def write(conn: Connection) -> None:
            async with conn.transaction():  # all or none; repeated whole on a lost connection
                await conn.executemany(query, rows)

        await self._run(write)

    async def _read(self, namespace: str, key: str) -> Row | None:
        query = (
            f"SELECT namespace, key, value, created_at, updated_at FROM {self._s}.{TABLE} "
            "WHERE namespace = $1 AND key = $2"
        )
        row = await self._run(lambda conn: conn.fetchrow(query, namespace, key))
        return None if row is None else _row(row)

    async def _remove(self, namespace: str, key: str) -> None:
        query = f"DELETE FROM {self._s}.{TABLE} WHERE namespace = $1 AND key = $2"
        await self._run(lambda conn: conn.execute(query, namespace, key))

    async def _rows(self, prefix: Namespace, limit: int | None, offset: int) -> list[Row]:
        query, args = rows_query(prefix, limit, offset, _PG)
        query = query.replace(f"FROM {TABLE}", f"FROM {self._s}.{TABLE}", 1)
        rows = await self._run(lambda conn: conn.fetch(query, *args))
        return [_row(row) for row in rows]

    async def _vector_rows(self, prefix: Namespace) -> list[VectorRow]:
        query, args = vector_rows_query(prefix, _PG)
        query = query.replace(f"FROM {TABLE}", f"FROM {self._s}.{TABLE}", 1)
        rows = await self._run(lambda conn: conn.fetch(query, *args))
        return [(*_row(row), bytes(row[5])) for row in rows]

    async def _namespace_texts(self, prefix: Namespace) -> list[str]:
        query, args = namespaces_query(prefix, _PG)
        query = query.replace(f"FROM {TABLE}", f"FROM {self._s}.{TABLE}", 1)
        rows = await self._run(lambda conn: conn.fetch(query, *args))
        return [str(row[0]) for row in rows]


def _row(row: Any) -> Row:
    return (str(row[0]), str(row[1]), str(row[2]), float(row[3]), float(row[4]))


__all__ = ["PostgresStore"]
