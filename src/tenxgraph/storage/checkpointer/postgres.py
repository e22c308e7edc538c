"""`PgCheckpointer`: threads in PostgreSQL, shared by many processes on many hosts.

A save is one statement, so one round trip and one transaction (`_pg_save`), led by the
compare-and-swap on the thread's version (`UPDATE ... WHERE version = expected`, or `INSERT ...
ON CONFLICT DO NOTHING` for a new thread). Two writers racing on one thread serialise on that
row: the first commits, the second then finds the version changed, gets `StaleStateError` and
writes nothing. A concurrent run therefore fails fast with a clear error; it never waits for
the other run to finish.

asyncpg is imported on first use: `pip install 'tenxgraph[postgres]'`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, TypeVar

from tenxgraph.core.exceptions import TransientStorageError
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer._codec import stored_text
from tenxgraph.storage.checkpointer._express import PriorityGate
from tenxgraph.storage.checkpointer._listing import (
    DEFAULT_PAGE_SIZE,
    check_offset_and_limit,
    check_page_limit,
    decode_cursor,
)
from tenxgraph.storage.checkpointer._pg_pools import (
    Connection,
    Pool,
    advisory_key,
    check_schema,
    dsn_pools,
    is_transient,
    load_asyncpg,
    noop,
    retrying,
)
from tenxgraph.storage.checkpointer._pg_save import NOW, save_statement
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

T = TypeVar("T")

_BACKOFF_SECONDS = 0.05


def _schema_v1(s: str) -> tuple[str, ...]:
    return (
        f"""CREATE TABLE IF NOT EXISTS {s}.tx_threads (
            thread_id TEXT PRIMARY KEY,
            version BIGINT NOT NULL,
            generation BIGINT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL)""",
        f"CREATE INDEX IF NOT EXISTS tx_threads_created ON {s}.tx_threads (created_at, thread_id)",
        f"""CREATE TABLE IF NOT EXISTS {s}.tx_checkpoints (
            thread_id TEXT NOT NULL,
            version BIGINT NOT NULL,
            header TEXT NOT NULL,
            message_count BIGINT NOT NULL,
            generation BIGINT NOT NULL,
            step BIGINT NOT NULL,
            status TEXT NOT NULL,
            node TEXT,
            created_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (thread_id, version))""",
        f"""CREATE TABLE IF NOT EXISTS {s}.tx_messages (
            thread_id TEXT NOT NULL,
            seq BIGINT NOT NULL,
            message_id TEXT NOT NULL,
            body TEXT NOT NULL,
            PRIMARY KEY (thread_id, seq))""",
        f"""CREATE TABLE IF NOT EXISTS {s}.tx_tool_results (
            thread_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            result TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (thread_id, message_id, call_id))""",
        f"""CREATE TABLE IF NOT EXISTS {s}.tx_stop_requests (
            thread_id TEXT PRIMARY KEY,
            created_at DOUBLE PRECISION NOT NULL)""",
    )


def _leases_v2(s: str) -> tuple[str, ...]:
    """Each thread's lease: the run that owns it, until when, and its last heartbeat."""
    return (
        f"""ALTER TABLE {s}.tx_threads
            ADD COLUMN IF NOT EXISTS lease_owner TEXT,
            ADD COLUMN IF NOT EXISTS lease_expires DOUBLE PRECISION,
            ADD COLUMN IF NOT EXISTS lease_heartbeat DOUBLE PRECISION""",
    )


def _message_ids_v3(s: str) -> tuple[str, ...]:
    """Messages found by id, and system messages, without reading the thread's history (a lazy
    history's merge, a turn sent again, a context manager keeping system messages)."""
    return (
        f"CREATE INDEX IF NOT EXISTS tx_messages_ids ON {s}.tx_messages (thread_id, message_id)",
        f"CREATE INDEX IF NOT EXISTS tx_messages_system ON {s}.tx_messages (thread_id, seq) "
        f"WHERE strpos(body, '{SYSTEM_MARK}') > 0",
    )


def _restores_v4(s: str) -> tuple[str, ...]:
    """Restores (`arestore`) append a copy of an earlier version's messages, so a version's
    messages start at its `log_start` in the thread's log; versions of generations from
    before the last rewrite (`oldest_generation`) cannot load, the later ones can."""
    return (
        f"""ALTER TABLE {s}.tx_threads
            ADD COLUMN IF NOT EXISTS log_start BIGINT NOT NULL DEFAULT 0,
            ADD COLUMN IF NOT EXISTS oldest_generation BIGINT NOT NULL DEFAULT 0""",
        f"UPDATE {s}.tx_threads SET oldest_generation = generation",
        f"ALTER TABLE {s}.tx_checkpoints ADD COLUMN IF NOT EXISTS log_start BIGINT NOT NULL "
        "DEFAULT 0",
    )


