"""The server's tables in a SQLite file (the embedded default: one server process, or several
on one host sharing the file). Each write is one `BEGIN IMMEDIATE` transaction, so a claim or
a multitask decision is atomic across processes too."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tenxgraph.serve.db.base import (
    ServeDB,
    ThreadBusyError,
    ThreadExistsError,
    metadata_matches,
)
from tenxgraph.serve.db.rows import (
    RUN_COLUMNS,
    THREAD_COLUMNS,
    run_from_row,
    run_row,
    thread_from_row,
)
from tenxgraph.serve.records import RunEvent, RunRecord, RunStatus, ThreadRecord, ThreadStatus
from tenxgraph.storage.checkpointer._sql import SqliteFile

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS serve_threads (
        thread_id TEXT PRIMARY KEY, owner TEXT NOT NULL, metadata TEXT NOT NULL,
        status TEXT NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS serve_threads_owner ON serve_threads (owner, updated_at)",
    """CREATE TABLE IF NOT EXISTS serve_runs (
        position INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL UNIQUE,
        thread_id TEXT NOT NULL, owner TEXT NOT NULL, assistant_id TEXT NOT NULL,
        kwargs TEXT NOT NULL, metadata TEXT NOT NULL, multitask_strategy TEXT NOT NULL,
        status TEXT NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL,
        worker TEXT, lease_expires REAL, cancel TEXT, attempt INTEGER NOT NULL,
        start_version INTEGER, result TEXT, temporary INTEGER NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS serve_runs_thread ON serve_runs (thread_id, status)",
    "CREATE INDEX IF NOT EXISTS serve_runs_status ON serve_runs (status, position)",
    """CREATE TABLE IF NOT EXISTS serve_events (
        run_id TEXT NOT NULL, seq INTEGER NOT NULL, event TEXT NOT NULL, data TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)) WITHOUT ROWID""",
)

# a retry after a commit whose answer was lost, or a late write of a worker whose run another
# took, writes nothing twice
_ADD_EVENTS = "INSERT OR IGNORE INTO serve_events (run_id, seq, event, data) VALUES (?, ?, ?, ?)"


def _done(cursor: sqlite3.Cursor) -> None:
    """Close a cursor inside the call that made it (never let one outlive the lock)."""
    cursor.close()


def _owned(owner: str | None) -> tuple[str, tuple[Any, ...]]:
    return ("", ()) if owner is None else (" AND owner = ?", (owner,))


