"""`SqliteCheckpointer`: the embedded default, every thread in one SQLite file (WAL mode).

A save is one `BEGIN IMMEDIATE` transaction: compare-and-swap on the thread's version, append the
step's messages, add one checkpoint row. It never rewrites earlier messages (except when a
context reducer rewrote the history: `rewrite=True`).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
import uuid
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiosqlite

from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer._codec import stored_text
from tenxgraph.storage.checkpointer._express import PriorityGate
from tenxgraph.storage.checkpointer._listing import (
    DEFAULT_PAGE_SIZE,
    check_offset_and_limit,
    check_page_limit,
    decode_cursor,
)
from tenxgraph.storage.checkpointer._sql import (
    HEX_ID,
    SCHEMA_VERSION,
    body_with_id,
    changed_history_error,
    check_restore,
    decode_tool_result,
    encode_tool_result,
    log_bodies,
    missing_messages_error,
    missing_version_error,
    no_thread_error,
    rewritten_version_error,
    same_log,
    schema_too_new_error,
    sqlite_error,
    stale_error,
)
from tenxgraph.storage.checkpointer.base import (
    BaseCheckpointer,
    CheckpointInfo,
    S,
    ThreadPage,
    ThreadSnapshot,
    Version,
    checkpoint_fields,
    decode_messages,
    decode_state,
    encode_header,
    encode_message,
    thread_page,
)
from tenxgraph.storage.checkpointer.lease import (
    DEFAULT_LEASE_TTL,
    Lease,
    LeaseHolder,
    busy_error,
    check_ttl,
)
from tenxgraph.storage.checkpointer.paging import SYSTEM_MARK, recent_state, sealed, system_rows

DEFAULT_DB_PATH = "~/.tenxgraph/checkpoints.db"

_SCHEMA_V1 = (
    """CREATE TABLE IF NOT EXISTS tx_threads (
        thread_id TEXT PRIMARY KEY,
        version INTEGER NOT NULL,
        generation INTEGER NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS tx_threads_created ON tx_threads (created_at, thread_id)",
    """CREATE TABLE IF NOT EXISTS tx_checkpoints (
        thread_id TEXT NOT NULL,
        version INTEGER NOT NULL,
        header TEXT NOT NULL,
        message_count INTEGER NOT NULL,
        generation INTEGER NOT NULL,
        step INTEGER NOT NULL,
        status TEXT NOT NULL,
        node TEXT,
        created_at REAL NOT NULL,
        PRIMARY KEY (thread_id, version))""",
    """CREATE TABLE IF NOT EXISTS tx_messages (
        thread_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        message_id TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (thread_id, seq))""",
    """CREATE TABLE IF NOT EXISTS tx_tool_results (
        thread_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        call_id TEXT NOT NULL,
        result TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (thread_id, message_id, call_id))""",
    """CREATE TABLE IF NOT EXISTS tx_stop_requests (
        thread_id TEXT PRIMARY KEY,
        created_at REAL NOT NULL)""",
)

# version 2: each thread's lease (the run that owns it, until when, its last heartbeat)
_LEASES_V2 = (
    "ALTER TABLE tx_threads ADD COLUMN lease_owner TEXT",
    "ALTER TABLE tx_threads ADD COLUMN lease_expires REAL",
    "ALTER TABLE tx_threads ADD COLUMN lease_heartbeat REAL",
)

# version 3: messages found by id, and system messages, without reading the thread's history
# (a lazy history's merge, a turn sent again, a context manager keeping system messages)
_MESSAGE_IDS_V3 = (
    "CREATE INDEX IF NOT EXISTS tx_messages_ids ON tx_messages (thread_id, message_id)",
    # system messages (few) found without reading the others: a context manager keeps them
    f"CREATE INDEX IF NOT EXISTS tx_messages_system ON tx_messages (thread_id, seq) "
    f"WHERE instr(body, '{SYSTEM_MARK}') > 0",
)

# version 4: restores (`arestore`) append a copy of an earlier version's messages, so a
# version's messages start at its `log_start` in the thread's log; versions of generations
# from before the last rewrite (`oldest_generation`) cannot load, the later ones can
_RESTORES_V4 = (
    "ALTER TABLE tx_threads ADD COLUMN log_start INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE tx_threads ADD COLUMN oldest_generation INTEGER NOT NULL DEFAULT 0",
    "UPDATE tx_threads SET oldest_generation = generation",
    "ALTER TABLE tx_checkpoints ADD COLUMN log_start INTEGER NOT NULL DEFAULT 0",
)