def _compact_rows_v5(s: str) -> tuple[str, ...]:
    """A message row leaves out its message's id when its id column holds it (a text id JSON
    writes as it is), and a checkpoint's header the step, status and node of its columns
    (`encode_message(..., id_column=True)`, `encode_header(..., listed=True)`); reading puts
    them back and still reads the rows written before (the version tells an older tenxgraph
    not to read rows it would get wrong). Messages are found by id through an index of the
    ids' 8-byte hashes (`_IDS_IN_LOG`) instead of the ids themselves, and the keys that only grow
    within a thread fill their index pages."""
    return (
        f"CREATE INDEX IF NOT EXISTS tx_messages_id_hashes ON {s}.tx_messages "
        "(thread_id, hashtextextended(message_id, 0))",
        f"DROP INDEX IF EXISTS {s}.tx_messages_ids",
        f"ALTER INDEX {s}.tx_messages_pkey SET (fillfactor = 100)",
        f"ALTER INDEX {s}.tx_checkpoints_pkey SET (fillfactor = 100)",
    )


def _thread_keys_v6(s: str) -> tuple[str, ...]:
    """Messages and checkpoints name their thread by a small integer key, kept once in its
    `tx_threads` row (`thread_key`), instead of repeating the text thread id (often a
    36-character UUID) in every row and every index entry. Both tables are rebuilt: their
    rows copied with their thread's key (8-byte columns first: no padding between them), in
    key order, then their indexes built over the full tables. A checkpoint row's counters
    (version, message count, generation, log start, step) become 4-byte integers: 20 bytes
    less a version, and the rebuild costs nothing more for it. Rows of a thread that has no
    `tx_threads` row are dropped: no call could read them (every read starts at the thread's
    row). The tool ledger and the stop requests stay keyed by the thread id: they are written
    for threads that may have no row yet."""
    keyed = f"{s}.tx_threads t ON t.thread_id = old.thread_id"
    return (
        f"ALTER TABLE {s}.tx_threads ADD COLUMN IF NOT EXISTS thread_key BIGINT "
        "GENERATED BY DEFAULT AS IDENTITY",
        f"CREATE UNIQUE INDEX IF NOT EXISTS tx_threads_key ON {s}.tx_threads (thread_key)",
        f"""CREATE TABLE {s}.tx_messages_v6 (
            thread_key BIGINT NOT NULL,
            seq BIGINT NOT NULL,
            message_id TEXT NOT NULL,
            body TEXT NOT NULL)""",
        f"INSERT INTO {s}.tx_messages_v6 (thread_key, seq, message_id, body) "
        f"SELECT t.thread_key, old.seq, old.message_id, old.body FROM {s}.tx_messages old "
        f"JOIN {keyed} ORDER BY t.thread_key, old.seq",
        f"DROP TABLE {s}.tx_messages",
        f"ALTER TABLE {s}.tx_messages_v6 RENAME TO tx_messages",
        f"ALTER TABLE {s}.tx_messages ADD CONSTRAINT tx_messages_pkey "
        "PRIMARY KEY (thread_key, seq) WITH (fillfactor = 100)",
        f"CREATE INDEX tx_messages_id_hashes ON {s}.tx_messages "
        "(thread_key, hashtextextended(message_id, 0))",
        f"CREATE INDEX tx_messages_system ON {s}.tx_messages (thread_key, seq) "
        f"WHERE strpos(body, '{SYSTEM_MARK}') > 0",
        f"""CREATE TABLE {s}.tx_checkpoints_v6 (
            thread_key BIGINT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            version INTEGER NOT NULL,
            message_count INTEGER NOT NULL,
            generation INTEGER NOT NULL,
            log_start INTEGER NOT NULL DEFAULT 0,
            step INTEGER NOT NULL,
            header TEXT NOT NULL,
            status TEXT NOT NULL,
            node TEXT)""",
        f"INSERT INTO {s}.tx_checkpoints_v6 (thread_key, version, message_count, generation, "
        "log_start, step, created_at, header, status, node) "
        "SELECT t.thread_key, old.version, old.message_count, old.generation, old.log_start, "
        f"old.step, old.created_at, old.header, old.status, old.node FROM {s}.tx_checkpoints old "
        f"JOIN {keyed} ORDER BY t.thread_key, old.version",
        f"DROP TABLE {s}.tx_checkpoints",
        f"ALTER TABLE {s}.tx_checkpoints_v6 RENAME TO tx_checkpoints",
        f"ALTER TABLE {s}.tx_checkpoints ADD CONSTRAINT tx_checkpoints_pkey "
        "PRIMARY KEY (thread_key, version) WITH (fillfactor = 100)",
    )


# what tx_messages_id_hashes indexes a message by: one 8-byte hash of its id (`pg_id`, the
# hex of its kept bytes) and its thread's key, the key its seed. An entry of one 8-byte column is
# 20 B with its line pointer, 28 B with the key in a column of its own; the query checks the
# key and the id themselves too. (Ids go to and from the server as that hex text: asyncpg
# knows no codec for an array of bytea, and would ask the server about it on every new
# connection, 5 round trips more.)
_ID_HASH = "hashtextextended({hex}, {key})"
_STORED_HEX = "encode({id}, 'hex')"