class SqliteServeDB(SqliteFile, ServeDB):
    """`ServeDB` in a SQLite file (may be the checkpointer's own file: the tables differ)."""

    what = "server database"

    def __init__(self, db_path: str | Path, busy_timeout: float = 30.0) -> None:
        SqliteFile.__init__(self, db_path, busy_timeout)

    def __repr__(self) -> str:
        return f"SqliteServeDB({str(self.db_path)!r})"

    def _create(self, conn: sqlite3.Connection) -> None:
        for statement in _SCHEMA:
            conn.execute(statement)

    # -- threads --------------------------------------------------------------------------

    async def create_thread(self, thread: ThreadRecord) -> None:
        query = f"INSERT INTO serve_threads ({THREAD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
        args = (thread.thread_id, thread.owner, json.dumps(thread.metadata), thread.status,
                thread.created_at, thread.updated_at)  # fmt: skip

        def insert(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(query, args)
            except sqlite3.IntegrityError:
                raise ThreadExistsError(thread.thread_id) from None

        await self._run(insert)

    async def get_thread(self, thread_id: str, owner: str | None) -> ThreadRecord | None:
        where, extra = _owned(owner)
        query = f"SELECT {THREAD_COLUMNS} FROM serve_threads WHERE thread_id = ?{where}"
        row = await self._run(lambda conn: conn.execute(query, (thread_id, *extra)).fetchone())
        return None if row is None else thread_from_row(row)

    async def update_thread(
        self,
        thread_id: str,
        owner: str | None,
        *,
        metadata: dict[str, Any] | None = None,
        status: ThreadStatus | None = None,
    ) -> ThreadRecord | None:
        where, extra = _owned(owner)
        select = f"SELECT {THREAD_COLUMNS} FROM serve_threads WHERE thread_id = ?{where}"
        update = (
            "UPDATE serve_threads SET metadata = ?, status = ?, updated_at = ? WHERE thread_id = ?"
        )

        def change(conn: sqlite3.Connection) -> ThreadRecord | None:
            row = conn.execute(select, (thread_id, *extra)).fetchone()
            if row is None:
                return None
            thread = thread_from_row(row)
            thread.metadata = {**thread.metadata, **(metadata or {})}
            thread.status = status or thread.status
            thread.updated_at = time.time()
            args = (json.dumps(thread.metadata), thread.status, thread.updated_at, thread_id)
            conn.execute(update, args)
            return thread

        return await self._transaction(change)

    async def search_threads(
        self,
        owner: str,
        *,
        metadata: dict[str, Any] | None = None,
        status: ThreadStatus | None = None,
        ids: Sequence[str] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[ThreadRecord]:
        query = f"SELECT {THREAD_COLUMNS} FROM serve_threads WHERE owner = ?"
        args: list[Any] = [owner]
        if status is not None:
            query += " AND status = ?"
            args.append(status)
        if ids is not None:
            query += f" AND thread_id IN ({', '.join('?' * len(ids))})"
            args.extend(ids)
        query += " ORDER BY updated_at DESC, thread_id"
        rows = await self._run(lambda conn: conn.execute(query, args).fetchall())
        found = [t for t in map(thread_from_row, rows) if metadata_matches(t.metadata, metadata)]
        return found[offset : offset + limit]

    async def delete_thread(self, thread_id: str, owner: str | None) -> bool:
        where, extra = _owned(owner)

        def delete(conn: sqlite3.Connection) -> bool:
            gone = conn.execute(
                f"DELETE FROM serve_threads WHERE thread_id = ?{where}", (thread_id, *extra)
            ).rowcount
            if gone:
                runs = "SELECT run_id FROM serve_runs WHERE thread_id = ?"
                conn.execute(f"DELETE FROM serve_events WHERE run_id IN ({runs})", (thread_id,))
                conn.execute("DELETE FROM serve_runs WHERE thread_id = ?", (thread_id,))
            return bool(gone)

        return await self._transaction(delete)

    # -- runs -------------------------------------------------------------------------------

    async def create_run(self, run: RunRecord) -> list[str]:
        active = (
            "SELECT run_id FROM serve_runs WHERE thread_id = ? "
            "AND status IN ('pending', 'running') ORDER BY position"
        )
        insert = f"INSERT INTO serve_runs ({RUN_COLUMNS}) VALUES ({', '.join('?' * 17)})"

        def create(conn: sqlite3.Connection) -> list[str]:
            busy = [row[0] for row in conn.execute(active, (run.thread_id,))]
            if busy and run.multitask_strategy == "reject":
                raise ThreadBusyError(run.thread_id, busy[0])
            stopping = busy if run.multitask_strategy in ("interrupt", "rollback") else []
            conn.execute(insert, run_row(run))
            conn.execute(
                "UPDATE serve_threads SET status = 'busy', updated_at = ? WHERE thread_id = ?",
                (time.time(), run.thread_id),
            )
            return stopping

        return await self._transaction(create)

    async def get_run(self, run_id: str, owner: str | None) -> RunRecord | None:
        where, extra = _owned(owner)
        query = f"SELECT {RUN_COLUMNS} FROM serve_runs WHERE run_id = ?{where}"
        row = await self._run(lambda conn: conn.execute(query, (run_id, *extra)).fetchone())
        return None if row is None else run_from_row(row)

    async def search_runs(
        self,
        owner: str,
        *,
        thread_id: str | None = None,
        status: RunStatus | None = None,
        assistant_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[RunRecord]:
        query = f"SELECT {RUN_COLUMNS} FROM serve_runs WHERE owner = ?"
        args: list[Any] = [owner]
        for column, value in (
            ("thread_id", thread_id), ("status", status), ("assistant_id", assistant_id)
        ):  # fmt: skip
            if value is not None:
                query += f" AND {column} = ?"
                args.append(value)
        query += " ORDER BY position DESC"
        if not metadata:  # else matched here, as search_threads does
            query += " LIMIT ? OFFSET ?"
            args += [limit, offset]
        rows = await self._run(lambda conn: conn.execute(query, args).fetchall())
        found = [r for r in map(run_from_row, rows) if metadata_matches(r.metadata, metadata)]
        return found if not metadata else found[offset : offset + limit]

    async def claim_run(self, worker: str, ttl: float) -> RunRecord | None:
        abandoned = (
            f"SELECT {RUN_COLUMNS} FROM serve_runs WHERE status = 'running' "
            "AND lease_expires < ? ORDER BY position LIMIT 1"
        )
        queued = (
            f"SELECT {RUN_COLUMNS} FROM serve_runs r WHERE status = 'pending' AND NOT EXISTS "
            "(SELECT 1 FROM serve_runs o WHERE o.thread_id = r.thread_id AND (o.status = "
            "'running' OR (o.status = 'pending' AND o.position < r.position))) "
            "ORDER BY position LIMIT 1"
        )
        take = (
            "UPDATE serve_runs SET status = 'running', worker = ?, lease_expires = ?, "
            "attempt = attempt + 1, updated_at = ? WHERE run_id = ?"
        )

        def claim(conn: sqlite3.Connection) -> RunRecord | None:
            now = time.time()
            row = conn.execute(abandoned, (now,)).fetchone() or conn.execute(queued).fetchone()
            if row is None:
                return None
            run = run_from_row(row)
            run.status, run.worker, run.lease_expires = "running", worker, now + ttl
            run.attempt += 1
            conn.execute(take, (worker, now + ttl, now, run.run_id))
            return run

        return await self._transaction(claim)

    async def renew_runs(
        self, worker: str, run_ids: Sequence[str], ttl: float
    ) -> dict[str, str | None]:
        if not run_ids:
            return {}
        marks = ", ".join("?" * len(run_ids))
        held = f"run_id IN ({marks}) AND worker = ? AND status = 'running'"

        def renew(conn: sqlite3.Connection) -> dict[str, str | None]:
            conn.execute(
                f"UPDATE serve_runs SET lease_expires = ? WHERE {held}",
                (time.time() + ttl, *run_ids, worker),
            )
            rows = conn.execute(f"SELECT run_id, cancel FROM serve_runs WHERE {held}",
                                (*run_ids, worker))  # fmt: skip
            return {row[0]: row[1] for row in rows}

        return await self._transaction(renew)

    async def set_start_version(self, run_id: str, version: int | None) -> None:
        query = "UPDATE serve_runs SET start_version = ? WHERE run_id = ?"
        await self._transaction(lambda conn: _done(conn.execute(query, (version, run_id))))

    async def finish_run(
        self,
        run_id: str,
        worker: str | None,
        status: RunStatus,
        result: dict[str, Any] | None,
        thread_status: ThreadStatus,
        end: RunEvent | None = None,
    ) -> bool:
        mine = "" if worker is None else " AND worker = ?"
        update = (
            "UPDATE serve_runs SET status = ?, result = ?, updated_at = ?, lease_expires = NULL "
            f"WHERE run_id = ? AND status IN ('pending', 'running'){mine}"
        )
        args = (status, None if result is None else json.dumps(result), time.time(), run_id)

        def finish(conn: sqlite3.Connection) -> bool:
            if not conn.execute(update, args + (() if worker is None else (worker,))).rowcount:
                return False
            if end is not None:
                conn.execute(
                    "INSERT INTO serve_events (run_id, seq, event, data) VALUES (?, ?, ?, ?)",
                    (run_id, end.seq, end.event, end.data),
                ).close()
            row = conn.execute("SELECT thread_id FROM serve_runs WHERE run_id = ?", (run_id,))
            thread_id = row.fetchone()[0]
            others = conn.execute(
                "SELECT 1 FROM serve_runs WHERE thread_id = ? AND status IN "
                "('pending', 'running') LIMIT 1",
                (thread_id,),
            ).fetchone()
            conn.execute(
                "UPDATE serve_threads SET status = ?, updated_at = ? WHERE thread_id = ?",
                ("busy" if others else thread_status, time.time(), thread_id),
            )
            return True

        return await self._transaction(finish)

    async def request_cancel(self, run_ids: Sequence[str], action: str) -> list[RunRecord]:
        if not run_ids:
            return []
        marks = ", ".join("?" * len(run_ids))

        def cancel(conn: sqlite3.Connection) -> list[RunRecord]:
            pending = conn.execute(
                f"SELECT {RUN_COLUMNS} FROM serve_runs WHERE run_id IN ({marks}) "
                "AND status = 'pending'",
                tuple(run_ids),
            ).fetchall()
            now = time.time()
            conn.execute(
                f"UPDATE serve_runs SET status = 'interrupted', updated_at = ?, cancel = ? "
                f"WHERE run_id IN ({marks}) AND status = 'pending'",
                (now, action, *run_ids),
            )
            conn.execute(
                f"UPDATE serve_runs SET cancel = ? WHERE run_id IN ({marks}) "
                "AND status = 'running'",
                (action, *run_ids),
            )
            ended = [run_from_row(row) for row in pending]
            for thread_id in {run.thread_id for run in ended}:  # idle unless others remain
                conn.execute(
                    "UPDATE serve_threads SET status = CASE WHEN EXISTS (SELECT 1 FROM "
                    "serve_runs WHERE thread_id = ? AND status IN ('pending', 'running')) "
                    "THEN 'busy' ELSE 'idle' END, updated_at = ? WHERE thread_id = ?",
                    (thread_id, now, thread_id),
                ).close()
            return ended

        return await self._transaction(cancel)

    async def delete_run(self, run_id: str, owner: str) -> bool:
        def delete(conn: sqlite3.Connection) -> bool:
            gone = conn.execute(
                "DELETE FROM serve_runs WHERE run_id = ? AND owner = ? "
                "AND status NOT IN ('pending', 'running')",
                (run_id, owner),
            ).rowcount
            if gone:
                conn.execute("DELETE FROM serve_events WHERE run_id = ?", (run_id,))
            return bool(gone)

        return await self._transaction(delete)

    # -- events -----------------------------------------------------------------------------

    async def add_events(self, run_id: str, events: Sequence[RunEvent]) -> None:
        query = _ADD_EVENTS
        rows = [(run_id, e.seq, e.event, e.data) for e in events]
        await self._transaction(lambda conn: _done(conn.executemany(query, rows)))

    async def add_events_many(self, rows: Sequence[tuple[str, RunEvent]]) -> None:
        query = _ADD_EVENTS
        values = [(run_id, e.seq, e.event, e.data) for run_id, e in rows]
        await self._transaction(lambda conn: _done(conn.executemany(query, values)))

    async def read_events(self, run_id: str, after: int, limit: int = 500) -> list[RunEvent]:
        query = (
            "SELECT seq, event, data FROM serve_events WHERE run_id = ? AND seq > ? "
            "ORDER BY seq LIMIT ?"
        )
        rows = await self._run(lambda conn: conn.execute(query, (run_id, after, limit)).fetchall())
        return [RunEvent(*row) for row in rows]

    async def last_seq(self, run_id: str) -> int:
        query = "SELECT MAX(seq) FROM serve_events WHERE run_id = ?"
        row = await self._run(lambda conn: conn.execute(query, (run_id,)).fetchone())
        return int(row[0] or 0)


__all__ = ["SqliteServeDB"]