# version 5: a message row leaves out its message's id when its id column holds it (a text id
# JSON writes as it is), and a checkpoint's header the step, status and node of its columns
# (`encode_message(..., id_column=True)`, `encode_header(..., listed=True)`); the id column
# keeps an id of 32 hex digits as their 16 bytes (`id_key`). Reading puts them back and
# still reads the rows written before (the version tells an older tenxgraph not to read
# rows it would get wrong). The two tables keyed by the thread id alone are that key's
# b-tree (WITHOUT ROWID: no second tree, no page of its own to a near-empty index).
_THREAD_COLUMNS = (
    "thread_id, version, generation, created_at, updated_at, lease_owner, lease_expires, "
    "lease_heartbeat, log_start, oldest_generation"
)
_COMPACT_ROWS_V5 = (
    """CREATE TABLE tx_threads_v5 (
        thread_id TEXT PRIMARY KEY,
        version INTEGER NOT NULL,
        generation INTEGER NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        lease_owner TEXT,
        lease_expires REAL,
        lease_heartbeat REAL,
        log_start INTEGER NOT NULL DEFAULT 0,
        oldest_generation INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID""",
    f"INSERT INTO tx_threads_v5 ({_THREAD_COLUMNS}) SELECT {_THREAD_COLUMNS} FROM tx_threads "
    "WHERE thread_id IS NOT NULL",
    "DROP TABLE tx_threads",
    "ALTER TABLE tx_threads_v5 RENAME TO tx_threads",
    "CREATE INDEX IF NOT EXISTS tx_threads_created ON tx_threads (created_at, thread_id)",
    """CREATE TABLE tx_stop_requests_v5 (
        thread_id TEXT PRIMARY KEY,
        created_at REAL NOT NULL) WITHOUT ROWID""",
    "INSERT INTO tx_stop_requests_v5 (thread_id, created_at) SELECT thread_id, created_at "
    "FROM tx_stop_requests WHERE thread_id IS NOT NULL",
    "DROP TABLE tx_stop_requests",
    "ALTER TABLE tx_stop_requests_v5 RENAME TO tx_stop_requests",
)

# version 6: each thread has a small integer key (`thread_key`, given in order of creation),
# and the two tables a thread fills, its messages and its versions, are keyed by it: the text
# thread id (a service's UUID is 36 characters) is kept once, in tx_threads, instead of in
# every row and index entry. Rows of a thread without a tx_threads row, which nothing could
# read (every read starts there), are not copied.
_THREAD_KEYS_V6 = (
    "ALTER TABLE tx_threads ADD COLUMN thread_key INTEGER NOT NULL DEFAULT 0",
    "UPDATE tx_threads SET thread_key = k.n FROM (SELECT thread_id, row_number() OVER "
    "(ORDER BY created_at, thread_id) AS n FROM tx_threads) AS k "
    "WHERE k.thread_id = tx_threads.thread_id",
    "CREATE UNIQUE INDEX tx_threads_key ON tx_threads (thread_key)",
    """CREATE TABLE tx_messages_v6 (
        thread_key INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        message_id TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (thread_key, seq))""",
    "INSERT INTO tx_messages_v6 (thread_key, seq, message_id, body) "
    "SELECT t.thread_key, m.seq, m.message_id, m.body FROM tx_messages m "
    "JOIN tx_threads t ON t.thread_id = m.thread_id ORDER BY t.thread_key, m.seq",
    "DROP TABLE tx_messages",
    "ALTER TABLE tx_messages_v6 RENAME TO tx_messages",
    "CREATE INDEX tx_messages_ids ON tx_messages (thread_key, message_id)",
    f"CREATE INDEX tx_messages_system ON tx_messages (thread_key, seq) "
    f"WHERE instr(body, '{SYSTEM_MARK}') > 0",
    """CREATE TABLE tx_checkpoints_v6 (
        thread_key INTEGER NOT NULL,
        version INTEGER NOT NULL,
        header TEXT NOT NULL,
        message_count INTEGER NOT NULL,
        generation INTEGER NOT NULL,
        step INTEGER NOT NULL,
        status TEXT NOT NULL,
        node TEXT,
        created_at REAL NOT NULL,
        log_start INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (thread_key, version))""",
    "INSERT INTO tx_checkpoints_v6 (thread_key, version, header, message_count, generation, "
    "step, status, node, created_at, log_start) SELECT t.thread_key, c.version, c.header, "
    "c.message_count, c.generation, c.step, c.status, c.node, c.created_at, c.log_start "
    "FROM tx_checkpoints c JOIN tx_threads t ON t.thread_id = c.thread_id "
    "ORDER BY t.thread_key, c.version",
    "DROP TABLE tx_checkpoints",
    "ALTER TABLE tx_checkpoints_v6 RENAME TO tx_checkpoints",
)

# version 7: the last thread key given is kept (`tx_thread_keys`, one row), so a thread
# deleted and made again under the same id gets a new key even if the old one was the
# highest: a lazy history of the old thread then refuses to read the new one's log. Keys
# come from it alone, under the write lock, so the unique index on them goes (nothing finds
# a thread by its key), and the tool ledger becomes its key's b-tree (WITHOUT ROWID, as
# tx_threads): one page each less in a small database
_TOOL_COLUMNS = "thread_id, message_id, call_id, result, created_at"
_KEYS_NEVER_REUSED_V7 = (
    "CREATE TABLE tx_thread_keys (last INTEGER NOT NULL)",
    "INSERT INTO tx_thread_keys (last) SELECT coalesce(MAX(thread_key), 0) FROM tx_threads",
    "DROP INDEX IF EXISTS tx_threads_key",
    """CREATE TABLE tx_tool_results_v7 (
        thread_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        call_id TEXT NOT NULL,
        result TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (thread_id, message_id, call_id)) WITHOUT ROWID""",
    f"INSERT INTO tx_tool_results_v7 ({_TOOL_COLUMNS}) SELECT {_TOOL_COLUMNS} FROM tx_tool_results",
    "DROP TABLE tx_tool_results",
    "ALTER TABLE tx_tool_results_v7 RENAME TO tx_tool_results",
)