def _byte_ids_v7(s: str) -> tuple[str, ...]:
    """Message ids are kept as bytes (`pg_id`): the 32 hex digits of the ids tenxgraph makes
    as their 16 bytes, half of their text (17 B a row instead of 33, as SQLite keeps them
    since version 5). The column is rewritten in place; its index is made again, over one
    hash of the id's bytes seeded by the thread's key (`_ID_HASH`). The unique index on
    the threads' keys goes: an identity column's sequence gives them, never one twice
    (SQLite's version 7 makes its keys so), and nothing finds a thread by its key."""
    return (
        f"DROP INDEX IF EXISTS {s}.tx_messages_id_hashes",
        f"ALTER TABLE {s}.tx_messages ALTER COLUMN message_id TYPE BYTEA USING "
        "CASE WHEN message_id ~ '^[0-9a-f]{32}$' THEN decode(message_id, 'hex') "
        "WHEN octet_length(message_id) = 16 THEN convert_to(message_id, 'UTF8') || '\\xff'::bytea "
        "ELSE convert_to(message_id, 'UTF8') END",
        f"CREATE INDEX tx_messages_id_hashes ON {s}.tx_messages "
        f"(({_ID_HASH.format(hex=_STORED_HEX.format(id='message_id'), key='thread_key')}))",
        f"DROP INDEX IF EXISTS {s}.tx_threads_key",
    )


# the rows of message `m` of the thread of key `{key}` whose id is in the text array `{ids}`
# (of `pg_id`s) and whose position is in the log's bounds (`{low}` to `{high}`), found
# by the ids' hash index. The key and the bounds are written so that the planner cannot use
# them on the primary key (thread, seq): without statistics (a table just filled) it took
# that index for them and read every row of the thread (40 ms at 50,000 messages) instead of
# finding the few ids through theirs
_M_HEX = _STORED_HEX.format(id="m.message_id")
_IDS_IN_LOG = (
    _ID_HASH.format(hex=_M_HEX, key="m.thread_key")
    + " = ANY(ARRAY(SELECT "
    + _ID_HASH.format(hex="i", key="{key}")
    + " FROM unnest({ids}::text[]) AS i)) AND m.thread_key + 0 = {key} "
    f"AND {_M_HEX} = ANY({{ids}}::text[]) AND m.seq + 0 >= {{low}} AND m.seq + 0 < {{high}}"
)


#: version -> function(quoted schema) giving the statements that take a database from
#: version-1 to version. Add new versions here (and bump `SCHEMA_VERSION`); they run in one
#: transaction under the schema advisory lock, together with the version update.
MIGRATIONS: dict[int, Callable[[str], Sequence[str]]] = {
    1: _schema_v1,
    2: _leases_v2,
    3: _message_ids_v3,
    4: _restores_v4,
    5: _compact_rows_v5,
    6: _thread_keys_v6,
    7: _byte_ids_v7,
}


# a message row's JSON with its id put back (rows leave a text id out: its column holds its
# bytes, whose hex `pg_id` gives)
_ID_TEXT = (
    "CASE length({a}message_id) WHEN 16 THEN encode({a}message_id, 'hex') "
    "WHEN 17 THEN convert_from(CASE WHEN get_byte({a}message_id, 16) = 255 "
    "THEN substring({a}message_id FROM 1 FOR 16) ELSE {a}message_id END, 'UTF8') "
    "ELSE convert_from({a}message_id, 'UTF8') END"
)
_BODY, _BODY_M = body_with_id("", _ID_TEXT), body_with_id("m.", _ID_TEXT)


def pg_id(message_id: str) -> str:
    """A message's id as tx_messages keeps it (schema 7), in hex, the form the statements take
    and give ids in: 32 lowercase hex digits are kept as their 16 bytes; any other id as its
    UTF-8, with a 0xFF byte after it when that is 16 bytes too (no UTF-8 has that byte, and
    only these are 17 bytes ending in it), so that no two ids are kept alike."""
    if HEX_ID.fullmatch(message_id):
        return message_id
    encoded = message_id.encode()
    return (encoded + b"\xff" if len(encoded) == 16 else encoded).hex()


def pg_id_text(stored: str) -> str:
    """The id `pg_id` gave as `stored`."""
    kept = bytes.fromhex(stored)
    if len(kept) == 16:
        return stored
    if len(kept) == 17 and kept[16] == 0xFF:
        kept = kept[:16]
    return kept.decode()


class _CommitOutcomeUnknown(Exception):
    """The connection broke while a save was in flight: it may or may not have landed."""


