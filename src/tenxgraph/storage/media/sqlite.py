"""`SqliteMediaStore`: blobs in a SQLite file, in their own tables (`_sql`), never in the
message rows. The default media store of a file-backed `SqliteCheckpointer` uses its file.

One `sqlite3` connection per store, used by one call at a time (a lock) in a worker thread,
like `SqliteStore`: any event loop can use the same store. Each call is one transaction.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from tenxgraph.storage.checkpointer._sql import SqliteFile
from tenxgraph.storage.media._sql import BLOBS, FILES, OWNERS, schema
from tenxgraph.storage.media.base import (
    DEFAULT_GC_GRACE,
    MediaStore,
    ProviderFile,
    StoredMedia,
)

T = TypeVar("T")

_INFO = f"SELECT sha256, size_bytes, mime_type, created_at FROM {BLOBS}"


class SqliteMediaStore(SqliteFile, MediaStore):
    """Blobs in the SQLite file `db_path` (e.g. the checkpointer's)."""

    what = "media store"

    def __init__(self, db_path: str | Path, *, busy_timeout: float = 5.0) -> None:
        if str(db_path) == ":memory:":
            raise ValueError("SqliteMediaStore keeps blobs in a file; use InMemoryMediaStore()")
        SqliteFile.__init__(self, db_path, busy_timeout)

    def __repr__(self) -> str:
        return f"SqliteMediaStore({str(self.db_path)!r})"

    def _create(self, conn: sqlite3.Connection) -> None:
        for statement in schema("BLOB", "REAL"):
            conn.execute(statement)

    # -- the store ---------------------------------------------------------------------------

    async def _write(self, sha256: str, data: bytes, mime_type: str, now: float) -> None:
        query = (
            f"INSERT INTO {BLOBS} (sha256, mime_type, size_bytes, created_at, data) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (sha256) DO NOTHING"
        )
        args = (sha256, mime_type, len(data), now, data)
        await self._run(lambda conn: conn.execute(query, args))

    async def _read(self, sha256: str) -> bytes | None:
        query = f"SELECT data FROM {BLOBS} WHERE sha256 = ?"
        row = await self._run(lambda conn: conn.execute(query, (sha256,)).fetchone())
        return None if row is None else bytes(row[0])

    async def ainfo(self, sha256: str) -> StoredMedia | None:
        query = f"{_INFO} WHERE sha256 = ?"
        row = await self._run(lambda conn: conn.execute(query, (sha256,)).fetchone())
        return None if row is None else _info(row)

    async def adelete(self, sha256: str) -> bool:
        def delete(conn: sqlite3.Connection) -> bool:
            conn.execute(f"DELETE FROM {OWNERS} WHERE sha256 = ?", (sha256,))
            return conn.execute(f"DELETE FROM {BLOBS} WHERE sha256 = ?", (sha256,)).rowcount > 0

        return await self._transaction(delete)

    async def aadd_owners(self, thread_id: str, sha256s: Iterable[str]) -> set[str]:
        wanted = sorted(set(sha256s))
        if not wanted:
            return set()
        marks = ", ".join("?" * len(wanted))
        held = f"SELECT sha256 FROM {BLOBS} WHERE sha256 IN ({marks})"
        own = (
            f"INSERT INTO {OWNERS} (thread_id, sha256) SELECT ?, sha256 FROM {BLOBS} "
            f"WHERE sha256 IN ({marks}) ON CONFLICT DO NOTHING"
        )

        def add(conn: sqlite3.Connection) -> set[str]:  # one transaction: no release between
            conn.execute(own, (thread_id, *wanted))
            return set(wanted).difference(row[0] for row in conn.execute(held, wanted))

        return await self._transaction(add)

    async def aowners(self, sha256: str) -> set[str]:
        query = f"SELECT thread_id FROM {OWNERS} WHERE sha256 = ?"
        rows = await self._run(lambda conn: conn.execute(query, (sha256,)).fetchall())
        return {str(row[0]) for row in rows}

    async def arelease_thread(self, thread_id: str) -> list[str]:
        def release(conn: sqlite3.Connection) -> list[str]:
            query = f"DELETE FROM {OWNERS} WHERE thread_id = ? RETURNING sha256"
            released = [str(row[0]) for row in conn.execute(query, (thread_id,)).fetchall()]
            return _delete_unowned(conn, released, None)

        return await self._transaction(release)

    async def agc(self, *, older_than: float = DEFAULT_GC_GRACE) -> list[str]:
        cutoff = self._cutoff(older_than)
        return await self._transaction(lambda conn: _delete_unowned(conn, None, cutoff))

    async def alist(self) -> list[StoredMedia]:
        rows = await self._run(lambda conn: conn.execute(f"{_INFO} ORDER BY sha256").fetchall())
        return [_info(row) for row in rows]

    async def asweepable(self, *, older_than: float = DEFAULT_GC_GRACE) -> list[StoredMedia]:
        query = (
            f"{_INFO} WHERE created_at <= ? AND NOT EXISTS "
            f"(SELECT 1 FROM {OWNERS} o WHERE o.sha256 = {BLOBS}.sha256) ORDER BY sha256"
        )
        cutoff = self._cutoff(older_than)
        rows = await self._run(lambda conn: conn.execute(query, (cutoff,)).fetchall())
        return [_info(row) for row in rows]

    # -- provider file ids -------------------------------------------------------------------

    async def aprovider_file(
        self, provider: str, api_base: str, sha256: str
    ) -> ProviderFile | None:
        query = (
            f"SELECT file_id, expires_at FROM {FILES} "
            "WHERE provider = ? AND api_base = ? AND sha256 = ?"
        )
        args = (provider, api_base, sha256)
        row = await self._run(lambda conn: conn.execute(query, args).fetchone())
        return None if row is None else ProviderFile(str(row[0]), _float(row[1]))

    async def aremember_provider_file(
        self, provider: str, api_base: str, sha256: str, file: ProviderFile
    ) -> None:
        query = (
            f"INSERT INTO {FILES} (provider, api_base, sha256, file_id, expires_at, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (provider, api_base, sha256) DO UPDATE SET "
            "file_id = excluded.file_id, expires_at = excluded.expires_at, "
            "created_at = excluded.created_at"
        )
        args = (provider, api_base, sha256, file.file_id, file.expires_at, time.time())
        await self._run(lambda conn: conn.execute(query, args))

    async def aforget_provider_file(self, provider: str, api_base: str, sha256: str) -> None:
        query = f"DELETE FROM {FILES} WHERE provider = ? AND api_base = ? AND sha256 = ?"
        args = (provider, api_base, sha256)
        await self._run(lambda conn: conn.execute(query, args))


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _delete_unowned(
    conn: sqlite3.Connection, among: list[str] | None, cutoff: float | None
) -> list[str]:
    """Delete the blobs no thread owns: those of `among` (None: all) created by `cutoff`."""
    where = f"NOT EXISTS (SELECT 1 FROM {OWNERS} o WHERE o.sha256 = {BLOBS}.sha256)"
    args: list[Any] = []
    if among is not None:
        if not among:
            return []
        where += f" AND sha256 IN ({', '.join('?' * len(among))})"
        args += among
    if cutoff is not None:
        where += " AND created_at <= ?"
        args.append(cutoff)
    rows = conn.execute(f"DELETE FROM {BLOBS} WHERE {where} RETURNING sha256", args).fetchall()
    return sorted(str(row[0]) for row in rows)


def _info(row: Any) -> StoredMedia:
    return StoredMedia(str(row[0]), int(row[1]), str(row[2]), float(row[3]))


__all__ = ["SqliteMediaStore"]