#: version -> statements taking a database from version-1 to version. Add new versions here
#: (and bump `SCHEMA_VERSION`); each runs in the same transaction as the version update.
MIGRATIONS: dict[int, Sequence[str]] = {
    1: _SCHEMA_V1,
    2: _LEASES_V2,
    3: _MESSAGE_IDS_V3,
    4: _RESTORES_V4,
    5: _COMPACT_ROWS_V5,
    6: _THREAD_KEYS_V6,
    7: _KEYS_NEVER_REUSED_V7,
}

# the key of the thread whose id is the statement's next parameter
_KEY = "(SELECT thread_key FROM tx_threads WHERE thread_id = ?)"

# a message row's JSON with its id put back (rows leave a text id out: its column holds it,
# as text or as the bytes of its hex digits: `id_key`)
_ID_TEXT = (
    "CASE WHEN typeof({a}message_id) = 'blob' THEN lower(hex({a}message_id)) ELSE {a}message_id END"
)
_BODY, _BODY_M = body_with_id("", _ID_TEXT), body_with_id("m.", _ID_TEXT)

_IDS_PER_QUERY = 500  # message ids looked up per statement (SQLite limits its parameters)


def id_key(message_id: str) -> str | bytes:
    """A message's id as tx_messages keeps it (schema 5): 32 lowercase hex digits as their
    16 bytes (half the bytes, in the row and in its index), any other id as its text."""
    return bytes.fromhex(message_id) if HEX_ID.fullmatch(message_id) else message_id


def _lookup_keys(ids: list[str]) -> list[str | bytes]:
    """What to look `ids` up by: each as `id_key` keeps it, and as text (rows written before
    schema 5 keep every id as text)."""
    return list(dict.fromkeys(key for i in ids for key in (i, id_key(i))))


def id_text(stored: object) -> str:
    """A stored message id (`id_key`, or the text of rows written before) as its text."""
    return stored.hex() if isinstance(stored, bytes) else str(stored)


@dataclass(slots=True)
class _LoopSlot:
    """The connection of one event loop, and the lock that serialises its use (a stopping
    run's calls go first)."""

    loop: asyncio.AbstractEventLoop
    lock: PriorityGate = field(default_factory=PriorityGate)
    conn: aiosqlite.Connection | None = None


async def _settled(conn: aiosqlite.Connection) -> None:
    """Roll back the transaction `conn` is in, if any, once every call queued before has run
    on its thread: a `BEGIN` or `COMMIT` whose await was cancelled still runs there. Finished
    even if the caller is cancelled again meanwhile, before the connection is given up."""

    async def settle() -> None:
        await conn.execute_fetchall("SELECT 1")  # runs after what was queued before it
        if conn.in_transaction:
            await conn.execute("ROLLBACK")

    cleanup = asyncio.ensure_future(settle())
    try:
        await asyncio.shield(cleanup)
    except asyncio.CancelledError:
        await cleanup
        raise


