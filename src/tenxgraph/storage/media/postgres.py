"""`PostgresMediaStore`: blobs in PostgreSQL (`bytea`), in their own tables (`_sql`) of a
schema, never in the message rows. The default media store of a `PgCheckpointer` uses its
DSN or pool and schema.

asyncpg is imported on first use: `pip install 'tenxgraph[postgres]'`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, TypeVar

from tenxgraph.storage.checkpointer._pg_pools import (
    Connection,
    PgTables,
    Pool,
    advisory_key,
    check_schema,
    dsn_pools,
    load_asyncpg,
)
from tenxgraph.storage.media._sql import BLOBS, FILES, OWNERS, schema
from tenxgraph.storage.media.base import DEFAULT_GC_GRACE, MediaStore, ProviderFile, StoredMedia

T = TypeVar("T")


class PostgresMediaStore(PgTables, MediaStore):
    """Blobs in PostgreSQL: exactly one of `dsn` (pools of its own, one per event loop) or
    `pool` (an asyncpg pool shared with, say, the checkpointer), in `schema`."""

    def __init__(
        self,
        dsn: str | None = None,
        *,
        pool: Pool | None = None,
        schema: str = "public",
        min_size: int = 1,
        max_size: int = 10,
        retries: int = 3,
    ) -> None:
        if (dsn is None) == (pool is None):
            raise ValueError("PostgresMediaStore needs exactly one of dsn=... or pool=...")
        check_schema(schema)
        load_asyncpg("PostgresMediaStore")
        self.schema = schema
        self._s = f'"{schema}"'
        self._external_pool = pool
        self._retries = retries
        self._pools = dsn_pools(dsn, min_size, max_size, "PostgresMediaStore")
        self._ready = False
        self._lock_key = advisory_key(f"tenxgraph-media:{schema}")

    what = "PostgreSQL media store"

    def __repr__(self) -> str:
        return f"PostgresMediaStore(schema={self.schema!r})"

    async def _ensure(self, conn: Connection) -> None:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", self._lock_key)
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self._s}")
            for statement in schema("BYTEA", "DOUBLE PRECISION", f"{self._s}."):
                await conn.execute(statement)

    async def _pool(self) -> Pool:
        return self._external_pool or await self._pools.get()

    # -- the store ---------------------------------------------------------------------------

    async def _write(self, sha256: str, data: bytes, mime_type: str, now: float) -> None:
        query = (
            f"INSERT INTO {self._s}.{BLOBS} (sha256, mime_type, size_bytes, created_at, data) "
            "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (sha256) DO NOTHING"
        )
        await self._run(lambda conn: conn.execute(query, sha256, mime_type, len(data), now, data))

    async def _read(self, sha256: str) -> bytes | None:
        query = f"SELECT data FROM {self._s}.{BLOBS} WHERE sha256 = $1"
        data = await self._run(lambda conn: conn.fetchval(query, sha256))
        return None if data is None else bytes(data)

    async def ainfo(self, sha256: str) -> StoredMedia | None:
        query = f"{self._info_query()} WHERE sha256 = $1"
        row = await self._run(lambda conn: conn.fetchrow(query, sha256))
        return None if row is None else _info(row)

    def _info_query(self) -> str:
        return f"SELECT sha256, size_bytes, mime_type, created_at FROM {self._s}.{BLOBS}"

    async def adelete(self, sha256: str) -> bool:
        query = (
            f"WITH gone AS (DELETE FROM {self._s}.{OWNERS} WHERE sha256 = $1) "
            f"DELETE FROM {self._s}.{BLOBS} WHERE sha256 = $1 RETURNING sha256"
        )
        return await self._run(lambda conn: conn.fetchval(query, sha256)) is not None

    async def aadd_owners(self, thread_id: str, sha256s: Iterable[str]) -> set[str]:
        wanted = sorted(set(sha256s))
        if not wanted:
            return set()
        # the blob rows are locked (KEY SHARE, in sha order) until the owners are committed:
        # a release or sweep deleting one of them waits, then sees its new owner
        held = (
            f"SELECT sha256 FROM {self._s}.{BLOBS} WHERE sha256 = ANY($1::text[]) "
            "ORDER BY sha256 FOR KEY SHARE"
        )
        own = (
            f"INSERT INTO {self._s}.{OWNERS} (thread_id, sha256) "
            "SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING"
        )

        async def add(conn: Connection) -> set[str]:
            async with conn.transaction():
                found = [str(row[0]) for row in await conn.fetch(held, wanted)]
                if found:
                    await conn.execute(own, thread_id, found)
            return set(wanted).difference(found)

        return await self._run(add)

    async def aowners(self, sha256: str) -> set[str]:
        query = f"SELECT thread_id FROM {self._s}.{OWNERS} WHERE sha256 = $1"
        rows = await self._run(lambda conn: conn.fetch(query, sha256))
        return {str(row[0]) for row in rows}

    async def arelease_thread(self, thread_id: str) -> list[str]:
        released = f"DELETE FROM {self._s}.{OWNERS} WHERE thread_id = $1 RETURNING sha256"

        async def release(conn: Connection) -> list[str]:
            async with conn.transaction():
                shas = [str(row[0]) for row in await conn.fetch(released, thread_id)]
                return await self._delete_unowned(conn, "b.sha256 = ANY($1::text[])", shas)

        return await self._run(release)

    def _unowned(self) -> str:
        return f"NOT EXISTS (SELECT 1 FROM {self._s}.{OWNERS} o WHERE o.sha256 = b.sha256)"

    async def agc(self, *, older_than: float = DEFAULT_GC_GRACE) -> list[str]:
        cutoff = self._cutoff(older_than)

        async def sweep(conn: Connection) -> list[str]:
            async with conn.transaction():
                return await self._delete_unowned(conn, "b.created_at <= $1", cutoff)

        return await self._run(sweep)

    async def _delete_unowned(self, conn: Connection, where: str, arg: Any) -> list[str]:
        """Delete the blobs matching `where` that no thread owns, in the caller's transaction.
        Their rows are locked first (in sha order), waiting for any statement owning one of
        them to commit; the delete, a statement of its own, then sees those new owners."""
        lock = (
            f"SELECT b.sha256 FROM {self._s}.{BLOBS} b WHERE {where} AND {self._unowned()} "
            "ORDER BY b.sha256 FOR UPDATE"
        )
        candidates = [str(row[0]) for row in await conn.fetch(lock, arg)]
        if not candidates:
            return []
        delete = (
            f"DELETE FROM {self._s}.{BLOBS} b WHERE b.sha256 = ANY($1::text[]) "
            f"AND {self._unowned()} "
            "RETURNING b.sha256"
        )
        return sorted(str(row[0]) for row in await conn.fetch(delete, candidates))

    async def alist(self) -> list[StoredMedia]:
        query = f"{self._info_query()} ORDER BY sha256"
        rows = await self._run(lambda conn: conn.fetch(query))
        return [_info(row) for row in rows]

    async def asweepable(self, *, older_than: float = DEFAULT_GC_GRACE) -> list[StoredMedia]:
        query = (
            f"{self._info_query()} b WHERE b.created_at <= $1 AND {self._unowned()} "
            "ORDER BY b.sha256"
        )
        cutoff = self._cutoff(older_than)
        rows = await self._run(lambda conn: conn.fetch(query, cutoff))
        return [_info(row) for row in rows]

    # -- provider file ids -------------------------------------------------------------------

    async def aprovider_file(
        self, provider: str, api_base: str, sha256: str
    ) -> ProviderFile | None:
        query = (
            f"SELECT file_id, expires_at FROM {self._s}.{FILES} "
            "WHERE provider = $1 AND api_base = $2 AND sha256 = $3"
        )
        row = await self._run(lambda conn: conn.fetchrow(query, provider, api_base, sha256))
        if row is None:
            return None
        return ProviderFile(str(row[0]), None if row[1] is None else float(row[1]))

    async def aremember_provider_file(
        self, provider: str, api_base: str, sha256: str, file: ProviderFile
    ) -> None:
        query = (
            f"INSERT INTO {self._s}.{FILES} "
            "(provider, api_base, sha256, file_id, expires_at, created_at) "
            "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (provider, api_base, sha256) DO UPDATE "
            "SET file_id = excluded.file_id, expires_at = excluded.expires_at, "
            "created_at = excluded.created_at"
        )
        args = (provider, api_base, sha256, file.file_id, file.expires_at, time.time())
        await self._run(lambda conn: conn.execute(query, *args))

    async def aforget_provider_file(self, provider: str, api_base: str, sha256: str) -> None:
        query = (
            f"DELETE FROM {self._s}.{FILES} WHERE provider = $1 AND api_base = $2 AND sha256 = $3"
        )
        await self._run(lambda conn: conn.execute(query, provider, api_base, sha256))


def _info(row: Any) -> StoredMedia:
    return StoredMedia(str(row[0]), int(row[1]), str(row[2]), float(row[3]))


__all__ = ["PostgresMediaStore"]
