"""The server's tables in PostgreSQL (`tx_serve_threads`, `tx_serve_runs`, `tx_serve_events`
in one schema): any number of workers on any number of hosts share the run queue.

Each write is one transaction. A worker claims a run with `SELECT ... FOR UPDATE SKIP LOCKED`,
so two workers never take the same run and never wait for each other's claim. Leases are
timed by the database's clock, not the workers': hosts whose clocks disagree still agree on
which lease expired. Metadata is `jsonb`, filtered by containment (`@>`).

asyncpg is imported on first use: `pip install 'tenxgraph[postgres]'`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from tenxgraph.serve.db.base import ServeDB, ThreadBusyError, ThreadExistsError
from tenxgraph.serve.db.rows import (
    RUN_COLUMNS,
    THREAD_COLUMNS,
    run_from_row,
    run_row,
    thread_from_row,
)
from tenxgraph.serve.records import RunEvent, RunRecord, RunStatus, ThreadRecord, ThreadStatus
from tenxgraph.storage.checkpointer._pg_pools import (
    Connection,
    PgTables,
    advisory_key,
    check_schema,
    dsn_pools,
    load_asyncpg,
)

if TYPE_CHECKING:
    from tenxgraph.serve.pg_bus import PgBus

T = TypeVar("T")

_NOW = "EXTRACT(EPOCH FROM clock_timestamp())::double precision"
_VERSION_TABLE = "tx_serve_version"  # one row: the version of the tables' layout
_SCHEMA_VERSION = 1
_CLAIM_TRIES = 5  # a claim that lost a race on one thread's run tries again this many times


def _schema(s: str) -> tuple[str, ...]:
    return (
        f"CREATE SCHEMA IF NOT EXISTS {s}",
        f"""CREATE TABLE IF NOT EXISTS {s}.tx_serve_threads (
            thread_id TEXT PRIMARY KEY, owner TEXT NOT NULL, metadata JSONB NOT NULL,
            status TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL)""",
        f"""CREATE INDEX IF NOT EXISTS tx_serve_threads_owner
            ON {s}.tx_serve_threads (owner, updated_at DESC)""",
        f"""CREATE TABLE IF NOT EXISTS {s}.tx_serve_runs (
            position BIGSERIAL PRIMARY KEY, run_id TEXT NOT NULL UNIQUE,
            thread_id TEXT NOT NULL, owner TEXT NOT NULL, assistant_id TEXT NOT NULL,
            kwargs TEXT NOT NULL, metadata JSONB NOT NULL, multitask_strategy TEXT NOT NULL,
            status TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL, worker TEXT,
            lease_expires DOUBLE PRECISION, cancel TEXT, attempt INTEGER NOT NULL,
            start_version BIGINT, result TEXT, temporary BOOLEAN NOT NULL)""",
        f"CREATE INDEX IF NOT EXISTS tx_serve_runs_thread ON {s}.tx_serve_runs (thread_id, status)",
        f"""CREATE INDEX IF NOT EXISTS tx_serve_runs_active ON {s}.tx_serve_runs (position)
            WHERE status IN ('pending', 'running')""",
        # The database itself refuses a second running run of one thread. The claim query
        # already skips a thread with a running or earlier pending run, but it reads a
        # snapshot: two claims whose snapshots both predate the other's commit could each
        # take a different pending run of one thread. This index turns that (rare) race into
        # a unique violation for the later claim, which then looks again; it waits at most
        # for the other claim's short transaction, and only when both hit one thread.
        f"""CREATE UNIQUE INDEX IF NOT EXISTS tx_serve_runs_one_running
            ON {s}.tx_serve_runs (thread_id) WHERE status = 'running'""",
        f"""CREATE TABLE IF NOT EXISTS {s}.tx_serve_events (
            run_id TEXT NOT NULL, seq INTEGER NOT NULL, event TEXT NOT NULL,
            data TEXT NOT NULL, PRIMARY KEY (run_id, seq))""",
    )


def _owned(owner: str | None, n: int) -> tuple[str, tuple[Any, ...]]:
    """The owner condition, its placeholder numbered `n`."""
    return ("", ()) if owner is None else (f" AND owner = ${n}", (owner,))


class PostgresServeDB(PgTables, ServeDB):
    """`ServeDB` in PostgreSQL (`dsn`), in `schema` (created on first use). Pools as
    `PostgresStore`'s: one per event loop, `min_size`..`max_size` connections; transient
    failures retried `retries` times."""

    what = "PostgreSQL server database"

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "public",
        min_size: int = 1,
        max_size: int = 10,
        retries: int = 3,
    ) -> None:
        check_schema(schema)
        if retries < 0:
            raise ValueError("retries must be >= 0")
        load_asyncpg("PostgresServeDB")
        self.dsn, self.schema = dsn, schema
        self._s = f'"{schema}"'
        self._threads = f"{self._s}.tx_serve_threads"
        self._runs = f"{self._s}.tx_serve_runs"
        self._events = f"{self._s}.tx_serve_events"
        self._retries = retries
        self._pools = dsn_pools(dsn, min_size, max_size, "PostgresServeDB")
        self._ready = False
        self._lock_key = advisory_key(f"tenxgraph-serve:{schema}")

    def __repr__(self) -> str:
        return f"PostgresServeDB(schema={self.schema!r})"

    def bus(self) -> PgBus:
        """A bus carrying wake-ups between the workers of this database (LISTEN/NOTIFY)."""
        from tenxgraph.serve.pg_bus import PgBus

        return PgBus(self.dsn, channel=f"tx_serve_{self.schema}")

    async def _ensure(self, conn: Connection) -> None:
        async with conn.transaction():
            # many workers may start at once: one creates the tables, the others wait here
            await conn.execute("SELECT pg_advisory_xact_lock($1)", self._lock_key)
            # Made already: no DDL then. Even `CREATE INDEX IF NOT EXISTS` locks its table,
            # and a worker starting while others run would deadlock with their transactions.
            marker = f"{self._s}.{_VERSION_TABLE}"
            if await conn.fetchval("SELECT to_regclass($1)", marker) is not None:
                found = await conn.fetchval(f"SELECT MAX(version) FROM {marker}")
                if found == _SCHEMA_VERSION:
                    return
                if found is not None:
                    raise RuntimeError(
                        f"the server tables in schema {self.schema!r} are of version {found}; "
                        f"this tenxgraph uses version {_SCHEMA_VERSION}: use another schema "
                        "(or database), or the tenxgraph version that made them"
                    )
            for statement in _schema(self._s):
                await conn.execute(statement)
            await conn.execute(f"CREATE TABLE IF NOT EXISTS {marker} (version INTEGER NOT NULL)")
            await conn.execute(f"INSERT INTO {marker} VALUES ($1)", _SCHEMA_VERSION)

    async def _transaction(self, operation: Callable[[Connection], Awaitable[T]]) -> T:
        async def within(conn: Connection) -> T:
            async with conn.transaction():
                return await operation(conn)

        return await self._run(within)

    # -- threads --------------------------------------------------------------------------

    async def create_thread(self, thread: ThreadRecord) -> None:
        query = (
            f"INSERT INTO {self._threads} ({THREAD_COLUMNS}) "
            "VALUES ($1, $2, $3::jsonb, $4, $5, $6) ON CONFLICT (thread_id) DO NOTHING"
        )
        args = (thread.thread_id, thread.owner, json.dumps(thread.metadata), thread.status,
                thread.created_at, thread.updated_at)  # fmt: skip
        done = await self._run(lambda conn: conn.execute(query, *args))
        if done.endswith(" 0"):
            raise ThreadExistsError(thread.thread_id)

    async def get_thread(self, thread_id: str, owner: str | None) -> ThreadRecord | None:
        where, extra = _owned(owner, 2)
        query = f"SELECT {THREAD_COLUMNS} FROM {self._threads} WHERE thread_id = $1{where}"
        row = await self._run(lambda conn: conn.fetchrow(query, thread_id, *extra))
        return None if row is None else thread_from_row(row)

    async def update_thread(
        self,
        thread_id: str,
        owner: str | None,
        *,
        metadata: dict[str, Any] | None = None,
        status: ThreadStatus | None = None,
    ) -> ThreadRecord | None:
        where, extra = _owned(owner, 4)
        query = (
            f"UPDATE {self._threads} SET metadata = metadata || $2::jsonb, "
            f"status = COALESCE($3, status), updated_at = {_NOW} "
            f"WHERE thread_id = $1{where} RETURNING {THREAD_COLUMNS}"
        )
        args = (thread_id, json.dumps(metadata or {}), status, *extra)
        row = await self._run(lambda conn: conn.fetchrow(query, *args))
        return None if row is None else thread_from_row(row)

    def _thread_filter(
        self,
        owner: str,
        metadata: dict[str, Any] | None,
        status: ThreadStatus | None,
        ids: Sequence[str] | None = None,
    ) -> tuple[str, list[Any]]:
        where = "owner = $1"
        args: list[Any] = [owner]
        if metadata:
            args.append(json.dumps(metadata))
            where += f" AND metadata @> ${len(args)}::jsonb"
        if status is not None:
            args.append(status)
            where += f" AND status = ${len(args)}"
        if ids is not None:
            args.append(list(ids))
            where += f" AND thread_id = ANY(${len(args)}::text[])"
        return where, args

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
        where, args = self._thread_filter(owner, metadata, status, ids)
        query = (
            f"SELECT {THREAD_COLUMNS} FROM {self._threads} WHERE {where} "
            f"ORDER BY updated_at DESC, thread_id LIMIT ${len(args) + 1} OFFSET ${len(args) + 2}"
        )
        rows = await self._run(lambda conn: conn.fetch(query, *args, limit, offset))
        return [thread_from_row(row) for row in rows]

    async def count_threads(
        self,
        owner: str,
        *,
        metadata: dict[str, Any] | None = None,
        status: ThreadStatus | None = None,
    ) -> int:
        where, args = self._thread_filter(owner, metadata, status)
        query = f"SELECT COUNT(*) FROM {self._threads} WHERE {where}"
        return int(await self._run(lambda conn: conn.fetchval(query, *args)))

    async def delete_thread(self, thread_id: str, owner: str | None) -> bool:
        where, extra = _owned(owner, 2)

        async def delete(conn: Connection) -> bool:
            gone = await conn.execute(
                f"DELETE FROM {self._threads} WHERE thread_id = $1{where}", thread_id, *extra
            )
            if gone.endswith(" 0"):
                return False
            await conn.execute(
                f"DELETE FROM {self._events} WHERE run_id IN "
                f"(SELECT run_id FROM {self._runs} WHERE thread_id = $1)",
                thread_id,
            )
            await conn.execute(f"DELETE FROM {self._runs} WHERE thread_id = $1", thread_id)
            return True

        return await self._transaction(delete)

    # -- runs -------------------------------------------------------------------------------

    async def create_run(self, run: RunRecord) -> list[str]:
        marks = ", ".join(f"${i}" for i in range(1, 18)).replace("$6", "$6::jsonb")
        insert = f"INSERT INTO {self._runs} ({RUN_COLUMNS}) VALUES ({marks})"

        async def create(conn: Connection) -> list[str]:
            # the thread's row lock orders the multitask decisions (and the queue positions)
            # of two runs asked of one thread at once
            await conn.execute(
                f"SELECT 1 FROM {self._threads} WHERE thread_id = $1 FOR UPDATE", run.thread_id
            )
            rows = await conn.fetch(
                f"SELECT run_id FROM {self._runs} WHERE thread_id = $1 "
                "AND status IN ('pending', 'running') ORDER BY position",
                run.thread_id,
            )
            busy = [row[0] for row in rows]
            if busy and run.multitask_strategy == "reject":
                raise ThreadBusyError(run.thread_id, busy[0])
            await conn.execute(insert, *run_row(run))
            await conn.execute(
                f"UPDATE {self._threads} SET status = 'busy', updated_at = {_NOW} "
                "WHERE thread_id = $1",
                run.thread_id,
            )
            return busy if run.multitask_strategy in ("interrupt", "rollback") else []

        return await self._transaction(create)

    async def get_run(self, run_id: str, owner: str | None) -> RunRecord | None:
        where, extra = _owned(owner, 2)
        query = f"SELECT {RUN_COLUMNS} FROM {self._runs} WHERE run_id = $1{where}"
        row = await self._run(lambda conn: conn.fetchrow(query, run_id, *extra))
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
        query = (
            f"SELECT {RUN_COLUMNS} FROM {self._runs} WHERE owner = $1 "
            "AND ($2::text IS NULL OR status = $2) AND ($3::text IS NULL OR assistant_id = $3) "
            "AND ($4::jsonb IS NULL OR metadata @> $4::jsonb) "
            "AND ($5::text IS NULL OR thread_id = $5) ORDER BY position DESC LIMIT $6 OFFSET $7"
        )
        wanted = json.dumps(metadata) if metadata else None
        args = (owner, status, assistant_id, wanted, thread_id, limit, offset)
        rows = await self._run(lambda conn: conn.fetch(query, *args))
        return [run_from_row(row) for row in rows]

    async def claim_run(self, worker: str, ttl: float) -> RunRecord | None:
        asyncpg = load_asyncpg("PostgresServeDB")
        for _ in range(_CLAIM_TRIES):
            try:
                return await self._transaction(lambda conn: self._claim(conn, worker, ttl))
            except asyncpg.UniqueViolationError:
                continue  # another worker just started a run of that thread: look again
        return None

    async def _claim(self, conn: Connection, worker: str, ttl: float) -> RunRecord | None:
        abandoned = (
            f"SELECT run_id FROM {self._runs} WHERE status = 'running' "
            f"AND lease_expires < {_NOW} ORDER BY position LIMIT 1 FOR UPDATE SKIP LOCKED"
        )
        queued = (
            f"SELECT run_id FROM {self._runs} r WHERE status = 'pending' AND NOT EXISTS "
            f"(SELECT 1 FROM {self._runs} o WHERE o.thread_id = r.thread_id AND (o.status = "
            "'running' OR (o.status = 'pending' AND o.position < r.position))) "
            "ORDER BY position LIMIT 1 FOR UPDATE SKIP LOCKED"
        )
        take = (
            f"UPDATE {self._runs} SET status = 'running', worker = $2, "
            f"lease_expires = {_NOW} + $3, attempt = attempt + 1, updated_at = {_NOW} "
            f"WHERE run_id = $1 RETURNING {RUN_COLUMNS}"
        )
        run_id = await conn.fetchval(abandoned) or await conn.fetchval(queued)
        if run_id is None:
            return None
        return run_from_row(await conn.fetchrow(take, run_id, worker, float(ttl)))

    async def renew_runs(
        self, worker: str, run_ids: Sequence[str], ttl: float
    ) -> dict[str, str | None]:
        if not run_ids:
            return {}
        query = (
            f"UPDATE {self._runs} SET lease_expires = {_NOW} + $3 WHERE run_id = ANY($1::text[]) "
            "AND worker = $2 AND status = 'running' RETURNING run_id, cancel"
        )
        rows = await self._run(lambda conn: conn.fetch(query, list(run_ids), worker, float(ttl)))
        return {row[0]: row[1] for row in rows}

    async def set_start_version(self, run_id: str, version: int | None) -> None:
        query = f"UPDATE {self._runs} SET start_version = $2 WHERE run_id = $1"
        await self._run(lambda conn: conn.execute(query, run_id, version))

    async def finish_run(
        self,
        run_id: str,
        worker: str | None,
        status: RunStatus,
        result: dict[str, Any] | None,
        thread_status: ThreadStatus,
        end: RunEvent | None = None,
    ) -> bool:
        update = (
            f"UPDATE {self._runs} SET status = $2, result = $3, updated_at = {_NOW}, "
            "lease_expires = NULL WHERE run_id = $1 AND status IN ('pending', 'running') "
            "AND ($4::text IS NULL OR worker = $4) RETURNING thread_id"
        )
        mark = (
            f"UPDATE {self._threads} SET updated_at = {_NOW}, status = CASE WHEN EXISTS "
            f"(SELECT 1 FROM {self._runs} WHERE thread_id = $1 AND status IN "
            "('pending', 'running')) THEN 'busy' ELSE $2 END WHERE thread_id = $1"
        )
        text = None if result is None else json.dumps(result)

        async def finish(conn: Connection) -> bool:
            thread_id = await conn.fetchval(update, run_id, status, text, worker)
            if thread_id is None:
                return False
            if end is not None:
                await conn.execute(
                    f"INSERT INTO {self._events} (run_id, seq, event, data) "
                    "VALUES ($1, $2, $3, $4)",
                    run_id,
                    end.seq,
                    end.event,
                    end.data,
                )
            await conn.execute(mark, thread_id, thread_status)
            return True

        return await self._transaction(finish)

    async def request_cancel(self, run_ids: Sequence[str], action: str) -> list[RunRecord]:
        if not run_ids:
            return []
        stop_pending = (
            f"UPDATE {self._runs} SET status = 'interrupted', updated_at = {_NOW}, cancel = $2 "
            f"WHERE run_id = ANY($1::text[]) AND status = 'pending' RETURNING {RUN_COLUMNS}"
        )
        ask_running = (
            f"UPDATE {self._runs} SET cancel = $2 WHERE run_id = ANY($1::text[]) "
            "AND status = 'running'"
        )

        idle_unless_busy = (
            f"UPDATE {self._threads} SET updated_at = {_NOW}, status = CASE WHEN EXISTS "
            f"(SELECT 1 FROM {self._runs} WHERE thread_id = $1 AND status IN "
            "('pending', 'running')) THEN 'busy' ELSE 'idle' END WHERE thread_id = $1"
        )

        async def cancel(conn: Connection) -> list[RunRecord]:
            rows = await conn.fetch(stop_pending, list(run_ids), action)
            await conn.execute(ask_running, list(run_ids), action)
            ended = [run_from_row(row) for row in rows]
            for thread_id in sorted({run.thread_id for run in ended}):
                await conn.execute(idle_unless_busy, thread_id)
            for run in ended:  # as they were before this call, like the SQLite backend's
                run.status, run.cancel = "pending", None
            return ended

        return await self._transaction(cancel)

    async def delete_run(self, run_id: str, owner: str) -> bool:
        async def delete(conn: Connection) -> bool:
            gone = await conn.execute(
                f"DELETE FROM {self._runs} WHERE run_id = $1 AND owner = $2 "
                "AND status NOT IN ('pending', 'running')",
                run_id,
                owner,
            )
            if gone.endswith(" 0"):
                return False
            await conn.execute(f"DELETE FROM {self._events} WHERE run_id = $1", run_id)
            return True

        return await self._transaction(delete)

    # -- events -----------------------------------------------------------------------------

    async def add_events(self, run_id: str, events: Sequence[RunEvent]) -> None:
        if not events:
            return
        # a retry after a commit whose answer was lost writes nothing twice
        query = (
            f"INSERT INTO {self._events} (run_id, seq, event, data) "
            "SELECT $1, * FROM unnest($2::int[], $3::text[], $4::text[]) "
            "ON CONFLICT (run_id, seq) DO NOTHING"
        )
        args = (
            run_id,
            [e.seq for e in events],
            [e.event for e in events],
            [e.data for e in events],
        )
        await self._run(lambda conn: conn.execute(query, *args))

    async def add_events_many(self, rows: Sequence[tuple[str, RunEvent]]) -> None:
        if not rows:
            return
        query = (  # ON CONFLICT: a retry after a commit whose answer was lost writes nothing twice
            f"INSERT INTO {self._events} (run_id, seq, event, data) "
            "SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::text[]) "
            "ON CONFLICT (run_id, seq) DO NOTHING"
        )
        args = (
            [run_id for run_id, _ in rows],
            [e.seq for _, e in rows],
            [e.event for _, e in rows],
            [e.data for _, e in rows],
        )
        await self._run(lambda conn: conn.execute(query, *args))

    async def read_events(self, run_id: str, after: int, limit: int = 500) -> list[RunEvent]:
        query = (
            f"SELECT seq, event, data FROM {self._events} WHERE run_id = $1 AND seq > $2 "
            "ORDER BY seq LIMIT $3"
        )
        rows = await self._run(lambda conn: conn.fetch(query, run_id, after, limit))
        return [RunEvent(row[0], row[1], row[2]) for row in rows]

    async def last_seq(self, run_id: str) -> int:
        query = f"SELECT MAX(seq) FROM {self._events} WHERE run_id = $1"
        return int(await self._run(lambda conn: conn.fetchval(query, run_id)) or 0)


__all__ = ["PostgresServeDB"]