class SqliteCheckpointer(BaseCheckpointer):
    """Threads in one SQLite file (default `~/.tenxgraph/checkpoints.db`).

    Concurrency: each event loop that uses the checkpointer gets its own connection, opened on
    first use in that loop (so the same instance works from a private loop thread, as `invoke`
    uses, and from the caller's loop). Within a loop, operations take turns on an
    `asyncio.Lock`; across loops and processes SQLite's write lock serialises saves, and the
    version compare-and-swap makes a save based on an outdated version fail with
    `StaleStateError`. A write that waits longer than `busy_timeout` seconds for the lock
    raises `TransientStorageError`.

    `":memory:"` keeps the data in a private in-memory database shared by this instance's
    connections; it is gone once they are all closed.
    """

    def __init__(
        self,
        db_path: str | Path = DEFAULT_DB_PATH,
        *,
        busy_timeout: float = 5.0,
        lease_ttl: float = DEFAULT_LEASE_TTL,
    ) -> None:
        super().__init__()
        self.lease_ttl = check_ttl(lease_ttl)
        self._memory = str(db_path) == ":memory:"
        self.db_path: Path | None = None if self._memory else Path(db_path).expanduser()
        self._memory_uri = f"file:tenxgraph-{uuid.uuid4().hex}?mode=memory&cache=shared"
        self._busy_timeout = busy_timeout
        self._slots: dict[asyncio.AbstractEventLoop, _LoopSlot] = {}
        self._slots_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SqliteCheckpointer({':memory:' if self.db_path is None else str(self.db_path)!r})"

    # -- connections -----------------------------------------------------------------------

    def _slot(self) -> _LoopSlot:
        loop = asyncio.get_running_loop()
        stale: list[aiosqlite.Connection] = []
        with self._slots_lock:
            for other in [lp for lp in self._slots if lp.is_closed()]:
                conn = self._slots.pop(other).conn
                if conn is not None:
                    stale.append(conn)
            slot = self._slots.get(loop)
            if slot is None:
                slot = self._slots[loop] = _LoopSlot(loop)
        for conn in stale:  # their loop is gone: stop the worker thread without awaiting it
            _stop_unawaited(conn)
        return slot

    async def _open(self) -> aiosqlite.Connection:
        if self.db_path is not None:
            self.db_path.parent.mkdir(parents=True, exist_ok=True)
            target, uri = str(self.db_path), False
        else:
            target, uri = self._memory_uri, True
        pending = aiosqlite.connect(
            target, isolation_level=None, timeout=self._busy_timeout, uri=uri
        )
        # aiosqlite's worker thread is not a daemon: a checkpointer that is never closed would
        # keep the interpreter from exiting. SQLite itself is crash-safe, so let it be one.
        worker = getattr(pending, "_thread", None)
        if isinstance(worker, threading.Thread) and not worker.is_alive():
            worker.daemon = True
        conn: aiosqlite.Connection = await pending
        try:
            await conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
            if self.db_path is not None:
                await conn.execute("PRAGMA journal_mode = WAL")
            await conn.execute("PRAGMA synchronous = NORMAL")
            await self._ensure_schema(conn)
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _ensure_schema(self, conn: aiosqlite.Connection) -> None:
        if await self._schema_version(conn) == SCHEMA_VERSION:
            return
        try:
            await conn.execute("BEGIN IMMEDIATE")
            await conn.execute("CREATE TABLE IF NOT EXISTS tx_schema_version (version INTEGER)")
            found = await self._schema_version(conn) or 0
            if found > SCHEMA_VERSION:
                raise schema_too_new_error(f"SQLite database {self._where()}", found)
            for target in range(found + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[target]:
                    await conn.execute(statement)
            if found < SCHEMA_VERSION:
                await conn.execute("DELETE FROM tx_schema_version")
                await conn.execute(
                    "INSERT INTO tx_schema_version (version) VALUES (?)", (SCHEMA_VERSION,)
                )
            await conn.execute("COMMIT")
        except BaseException:
            await _settled(conn)
            raise

    async def _schema_version(self, conn: aiosqlite.Connection) -> int | None:
        try:
            async with conn.execute("SELECT MAX(version) FROM tx_schema_version") as cursor:
                row = await cursor.fetchone()
        except sqlite3.OperationalError:  # no such table yet
            return None
        return None if row is None or row[0] is None else int(row[0])

    def _where(self) -> str:
        return ":memory:" if self.db_path is None else repr(str(self.db_path))

    @asynccontextmanager
    async def _connected(self) -> AsyncIterator[aiosqlite.Connection]:
        slot = self._slot()
        try:
            async with slot.lock.turn():
                if slot.conn is None:
                    slot.conn = await self._open()
                yield slot.conn
        except sqlite3.Error as exc:
            where = self._where()
            raise sqlite_error(exc, "database", where, self.db_path, self._busy_timeout) from exc

    @asynccontextmanager
    async def _transaction(self, *, write: bool) -> AsyncIterator[aiosqlite.Connection]:
        """One transaction: `BEGIN IMMEDIATE` takes the write lock up front (no upgrade
        deadlocks); a read transaction gives its several queries one consistent snapshot."""
        async with self._connected() as conn:
            try:
                await conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                yield conn
                await conn.execute("COMMIT")
            except BaseException:
                await _settled(conn)  # never leave the shared connection inside a transaction
                raise

    async def _fetchone(
        self, conn: aiosqlite.Connection, sql: str, params: Sequence[Any] = ()
    ) -> sqlite3.Row | None:
        # one trip to the connection's thread (a cursor's execute, fetch and close are three)
        rows = list(await conn.execute_fetchall(sql, params))
        return rows[0] if rows else None

    async def _fetchall(
        self, conn: aiosqlite.Connection, sql: str, params: Sequence[Any] = ()
    ) -> list[sqlite3.Row]:
        return list(await conn.execute_fetchall(sql, params))

    # -- lifecycle -------------------------------------------------------------------------

    async def asetup(self) -> None:
        """Open this loop's connection and create or check the schema. Safe to repeat."""
        async with self._connected():
            pass

    async def aclose(self) -> None:
        """Close every connection. The checkpointer can be used again afterwards (it reopens)."""
        loop = asyncio.get_running_loop()
        with self._slots_lock:
            slots, self._slots = list(self._slots.values()), {}
        for slot in slots:
            if slot.conn is None:
                continue
            if slot.loop is loop:
                async with slot.lock.turn():
                    await slot.conn.close()
            else:  # owned by another loop: closing it from here must not await that loop
                _stop_unawaited(slot.conn)

    async def aclose_loop(self) -> None:
        """Close the running loop's connection only."""
        with self._slots_lock:
            slot = self._slots.pop(asyncio.get_running_loop(), None)
        if slot is not None and slot.conn is not None:
            async with slot.lock.turn():
                await slot.conn.close()

    # -- threads ---------------------------------------------------------------------------

    async def aversion(self, thread_id: str) -> int | None:
        async with self._connected() as conn:
            row = await self._fetchone(
                conn, "SELECT version, thread_key FROM tx_threads WHERE thread_id = ?", (thread_id,)
            )
        return None if row is None else Version(row[0], row[1])

    async def aload(
        self, thread_id: str, state_type: type[S], version: int | None = None
    ) -> ThreadSnapshot[S] | None:
        async with self._transaction(write=False) as conn:
            thread = await self._fetchone(
                conn,
                "SELECT version, oldest_generation, thread_key FROM tx_threads WHERE thread_id = ?",
                (thread_id,),
            )
            if thread is None:
                return None
            latest, oldest, key = int(thread[0]), int(thread[1]), int(thread[2])
            wanted = Version(latest if version is None else version, key)
            columns = "header, message_count, log_start, step, status, node"
            saved = await self._version_row(conn, thread_id, key, wanted, latest, oldest, columns)
            count = int(saved[1])
            rows = await self._fetchall(
                conn,
                f"SELECT {_BODY} FROM tx_messages WHERE thread_key = ? AND seq >= ? "
                "ORDER BY seq LIMIT ?",
                (key, int(saved[2]), count),
            )
        if len(rows) != count:
            raise missing_messages_error(thread_id, count, len(rows))
        header = stored_text(thread_id, "header", saved[0])
        bodies = [stored_text(thread_id, f"context.{i}", row[0]) for i, row in enumerate(rows)]
        state = decode_state(state_type, thread_id, header, bodies, listed=tuple(saved[3:6]))
        return ThreadSnapshot(thread_id, wanted, state)

    async def aload_recent(
        self,
        thread_id: str,
        state_type: type[S],
        keep: int,
        look_up: Collection[str | int] = (),
    ) -> ThreadSnapshot[S] | None:
        # (`look_up` is not answered here: a query of the local file costs little, and the
        # merge asks it when it needs to)
        if self._memory:  # a shared in-memory database cannot be read beside a writer
            return await self.aload(thread_id, state_type)
        keep = max(keep, 0)
        # one statement, so one snapshot and one trip to the connection's thread: the head's
        # header (on the first row only) and its last `keep` messages
        async with self._connected() as conn:
            rows = await self._fetchall(
                conn,
                "SELECT t.version, t.generation, c.generation, c.message_count, m.seq, "
                "CASE WHEN m.seq IS NULL OR m.seq = c.log_start + max(c.message_count - ?, 0) "
                f"THEN c.header END, {_BODY_M}, c.step, c.status, c.node, t.thread_key "
                "FROM tx_threads t JOIN tx_checkpoints c "
                "ON c.thread_key = t.thread_key AND c.version = t.version "
                "LEFT JOIN tx_messages m ON m.thread_key = t.thread_key "
                "AND m.seq >= c.log_start + max(c.message_count - ?, 0) "
                "AND m.seq < c.log_start + c.message_count "
                "WHERE t.thread_id = ? ORDER BY m.seq",
                (keep, keep, thread_id),
            )
        if not rows:
            return None
        first = rows[0]
        version, generation, count = int(first[0]), int(first[1]), int(first[3])
        if first[2] != generation:
            raise rewritten_version_error(thread_id, version)
        start = max(count - keep, 0)
        raw_header = first[5]
        if first[4] is None:  # no message in the range: the join's one row has none
            rows = []
        bodies = log_bodies(thread_id, [r[6] for r in rows], start, count)
        if raw_header is None:
            raise missing_messages_error(thread_id, count, start + len(rows) - 1)
        header = stored_text(thread_id, "header", raw_header)
        listed = (first[7], first[8], first[9])
        state = recent_state(
            self,
            state_type,
            thread_id,
            header,
            bodies,
            generation,
            count,
            listed=listed,
            incarnation=int(first[10]),
        )
        return ThreadSnapshot(thread_id, Version(version, first[10]), state)

    async def _log_rows(
        self,
        thread_id: str,
        generation: int,
        incarnation: int | None,
        sql: str,
        params: Sequence[Any],
    ) -> list[sqlite3.Row]:
        """Rows of a query on the thread's log, if the log is still the one of `generation`
        and the thread the one of key `incarnation` (else `changed_history_error`), both
        read in one snapshot. `sql`'s first parameters are where the log starts (its first
        message's seq) and the thread's key, then `params`."""
        async with self._transaction(write=False) as conn:
            thread = await self._fetchone(
                conn,
                "SELECT generation, log_start, thread_key FROM tx_threads WHERE thread_id = ?",
                (thread_id,),
            )
            if thread is None or not same_log(thread[0], thread[2], generation, incarnation):
                raise changed_history_error(thread_id)
            return await self._fetchall(conn, sql, (int(thread[1]), int(thread[2]), *params))

    async def aread_log(
        self,
        thread_id: str,
        state_type: type[AgentState],
        generation: int,
        start: int,
        stop: int,
        *,
        incarnation: int | None = None,
    ) -> list[Message]:
        rows = await self._log_rows(
            thread_id,
            generation,
            incarnation,
            f"SELECT {_BODY} FROM tx_messages, (SELECT ? AS base) WHERE thread_key = ? "
            "AND seq >= base + ? AND seq < base + ? ORDER BY seq",
            (start, stop),
        )
        bodies = log_bodies(thread_id, [r[0] for r in rows], start, stop)
        return sealed(decode_messages(state_type, thread_id, bodies, start))

    async def afind_ids(
        self,
        thread_id: str,
        generation: int,
        ids: list[str | int],
        below: int,
        *,
        incarnation: int | None = None,
    ) -> set[str]:
        wanted = sorted({str(i) for i in ids})
        found: set[str] = set()
        async with self._connected() as conn:
            for at in range(0, max(len(wanted), 1), _IDS_PER_QUERY):
                part = _lookup_keys(wanted[at : at + _IDS_PER_QUERY])
                # one statement: the thread's generation, and a row per id found (by the id
                # index: without statistics SQLite would walk the thread's log)
                rows = await self._fetchall(
                    conn,
                    "SELECT t.generation, t.thread_key, m.message_id FROM tx_threads t "
                    "LEFT JOIN tx_messages m INDEXED BY tx_messages_ids "
                    "ON m.thread_key = t.thread_key AND m.seq >= t.log_start "
                    "AND m.seq < t.log_start + ? "
                    f"AND m.message_id IN ({', '.join('?' * len(part))}) "
                    "WHERE t.thread_id = ?",
                    (below, *part, thread_id),
                )
                if not rows or not same_log(rows[0][0], rows[0][1], generation, incarnation):
                    raise changed_history_error(thread_id)
                found.update(id_text(r[2]) for r in rows if r[2] is not None)
        return found

    async def asystem_messages(
        self,
        thread_id: str,
        state_type: type[AgentState],
        generation: int,
        start: int,
        stop: int,
        *,
        incarnation: int | None = None,
    ) -> list[tuple[int, Message]]:
        rows = await self._log_rows(
            thread_id,
            generation,
            incarnation,
            f"SELECT seq - base, {_BODY} FROM (SELECT ? AS base), "
            "tx_messages INDEXED BY tx_messages_system "
            "WHERE thread_key = ? AND seq >= base + ? AND seq < base + ? "
            f"AND instr(body, '{SYSTEM_MARK}') > 0 ORDER BY seq",
            (start, stop),
        )
        return system_rows(state_type, thread_id, rows)

    async def asave(
        self,
        thread_id: str,
        *,
        expected_version: int | None,
        state: AgentState,
        new_messages: Sequence[Message],
        rewrite: bool = False,
        lease: Lease | None = None,
        release: bool = False,
    ) -> int:
        header = encode_header(state, thread_id, listed=True)
        encoded = [
            (id_key(str(m.message_id)), encode_message(m, id_column=True)) for m in new_messages
        ]
        step, status, node = checkpoint_fields(state)
        mine = None if lease is None else lease.owner
        async with self._transaction(write=True) as conn:
            thread = await self._fetchone(
                conn,
                "SELECT version, generation, lease_owner, lease_expires, log_start, "
                "oldest_generation, thread_key FROM tx_threads WHERE thread_id = ?",
                (thread_id,),
            )
            now = time.time()
            if thread is not None and _live_holder(thread[2], thread[3], now) not in (None, mine):
                raise busy_error(thread_id, str(thread[2]), thread[3] - now)
            current = None if thread is None else int(thread[0])
            if current != expected_version:
                raise stale_error(thread_id, expected_version, current)
            generation = 0 if thread is None else int(thread[1])
            base, oldest = (0, 0) if thread is None else (int(thread[4]), int(thread[5]))
            key = await self._new_key(conn) if thread is None else int(thread[6])
            if rewrite:
                await conn.execute("DELETE FROM tx_messages WHERE thread_key = ?", (key,))
                generation += 1
                start, base, oldest = 0, 0, generation
            else:
                last = await self._fetchone(
                    conn, "SELECT MAX(seq) FROM tx_messages WHERE thread_key = ?", (key,)
                )
                start = 0 if last is None or last[0] is None else int(last[0]) + 1
            await conn.executemany(
                "INSERT INTO tx_messages (thread_key, seq, message_id, body) VALUES (?, ?, ?, ?)",
                [(key, start + i, mid, body) for i, (mid, body) in enumerate(encoded)],
            )
            version = (current or 0) + 1
            owner: str | None = None
            expires: float | None = None
            if lease is not None and not release:
                owner, expires = lease.owner, now + lease.ttl
            await conn.execute(
                "INSERT INTO tx_checkpoints (thread_key, version, header, message_count, "
                "generation, log_start, step, status, node, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key, version, header, start - base + len(encoded), generation, base,
                 step, status, node, now),
            )  # fmt: skip
            if thread is None:
                await conn.execute(
                    "INSERT INTO tx_threads (thread_id, thread_key, version, generation, "
                    "created_at, updated_at, lease_owner, lease_expires, lease_heartbeat) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (thread_id, key, version, generation, now, now, owner, expires, now),
                )
            else:
                await conn.execute(
                    "UPDATE tx_threads SET version = ?, generation = ?, updated_at = ?, "
                    "lease_owner = ?, lease_expires = ?, lease_heartbeat = ?, log_start = ?, "
                    "oldest_generation = ? WHERE thread_id = ?",
                    (version, generation, now, owner, expires, now, base, oldest, thread_id),
                )
        return Version(version, key)

    async def arestore(
        self,
        thread_id: str,
        version: int | None,
        *,
        expected_version: int,
        empty: AgentState | None = None,
    ) -> int:
        check_restore(thread_id, version, empty)
        blank = (
            None
            if empty is None
            else (encode_header(empty, thread_id, listed=True), *checkpoint_fields(empty))
        )
        async with self._transaction(write=True) as conn:
            thread = await self._fetchone(
                conn,
                "SELECT version, generation, lease_owner, lease_expires, oldest_generation, "
                "thread_key FROM tx_threads WHERE thread_id = ?",
                (thread_id,),
            )
            if thread is None:
                raise no_thread_error(thread_id)
            now = time.time()
            holder = _live_holder(thread[2], thread[3], now)
            if holder is not None:
                raise busy_error(thread_id, holder, thread[3] - now)
            if int(thread[0]) != expected_version:
                raise stale_error(thread_id, expected_version, int(thread[0]))
            key = int(thread[5])
            copied = await self._restored(conn, thread_id, key, version, int(thread[0]), thread[4])
            if copied is None:
                assert blank is not None
                copied = (*blank, 0, 0)
            header, step, status, node, start, count = copied
            last = await self._fetchone(
                conn, "SELECT MAX(seq) FROM tx_messages WHERE thread_key = ?", (key,)
            )
            base = 0 if last is None or last[0] is None else int(last[0]) + 1
            await conn.execute(
                "INSERT INTO tx_messages (thread_key, seq, message_id, body) "
                "SELECT thread_key, seq - ? + ?, message_id, body FROM tx_messages "
                "WHERE thread_key = ? AND seq >= ? AND seq < ?",
                (start, base, key, start, start + count),
            )
            restored, generation = int(thread[0]) + 1, int(thread[1]) + 1
            await conn.execute(
                "INSERT INTO tx_checkpoints (thread_key, version, header, message_count, "
                "generation, log_start, step, status, node, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key, restored, header, count, generation, base, step, status, node, now),
            )
            await conn.execute(
                "UPDATE tx_threads SET version = ?, generation = ?, updated_at = ?, "
                "lease_owner = NULL, lease_expires = NULL, log_start = ? WHERE thread_id = ?",
                (restored, generation, now, base, thread_id),
            )
        return restored

    async def _new_key(self, conn: aiosqlite.Connection) -> int:
        """The key of a thread created in this write transaction: one more than the last one
        given, never one a deleted thread had (a lazy history of that thread tells the new
        one by it)."""
        row = await self._fetchone(
            conn, "UPDATE tx_thread_keys SET last = last + 1 RETURNING last", ()
        )
        assert row is not None  # the table's one row, made with it
        return int(row[0])

    async def _restored(
        self,
        conn: aiosqlite.Connection,
        thread_id: str,
        key: int,
        version: int | None,
        latest: int,
        oldest: int,
    ) -> tuple[str, int, str, str | None, int, int] | None:
        """What a restore copies of `version`: its header, step, status, node, and where its
        messages are (their first seq, their count); None for `version=None`."""
        if version is None:
            return None
        columns = "header, step, status, node, log_start, message_count"
        saved = await self._version_row(conn, thread_id, key, version, latest, oldest, columns)
        return str(saved[0]), int(saved[1]), str(saved[2]), saved[3], int(saved[4]), int(saved[5])

    async def _version_row(
        self,
        conn: aiosqlite.Connection,
        thread_id: str,
        key: int,
        version: int,
        latest: int,
        oldest: int,
        columns: str,
    ) -> sqlite3.Row:
        """`columns` of a stored version's checkpoint row (the thread's `key`); an error naming
        the version when it is not stored or a rewrite retired it (its generation older than
        `oldest`)."""
        saved = await self._fetchone(
            conn,
            f"SELECT {columns}, generation FROM tx_checkpoints "
            "WHERE thread_key = ? AND version = ?",
            (key, version),
        )
        if saved is None:
            raise missing_version_error(thread_id, version, latest)
        if int(saved[-1]) < oldest:
            raise rewritten_version_error(thread_id, version)
        return saved

    # -- leases ----------------------------------------------------------------------------

    async def arenew_lease(self, thread_id: str, lease: Lease) -> bool:
        async with self._connected() as conn:
            now = time.time()
            cursor = await conn.execute(
                "UPDATE tx_threads SET lease_expires = ?, lease_heartbeat = ? "
                "WHERE thread_id = ? AND lease_owner = ?",
                (now + lease.ttl, now, thread_id, lease.owner),
            )
            renewed = cursor.rowcount == 1
            await cursor.close()
        return renewed

    async def arelease_lease(self, thread_id: str, owner: str) -> None:
        async with self._connected() as conn:
            await conn.execute(
                "UPDATE tx_threads SET lease_owner = NULL, lease_expires = NULL "
                "WHERE thread_id = ? AND lease_owner = ?",
                (thread_id, owner),
            )

    async def alease_holder(self, thread_id: str) -> LeaseHolder | None:
        async with self._connected() as conn:
            row = await self._fetchone(
                conn,
                "SELECT lease_owner, lease_expires FROM tx_threads WHERE thread_id = ?",
                (thread_id,),
            )
        now = time.time()
        owner = None if row is None else _live_holder(row[0], row[1], now)
        if row is None or owner is None:
            return None
        return LeaseHolder(owner, float(row[1]) - now)

    async def ahistory(self, thread_id: str, *, limit: int | None = None) -> list[CheckpointInfo]:
        async with self._connected() as conn:
            rows = await self._fetchall(
                conn,
                "SELECT version, step, status, node, message_count, created_at "
                f"FROM tx_checkpoints WHERE thread_key = {_KEY} ORDER BY version DESC LIMIT ?",
                (thread_id, -1 if limit is None else max(limit, 0)),
            )
        return [
            CheckpointInfo(thread_id, int(r[0]), int(r[1]), str(r[2]), r[3], int(r[4]), r[5])
            for r in rows
        ]

    async def adelete_thread(self, thread_id: str) -> bool:
        async with self._transaction(write=True) as conn:
            for table in ("tx_checkpoints", "tx_messages"):  # keyed by the thread's key
                await conn.execute(f"DELETE FROM {table} WHERE thread_key = {_KEY}", (thread_id,))
            cursor = await conn.execute("DELETE FROM tx_threads WHERE thread_id = ?", (thread_id,))
            existed = cursor.rowcount > 0
            await cursor.close()
            for table in ("tx_tool_results", "tx_stop_requests"):  # by its id
                await conn.execute(f"DELETE FROM {table} WHERE thread_id = ?", (thread_id,))
        return existed

    async def alist_threads(self, *, offset: int = 0, limit: int | None = None) -> list[str]:
        offset, limit = check_offset_and_limit(offset, limit)
        async with self._connected() as conn:
            rows = await self._fetchall(
                conn,
                "SELECT thread_id FROM tx_threads ORDER BY created_at, thread_id LIMIT ? OFFSET ?",
                (-1 if limit is None else limit, offset),
            )
        return [str(r[0]) for r in rows]

    async def alist_thread_page(
        self, *, after: str | None = None, limit: int = DEFAULT_PAGE_SIZE
    ) -> ThreadPage:
        limit = check_page_limit(limit)
        params: tuple[Any, ...] = (limit + 1,)  # one more: is there a next page?
        where = ""
        if after is not None:
            params = (*decode_cursor(after), *params)
            where = "WHERE (t.created_at, t.thread_id) > (?, ?) "
        async with self._connected() as conn:
            rows = await self._fetchall(conn, _LIST_PAGE.format(where=where), params)
        return thread_page(rows, limit)

    # -- tool ledger -----------------------------------------------------------------------

    async def aput_tool_result(
        self, thread_id: str, message_id: str, call_id: str, result: dict[str, Any]
    ) -> bool:
        encoded = encode_tool_result(result)
        async with self._connected() as conn:
            cursor = await conn.execute(
                "INSERT INTO tx_tool_results (thread_id, message_id, call_id, result, created_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (thread_id, message_id, call_id, encoded, time.time()),
            )
            inserted = cursor.rowcount == 1
            await cursor.close()
        return inserted

    async def aget_tool_result(
        self, thread_id: str, message_id: str, call_id: str
    ) -> dict[str, Any] | None:
        async with self._connected() as conn:
            row = await self._fetchone(
                conn,
                "SELECT result FROM tx_tool_results "
                "WHERE thread_id = ? AND message_id = ? AND call_id = ?",
                (thread_id, message_id, call_id),
            )
        return None if row is None else decode_tool_result(thread_id, message_id, call_id, row[0])

    # -- stop requests ---------------------------------------------------------------------

    async def arequest_stop(self, thread_id: str) -> None:
        async with self._connected() as conn:
            await conn.execute(
                "INSERT INTO tx_stop_requests (thread_id, created_at) VALUES (?, ?) "
                "ON CONFLICT DO NOTHING",
                (thread_id, time.time()),
            )

    async def ais_stop_requested(self, thread_id: str) -> bool:
        async with self._connected() as conn:
            row = await self._fetchone(
                conn, "SELECT 1 FROM tx_stop_requests WHERE thread_id = ?", (thread_id,)
            )
        return row is not None

    async def aclear_stop_request(self, thread_id: str) -> None:
        async with self._connected() as conn:
            await conn.execute("DELETE FROM tx_stop_requests WHERE thread_id = ?", (thread_id,))


def _stop_unawaited(conn: aiosqlite.Connection) -> None:
    """Close `conn` and end its worker thread, awaiting nothing. Asked from a thread without
    an event loop, so that the worker reports its end to no loop (from a loop's thread it
    would report to that loop, which may be closed by then)."""
    threading.Thread(target=conn.stop, name="tenxgraph-sqlite-stop", daemon=True).start()


# one page of threads, each with its latest checkpoint: a seek on tx_threads_created, then a
# primary key lookup per thread
_LIST_PAGE = (
    "SELECT t.thread_id, t.version, t.created_at, c.created_at, c.step, c.status, c.node, "
    "c.message_count FROM tx_threads AS t LEFT JOIN tx_checkpoints AS c "
    "ON c.thread_key = t.thread_key AND c.version = t.version "
    "{where}ORDER BY t.created_at, t.thread_id LIMIT ?"
)


def _live_holder(owner: Any, expires: Any, now: float) -> str | None:
    """The owner of a thread row's live lease (its lease_owner and lease_expires), if any."""
    return None if owner is None or expires is None or expires <= now else str(owner)


__all__ = ["DEFAULT_DB_PATH", "MIGRATIONS", "SqliteCheckpointer"]