class PgCheckpointer(BaseCheckpointer):
    """Threads in PostgreSQL tables `tx_*` of `schema` (created on first use).

    Pass either a `dsn` (the checkpointer then owns its pools: one per event loop that uses
    it, `min_size`..`max_size` connections each, closed by `aclose()` or when that loop shuts
    down, as at the end of `asyncio.run()`) or a `pool` you created (used only on the event
    loop it belongs to, never closed by `aclose()`).

    Lost connections are retried `retries` times with exponential backoff, for reads and for
    saves: a save that did not land is safe to repeat (the version CAS prevents double
    writes). If the connection breaks while a save's statement is in flight, the thread is
    re-read: our checkpoint present means success, the version unchanged means the save is
    repeated.

    Safe for any number of processes and hosts. Within a process, one instance may be shared
    by tasks and by several event loops (e.g. a private loop thread and the caller's loop).
    """

    lease_clears_stop_requests = True  # the save's statement does it (`_pg_save`)

    def __init__(
        self,
        dsn: str | None = None,
        *,
        pool: Pool | None = None,
        schema: str = "public",
        min_size: int = 1,
        max_size: int = 10,
        retries: int = 3,
        lease_ttl: float = DEFAULT_LEASE_TTL,
    ) -> None:
        super().__init__()
        self.lease_ttl = check_ttl(lease_ttl)
        if (dsn is None) == (pool is None):
            raise ValueError("PgCheckpointer needs exactly one of dsn=... or pool=...")
        check_schema(schema)
        if retries < 0:
            raise ValueError("retries must be >= 0")
        load_asyncpg("PgCheckpointer")  # fail here, with the install hint, not on first use
        self._external_pool = pool
        self._dsn = dsn  # for the default media store (`storage.media.defaults`)
        self.schema = schema
        self._s = f'"{schema}"'
        # SQL for the key of thread $1, read in the statement that uses it: the thread's row
        # is the only truth (another process may delete the thread and make it anew)
        self._key = f"(SELECT thread_key FROM {self._s}.tx_threads WHERE thread_id = $1)"
        self._max_size = max_size
        self._retries = retries
        self._pools = dsn_pools(dsn, min_size, max_size, "PgCheckpointer")
        # per loop: turns on the pool's connections, a stopping run's calls first
        self._gates: dict[asyncio.AbstractEventLoop, PriorityGate] = {}
        self._guard = threading.Lock()
        self._schema_ready = False
        self._lock_key = advisory_key(f"tenxgraph-schema:{schema}")

    def __repr__(self) -> str:
        return f"PgCheckpointer(schema={self.schema!r})"

    # -- pools and retries -----------------------------------------------------------------

    async def _pool(self) -> Pool | None:
        """The pool to use on this loop (None: this loop's pool is closed as the loop ends;
        then each call gets a connection of its own), with the schema checked once."""
        pool = self._external_pool
        if pool is None:
            pool = await self._pools.get()
        if not self._schema_ready:
            async with self._pools.connection(pool) as conn:
                await self._ensure_schema(conn)
            self._schema_ready = True
        return pool

    def _gate(self) -> PriorityGate:
        loop = asyncio.get_running_loop()
        gate = self._gates.get(loop)
        if gate is None:
            pool = self._external_pool
            gate = PriorityGate(self._max_size if pool is None else pool.get_max_size())
            with self._guard:
                for other in [lp for lp in self._gates if lp.is_closed()]:
                    del self._gates[other]
                gate = self._gates.setdefault(loop, gate)
        return gate

    async def _run(self, operation: Callable[[Connection], Awaitable[T]]) -> T:
        """Run `operation` on a pooled connection, retrying transient failures."""

        async def once() -> T:
            pool = await self._pool()
            async with self._gate().turn(), self._pools.connection(pool) as conn:
                return await operation(conn)

        return await retrying(once, self._retries, _BACKOFF_SECONDS, "PostgreSQL checkpointer")

    async def _ensure_schema(self, conn: Connection) -> None:
        if await self._schema_version(conn) == SCHEMA_VERSION:
            return
        async with conn.transaction():
            # many processes may start at once: one creates or migrates, the others wait here
            await conn.execute("SELECT pg_advisory_xact_lock($1)", self._lock_key)
            exists = await conn.fetchval(
                "SELECT 1 FROM pg_namespace WHERE nspname = $1", self.schema
            )
            if not exists:
                await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self._s}")
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self._s}.tx_schema_version (version INTEGER)"
            )
            found = await conn.fetchval(f"SELECT MAX(version) FROM {self._s}.tx_schema_version")
            found = 0 if found is None else int(found)
            if found > SCHEMA_VERSION:
                raise schema_too_new_error(f"PostgreSQL schema {self.schema!r}", found)
            for target in range(found + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[target](self._s):
                    await conn.execute(statement)
            if found < SCHEMA_VERSION:
                await conn.execute(f"DELETE FROM {self._s}.tx_schema_version")
                await conn.execute(
                    f"INSERT INTO {self._s}.tx_schema_version (version) VALUES ($1)",
                    SCHEMA_VERSION,
                )

    async def _schema_version(self, conn: Connection) -> int | None:
        table = await conn.fetchval("SELECT to_regclass($1)", f"{self._s}.tx_schema_version")
        if table is None:
            return None
        found = await conn.fetchval(f"SELECT MAX(version) FROM {self._s}.tx_schema_version")
        return None if found is None else int(found)

    # -- lifecycle -------------------------------------------------------------------------

    async def asetup(self) -> None:
        """Create the pool (when owned) and create or check the schema. Safe to repeat."""
        await self._run(noop)

    async def aclose(self) -> None:
        """Close the pools this checkpointer created; a pool passed in is left open. (An
        owned pool is also closed when the event loop that made it shuts down.)"""
        await self._pools.aclose()

    # -- threads ---------------------------------------------------------------------------

    async def aversion(self, thread_id: str) -> int | None:
        async def read(conn: Connection) -> int | None:
            found = await conn.fetchrow(
                f"SELECT version, thread_key FROM {self._s}.tx_threads WHERE thread_id = $1",
                thread_id,
            )
            return None if found is None else Version(found[0], found[1])

        return await self._run(read)

    async def aload(
        self, thread_id: str, state_type: type[S], version: int | None = None
    ) -> ThreadSnapshot[S] | None:
        async def read(conn: Connection) -> tuple[int, Any, list[Any]] | None:
            # REPEATABLE READ: header and messages come from one snapshot
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                thread = await conn.fetchrow(
                    f"SELECT version, oldest_generation, thread_key FROM {self._s}.tx_threads "
                    "WHERE thread_id = $1",
                    thread_id,
                )
                if thread is None:
                    return None
                latest = int(thread["version"])
                wanted = Version(latest if version is None else version, thread["thread_key"])
                columns = "header, message_count, log_start, step, status, node"
                saved = await self._version_row(conn, thread_id, wanted, thread, columns)
                count = int(saved["message_count"])
                rows = await conn.fetch(
                    f"SELECT {_BODY} AS body FROM {self._s}.tx_messages "
                    f"WHERE thread_key = {self._key} AND seq >= $2 ORDER BY seq LIMIT $3",
                    thread_id,
                    saved["log_start"],
                    count,
                )
                if len(rows) != count:
                    raise missing_messages_error(thread_id, count, len(rows))
                return wanted, saved, [row["body"] for row in rows]

        found = await self._run(read)
        if found is None:
            return None
        wanted, saved, raw_bodies = found
        header = stored_text(thread_id, "header", saved["header"])
        listed = (saved["step"], saved["status"], saved["node"])
        bodies = [stored_text(thread_id, f"context.{i}", b) for i, b in enumerate(raw_bodies)]
        state = decode_state(state_type, thread_id, header, bodies, listed=listed)
        return ThreadSnapshot(thread_id, wanted, state)

    async def aload_recent(
        self,
        thread_id: str,
        state_type: type[S],
        keep: int,
        look_up: Collection[str | int] = (),
    ) -> ThreadSnapshot[S] | None:
        # one statement (one snapshot, one round trip): the head, its header, its last rows,
        # and which of the ids to look up its log holds
        wanted = sorted({pg_id(str(i)) for i in look_up})
        found = await self._run(
            lambda conn: conn.fetchrow(
                "SELECT t.version, t.generation, t.thread_key, c.header, c.message_count, c.step, "
                "c.status, c.node, c.generation AS saved_generation, ARRAY("
                f"SELECT {_BODY_M} FROM {self._s}.tx_messages m "
                "WHERE m.thread_key = t.thread_key "
                "AND m.seq >= c.log_start + GREATEST(c.message_count - $2, 0) "
                "AND m.seq < c.log_start + c.message_count ORDER BY m.seq"
                ") AS bodies, ARRAY("
                f"SELECT {_M_HEX} FROM {self._s}.tx_messages m WHERE "
                + _IDS_IN_LOG.format(
                    key="t.thread_key",
                    ids="$3",
                    low="c.log_start",
                    high="c.log_start + c.message_count",
                )
                + f") AS found_ids FROM {self._s}.tx_threads t JOIN {self._s}.tx_checkpoints c "
                "ON c.thread_key = t.thread_key AND c.version = t.version WHERE t.thread_id = $1",
                thread_id,
                max(keep, 0),
                wanted,
            )
        )
        if found is None:
            return None
        version, generation = int(found["version"]), int(found["generation"])
        if found["saved_generation"] != generation:
            raise rewritten_version_error(thread_id, version)
        count = int(found["message_count"])
        start = max(count - max(keep, 0), 0)
        bodies = log_bodies(thread_id, found["bodies"], start, count)
        header = stored_text(thread_id, "header", found["header"])
        listed = (found["step"], found["status"], found["node"])
        known = (list(look_up), {pg_id_text(i) for i in found["found_ids"]})
        state = recent_state(
            self,
            state_type,
            thread_id,
            header,
            bodies,
            generation,
            count,
            known,
            listed,
            int(found["thread_key"]),
        )
        return ThreadSnapshot(thread_id, Version(version, found["thread_key"]), state)

    async def _log_array(
        self,
        thread_id: str,
        generation: int,
        incarnation: int | None,
        select: str,
        *params: Any,
    ) -> list[Any]:
        """What `select` (one column of the thread's log: `t.thread_key` its key,
        `t.log_start` the seq of its first message) finds, if the log is still the one of
        `generation` and the thread the one of key `incarnation` (else
        `changed_history_error`): one statement."""
        found = await self._run(
            lambda conn: conn.fetchrow(
                f"SELECT t.generation, t.thread_key, ARRAY({select}) AS found "
                f"FROM {self._s}.tx_threads t WHERE t.thread_id = $1",
                thread_id,
                *params,
            )
        )
        if found is None or not same_log(
            found["generation"], found["thread_key"], generation, incarnation
        ):
            raise changed_history_error(thread_id)
        return list(found["found"])

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
        raw = await self._log_array(
            thread_id,
            generation,
            incarnation,
            f"SELECT {_BODY_M} FROM {self._s}.tx_messages m WHERE m.thread_key = t.thread_key "
            "AND m.seq >= t.log_start + $2 AND m.seq < t.log_start + $3 ORDER BY m.seq",
            start,
            stop,
        )
        bodies = log_bodies(thread_id, raw, start, stop)
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
        found = await self._log_array(
            thread_id,
            generation,
            incarnation,
            f"SELECT {_M_HEX} FROM {self._s}.tx_messages m WHERE "
            + _IDS_IN_LOG.format(
                key="t.thread_key", ids="$2", low="t.log_start", high="t.log_start + $3"
            ),
            sorted({pg_id(str(i)) for i in ids}),
            below,
        )
        return {pg_id_text(i) for i in found}

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
        found = await self._log_array(
            thread_id,
            generation,
            incarnation,
            f"SELECT ROW(m.seq - t.log_start, {_BODY_M}) FROM {self._s}.tx_messages m "
            "WHERE m.thread_key = t.thread_key AND m.seq >= t.log_start + $2 "
            f"AND m.seq < t.log_start + $3 AND strpos(m.body, '{SYSTEM_MARK}') > 0 "
            "ORDER BY m.seq",
            start,
            stop,
        )
        return system_rows(state_type, thread_id, [tuple(row) for row in found])

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
        ids = [pg_id(str(m.message_id)) for m in new_messages]
        bodies = [encode_message(m, id_column=True) for m in new_messages]
        step, status, node = checkpoint_fields(state)
        version = (expected_version or 0) + 1
        mine = None if lease is None else lease.owner  # who may write while the lease is live
        owner = None if release else mine  # who holds the lease after this save
        ttl = 0.0 if lease is None else lease.ttl
        generation = 1 if rewrite else 0
        query = save_statement(self._s, new=expected_version is None, rewrite=rewrite)
        args: tuple[Any, ...]
        if expected_version is None:
            args = (thread_id, generation, time.time(), owner, ttl, ids, bodies, header)
        else:
            args = (thread_id, expected_version, generation, time.time(), owner, ttl, mine)
            args += (ids, bodies, header)
        args += (step, status, node)

        async def write(conn: Connection) -> int:
            try:
                saved = await self._execute_save(conn, query, args)
            except Exception as exc:
                if is_transient(exc):  # it may have landed before the connection broke
                    raise _CommitOutcomeUnknown from exc
                raise
            if saved is None:  # the compare-and-swap matched nothing: nothing was written
                found = await conn.fetchrow(
                    f"SELECT version, lease_owner, lease_expires - {NOW} AS remaining "
                    f"FROM {self._s}.tx_threads WHERE thread_id = $1",
                    thread_id,
                )
                holder = None if found is None else found["lease_owner"]
                if holder is not None and found["remaining"] > 0 and holder != mine:
                    raise busy_error(thread_id, holder, found["remaining"])
                raise stale_error(
                    thread_id, expected_version, None if found is None else found["version"]
                )
            return Version(version, int(saved))

        attempt = 0
        while True:
            try:
                return await self._run(write)
            except _CommitOutcomeUnknown as unknown:
                current, landed_header, landed_ids = await self._run(
                    lambda conn: self._check_landed(conn, thread_id, version, len(ids))
                )
                if (landed_header, landed_ids) == (header, ids):
                    return version  # our save went through
                if current != expected_version:  # another writer got there first
                    raise stale_error(thread_id, expected_version, current) from unknown
                # the version did not move: our save did not land; repeat it
                if attempt >= self._retries:
                    raise TransientStorageError(
                        f"Thread {thread_id!r}: the connection broke while committing version "
                        f"{version} and it did not land after {attempt + 1} attempts; retry",
                        context={"thread_id": thread_id, "version": version},
                    ) from unknown.__cause__
                attempt += 1

    async def arestore(
        self,
        thread_id: str,
        version: int | None,
        *,
        expected_version: int,
        empty: AgentState | None = None,
    ) -> int:
        check_restore(thread_id, version, empty)
        blank = None
        if empty is not None:
            blank = (encode_header(empty, thread_id, listed=True), *checkpoint_fields(empty), 0, 0)
        s = self._s

        async def write(conn: Connection) -> int:
            async with conn.transaction():
                thread = await conn.fetchrow(
                    f"SELECT version, generation, oldest_generation, lease_owner, "
                    f"lease_expires - {NOW} AS remaining FROM {s}.tx_threads "
                    "WHERE thread_id = $1 FOR UPDATE",
                    thread_id,
                )
                if thread is None:
                    raise no_thread_error(thread_id)
                holder, remaining = thread["lease_owner"], thread["remaining"]
                if holder is not None and remaining is not None and remaining > 0:
                    raise busy_error(thread_id, holder, remaining)
                if thread["version"] != expected_version:
                    raise stale_error(thread_id, expected_version, thread["version"])
                copied = blank
                if version is not None:
                    copied = await self._restored(conn, thread_id, version, thread)
                assert copied is not None
                header, step, status, node, start, count = copied
                restored, generation = expected_version + 1, int(thread["generation"]) + 1
                # base: the thread's key, and the seq after its last message
                await conn.execute(
                    "WITH base AS (SELECT t.thread_key, (SELECT COALESCE(MAX(m.seq) + 1, 0) "
                    f"FROM {s}.tx_messages m WHERE m.thread_key = t.thread_key) AS seq "
                    f"FROM {s}.tx_threads t WHERE t.thread_id = $1), "
                    f"copied AS (INSERT INTO {s}.tx_messages (thread_key, seq, message_id, body) "
                    "SELECT base.thread_key, m.seq - $3 + base.seq, m.message_id, m.body "
                    f"FROM {s}.tx_messages m, base WHERE m.thread_key = base.thread_key "
                    "AND m.seq >= $3 AND m.seq < $3 + $4), "
                    f"saved AS (INSERT INTO {s}.tx_checkpoints (thread_key, version, header, "
                    "message_count, generation, log_start, step, status, node, created_at) "
                    f"SELECT base.thread_key, $2, $5, $4, $6, base.seq, $7, $8, $9, {NOW} "
                    "FROM base) "
                    f"UPDATE {s}.tx_threads SET version = $2, generation = $6, "
                    f"updated_at = {NOW}, lease_owner = NULL, lease_expires = NULL, "
                    "log_start = base.seq FROM base WHERE thread_id = $1",
                    thread_id, restored, start, count, header, generation, step, status, node,
                )  # fmt: skip
                return restored

        return await self._run(write)

    async def _restored(
        self, conn: Connection, thread_id: str, version: int, thread: Any
    ) -> tuple[str, int, str, str | None, int, int]:
        """What a restore copies of `version`: its header, step, status, node, and where its
        messages are (their first seq, their count)."""
        columns = "header, step, status, node, log_start, message_count"
        saved = await self._version_row(conn, thread_id, version, thread, columns)
        return (
            str(saved["header"]), int(saved["step"]), str(saved["status"]), saved["node"],
            int(saved["log_start"]), int(saved["message_count"]),
        )  # fmt: skip

    async def _version_row(
        self, conn: Connection, thread_id: str, version: int, thread: Any, columns: str
    ) -> Any:
        """`columns` of a stored version's checkpoint row (`thread`: the thread's row); an
        error naming the version when it is not stored or a rewrite retired it."""
        saved = await conn.fetchrow(
            f"SELECT {columns}, generation FROM {self._s}.tx_checkpoints "
            f"WHERE thread_key = {self._key} AND version = $2",
            thread_id,
            version,
        )
        if saved is None:
            raise missing_version_error(thread_id, version, int(thread["version"]))
        if saved["generation"] < thread["oldest_generation"]:
            raise rewritten_version_error(thread_id, version)
        return saved

    # -- leases ----------------------------------------------------------------------------

    async def arenew_lease(self, thread_id: str, lease: Lease) -> bool:
        async def renew(conn: Connection) -> bool:
            status = await conn.execute(
                f"UPDATE {self._s}.tx_threads SET lease_expires = {NOW} + $3, "
                f"lease_heartbeat = {NOW} WHERE thread_id = $1 AND lease_owner = $2",
                thread_id,
                lease.owner,
                lease.ttl,
            )
            return bool(status == "UPDATE 1")

        return await self._run(renew)

    async def arelease_lease(self, thread_id: str, owner: str) -> None:
        async def release(conn: Connection) -> None:
            await conn.execute(
                f"UPDATE {self._s}.tx_threads SET lease_owner = NULL, lease_expires = NULL "
                "WHERE thread_id = $1 AND lease_owner = $2",
                thread_id,
                owner,
            )

        await self._run(release)

    async def alease_holder(self, thread_id: str) -> LeaseHolder | None:
        async def read(conn: Connection) -> Any:
            return await conn.fetchrow(
                f"SELECT lease_owner, lease_expires - {NOW} AS remaining "
                f"FROM {self._s}.tx_threads WHERE thread_id = $1",
                thread_id,
            )

        row = await self._run(read)
        if row is None or row["lease_owner"] is None or not row["remaining"] > 0:
            return None
        return LeaseHolder(str(row["lease_owner"]), float(row["remaining"]))

    async def _execute_save(self, conn: Connection, query: str, args: Sequence[Any]) -> Any:
        """Run a save's one statement: the thread's key, or None when the compare-and-swap
        matched nothing (a seam for tests that simulate a connection lost at this moment)."""
        return await conn.fetchval(query, *args)

    async def _check_landed(
        self, conn: Connection, thread_id: str, version: int, new_count: int
    ) -> tuple[int | None, str | None, list[str]]:
        """After an unknown COMMIT: the thread's current version, and the header and last
        `new_count` message ids (as `asave` sends them: `pg_id`) of checkpoint `version`
        (None and [] if it does not exist)."""
        current = await conn.fetchval(
            f"SELECT version FROM {self._s}.tx_threads WHERE thread_id = $1", thread_id
        )
        saved = await conn.fetchrow(
            f"SELECT header, message_count + log_start AS message_count "
            f"FROM {self._s}.tx_checkpoints WHERE thread_key = {self._key} AND version = $2",
            thread_id,
            version,
        )
        if saved is None:
            return (None if current is None else int(current), None, [])
        count = int(saved["message_count"])  # the seq after its last message
        rows = await conn.fetch(
            f"SELECT message_id FROM {self._s}.tx_messages WHERE thread_key = {self._key} "
            "AND seq >= $2 AND seq < $3 ORDER BY seq",
            thread_id,
            count - new_count,
            count,
        )
        ids = [bytes(r["message_id"]).hex() for r in rows]
        return (None if current is None else int(current), saved["header"], ids)

    async def ahistory(self, thread_id: str, *, limit: int | None = None) -> list[CheckpointInfo]:
        async def read(conn: Connection) -> list[Any]:
            return list(
                await conn.fetch(
                    "SELECT version, step, status, node, message_count, created_at "
                    f"FROM {self._s}.tx_checkpoints WHERE thread_key = {self._key} "
                    "ORDER BY version DESC LIMIT $2",
                    thread_id,
                    None if limit is None else max(limit, 0),
                )
            )

        return [
            CheckpointInfo(
                thread_id,
                int(r["version"]),
                int(r["step"]),
                str(r["status"]),
                r["node"],
                int(r["message_count"]),
                float(r["created_at"]),
            )
            for r in await self._run(read)
        ]

    async def adelete_thread(self, thread_id: str) -> bool:
        s = self._s
        # the thread's messages and checkpoints by its key, its ledger records and stop
        # requests by its id, then its row. The row is locked first, by a statement of its
        # own: a save in flight then commits before this one starts, and this one's snapshot
        # holds the rows that save added (a single statement would miss them)
        query = (
            f"WITH messages AS (DELETE FROM {s}.tx_messages WHERE thread_key = {self._key}), "
            f"checkpoints AS (DELETE FROM {s}.tx_checkpoints WHERE thread_key = {self._key}), "
            f"results AS (DELETE FROM {s}.tx_tool_results WHERE thread_id = $1), "
            f"stops AS (DELETE FROM {s}.tx_stop_requests WHERE thread_id = $1) "
            f"DELETE FROM {s}.tx_threads WHERE thread_id = $1"
        )

        async def delete(conn: Connection) -> bool:
            async with conn.transaction():
                await conn.execute(
                    f"SELECT 1 FROM {s}.tx_threads WHERE thread_id = $1 FOR UPDATE", thread_id
                )
                result = await conn.execute(query, thread_id)
            return bool(result != "DELETE 0")

        return await self._run(delete)

    async def alist_threads(self, *, offset: int = 0, limit: int | None = None) -> list[str]:
        offset, limit = check_offset_and_limit(offset, limit)

        async def read(conn: Connection) -> list[str]:
            rows = await conn.fetch(
                f"SELECT thread_id FROM {self._s}.tx_threads ORDER BY created_at, thread_id "
                "LIMIT $1 OFFSET $2",
                limit,
                offset,
            )
            return [str(r["thread_id"]) for r in rows]

        return await self._run(read)

    async def alist_thread_page(
        self, *, after: str | None = None, limit: int = DEFAULT_PAGE_SIZE
    ) -> ThreadPage:
        limit = check_page_limit(limit)
        params: tuple[Any, ...] = (limit + 1,)  # one more: is there a next page?
        where = ""
        if after is not None:
            params = (*params, *decode_cursor(after))
            where = "WHERE (created_at, thread_id) > ($2, $3) "
        # the page's threads from a seek on tx_threads_created, then a primary key lookup of
        # each one's latest checkpoint. OFFSET 0 keeps the lookups apart from the join: left
        # to itself, the planner hashes every checkpoint of the table for a page near the end
        query = (
            "SELECT t.thread_id, t.version, t.created_at, c.created_at, c.step, c.status, "
            "c.node, c.message_count "
            f"FROM (SELECT thread_id, thread_key, version, created_at FROM {self._s}.tx_threads "
            f"{where}ORDER BY created_at, thread_id LIMIT $1) AS t "
            "LEFT JOIN LATERAL (SELECT created_at, step, status, node, message_count "
            f"FROM {self._s}.tx_checkpoints "
            "WHERE thread_key = t.thread_key AND version = t.version OFFSET 0) AS c ON true "
            "ORDER BY t.created_at, t.thread_id"
        )

        async def read(conn: Connection) -> list[Any]:
            return list(await conn.fetch(query, *params))

        return thread_page(await self._run(read), limit)

    # -- tool ledger -----------------------------------------------------------------------

    async def aput_tool_result(
        self, thread_id: str, message_id: str, call_id: str, result: dict[str, Any]
    ) -> bool:
        encoded = encode_tool_result(result)

        async def insert(conn: Connection) -> bool:
            status = await conn.execute(
                f"INSERT INTO {self._s}.tx_tool_results "
                "(thread_id, message_id, call_id, result, created_at) "
                "VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                thread_id,
                message_id,
                call_id,
                encoded,
                time.time(),
            )
            return bool(status == "INSERT 0 1")

        return await self._run(insert)

    async def aget_tool_result(
        self, thread_id: str, message_id: str, call_id: str
    ) -> dict[str, Any] | None:
        async def read(conn: Connection) -> Any:
            return await conn.fetchval(
                f"SELECT result FROM {self._s}.tx_tool_results "
                "WHERE thread_id = $1 AND message_id = $2 AND call_id = $3",
                thread_id,
                message_id,
                call_id,
            )

        raw = await self._run(read)
        return None if raw is None else decode_tool_result(thread_id, message_id, call_id, raw)

    # -- stop requests ---------------------------------------------------------------------

    async def arequest_stop(self, thread_id: str) -> None:
        async def insert(conn: Connection) -> None:
            await conn.execute(
                f"INSERT INTO {self._s}.tx_stop_requests (thread_id, created_at) "
                "VALUES ($1, $2) ON CONFLICT DO NOTHING",
                thread_id,
                time.time(),
            )

        await self._run(insert)

    async def ais_stop_requested(self, thread_id: str) -> bool:
        async def read(conn: Connection) -> bool:
            found = await conn.fetchval(
                f"SELECT 1 FROM {self._s}.tx_stop_requests WHERE thread_id = $1", thread_id
            )
            return found is not None

        return await self._run(read)

    async def aclear_stop_request(self, thread_id: str) -> None:
        async def delete(conn: Connection) -> None:
            await conn.execute(
                f"DELETE FROM {self._s}.tx_stop_requests WHERE thread_id = $1", thread_id
            )

        await self._run(delete)


__all__ = ["MIGRATIONS", "PgCheckpointer"]
