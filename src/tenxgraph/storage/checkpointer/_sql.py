"""Pieces shared by the SQL checkpointers (and the SQL stores): schema version, error
messages, stored text and ledger records.

The error messages match `InMemoryCheckpointer` word for word, so a user sees the same text
whichever store a graph runs on.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic_core import to_json

from tenxgraph.core.exceptions import (
    ResourceNotFoundError,
    SchemaVersionError,
    SerializationError,
    StaleStateError,
    StorageError,
    TransientStorageError,
)
from tenxgraph.storage.checkpointer._codec import ROW_ID_PREFIX, stored_text

#: The schema version this tenxgraph writes. Bump it with a new entry in each store's migration
#: table (version -> statements that take a database from version-1 to version).
SCHEMA_VERSION = 7


#: the message ids tenxgraph makes (and UUIDs' hex form): the SQL stores keep these as their
#: 16 bytes (`sqlite.id_key`, `postgres.pg_id`)
HEX_ID = re.compile(r"[0-9a-f]{32}")


def body_with_id(alias: str = "", id_text: str = "{a}message_id") -> str:
    """SQL (SQLite's and PostgreSQL's) for a message row's JSON as `decode_messages` reads
    it: a row written without its message's id (`encode_message(..., id_column=True)`: a text
    row that starts with a key other than the id) gets it back in front, from the row's id
    column; any other value (older rows, ids that are numbers, corrupt values) as stored.
    `alias`: the table's, with its dot; `id_text`: SQL for the id column as text (`{a}` is
    the alias)."""
    body, mid = f"{alias}body", id_text.format(a=alias)
    return (
        f"CASE WHEN substr({body}, 1, 2) = '{{\"' "
        f"AND substr({body}, 1, {len(ROW_ID_PREFIX)}) <> '{ROW_ID_PREFIX}' "
        f"THEN '{ROW_ID_PREFIX}\"' || {mid} || '\",' || substr({body}, 2) ELSE {body} END"
    )


def stale_error(thread_id: str, expected: int | None, found: int | None) -> StaleStateError:
    return StaleStateError(
        f"Thread {thread_id!r} is at version {found}, but this write was based on "
        f"version {expected}: another run changed it. Reload and retry.",
        context={"thread_id": thread_id, "expected": expected, "found": found},
    )


def missing_version_error(thread_id: str, version: int, latest: int) -> ResourceNotFoundError:
    return ResourceNotFoundError(
        f"Thread {thread_id!r} has no version {version} (latest is {latest})",
        context={"thread_id": thread_id, "version": version},
    )


def rewritten_version_error(thread_id: str, version: int) -> StorageError:
    return StorageError(
        f"Thread {thread_id!r}: version {version} predates a rewrite of its "
        "history and can no longer be loaded",
        context={"thread_id": thread_id, "version": version},
    )


def check_restore(thread_id: str, version: int | None, empty: object) -> None:
    """Refuse a restore's arguments that do not name a state."""
    if version is None and empty is None:
        raise ValueError(
            f"Thread {thread_id!r}: restoring the state before the thread's first version "
            "(version=None) needs the empty state to store (empty=...)"
        )


def no_thread_error(thread_id: str) -> ResourceNotFoundError:
    return ResourceNotFoundError(
        f"Thread {thread_id!r} does not exist: there is no state to restore",
        context={"thread_id": thread_id},
    )


def changed_history_error(thread_id: str) -> StorageError:
    """A lazy history's older messages were asked for after its thread was rewritten or
    deleted: what it was loaded from is gone."""
    return StorageError(
        f"Thread {thread_id!r}: its history was rewritten or deleted after this state was "
        "loaded, so its older messages can no longer be read; load the thread again",
        context={"thread_id": thread_id},
    )


def same_log(generation: Any, key: Any, wanted: int, incarnation: int | None) -> bool:
    """Whether a thread row's `generation` and `key` are those a lazy history was read at
    (`wanted`, and `incarnation` unless None): its log is then the one the history has."""
    return int(generation) == wanted and (incarnation is None or int(key) == incarnation)


def schema_too_new_error(where: str, found: int) -> SchemaVersionError:
    return SchemaVersionError(
        f"{where} has checkpoint schema version {found}, but this tenxgraph only understands "
        f"versions up to {SCHEMA_VERSION}: it was written by a newer tenxgraph. Upgrade "
        "tenxgraph (pip install -U tenxgraph) to use it.",
        context={"found": found, "supported": SCHEMA_VERSION},
    )


def missing_messages_error(thread_id: str, expected: int, found: int) -> SerializationError:
    return SerializationError(
        f"Thread {thread_id!r}: the checkpoint lists {expected} messages but only {found} "
        "are stored",
        context={"thread_id": thread_id, "field": "context"},
    )


def log_bodies(thread_id: str, raw: Sequence[object], start: int, stop: int) -> list[str]:
    """The message rows `start` to `stop` of a thread's log as read (`raw`), as JSON text;
    `SerializationError` when rows are missing or one is not text."""
    if len(raw) != stop - start:
        raise missing_messages_error(thread_id, stop, start + len(raw))
    return [stored_text(thread_id, f"context.{start + i}", body) for i, body in enumerate(raw)]


def encode_tool_result(result: dict[str, Any]) -> str:
    """A ledger record as JSON, in one pass (pydantic models in it are dumped on the way)."""
    return to_json(result).decode()


def decode_tool_result(
    thread_id: str, message_id: str, call_id: str, raw: object
) -> dict[str, Any]:
    """A ledger row back as a dict; corrupt or hostile JSON raises `SerializationError`."""
    field = f"tool_result[{message_id!r}, {call_id!r}]"
    text = stored_text(thread_id, field, raw)
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:  # bad JSON, too deep, or an absurd number
        raise SerializationError(
            f"Thread {thread_id!r}: stored {field} is not valid JSON",
            context={"thread_id": thread_id, "field": field},
        ) from exc
    if not isinstance(value, dict):
        raise SerializationError(
            f"Thread {thread_id!r}: stored {field} is not a JSON object",
            context={"thread_id": thread_id, "field": field},
        )
    return value


def sqlite_error(
    exc: sqlite3.Error, what: str, where: str, db_path: object, busy_timeout: float
) -> StorageError:
    """Our error for SQLite's: a database another writer kept locked past `busy_timeout` is
    worth a retry (`TransientStorageError`); anything else is a `StorageError`."""
    text = str(exc).lower()
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        return TransientStorageError(
            f"SQLite database {where} stayed locked by another writer for {busy_timeout}s; "
            "retry, or raise busy_timeout",
            context={"db_path": str(db_path)},
        )
    return StorageError(f"SQLite {what} {where}: {exc}")


T = TypeVar("T")


class SqliteFile:
    """One SQLite file used through one connection (opened on first use, WAL journal, the
    tables made by `_create` in one transaction), one call at a time in a worker thread:
    the long-term store's and the media store's. `what` names it in errors."""

    what = "database"

    def __init__(self, db_path: str | Path, busy_timeout: float) -> None:
        self.db_path = Path(db_path).expanduser()
        self._busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _create(self, conn: sqlite3.Connection) -> None:
        """Create the tables (inside the opening transaction)."""
        raise NotImplementedError

    def _open(self) -> sqlite3.Connection:
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.db_path, isolation_level=None, timeout=self._busy_timeout, check_same_thread=False
        )
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("BEGIN IMMEDIATE")
            try:
                self._create(conn)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except BaseException:
            conn.close()
            raise
        return conn

    def _call(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` on the file's connection (opened on first use), one call at a time."""
        try:
            with self._lock:
                if self._conn is None:
                    self._conn = self._open()
                return work(self._conn)
        except sqlite3.Error as exc:
            where = repr(str(self.db_path))
            raise sqlite_error(exc, self.what, where, self.db_path, self._busy_timeout) from exc

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.to_thread(self._call, work)

    async def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` in one write transaction (taken at once: BEGIN IMMEDIATE)."""

        def run(conn: sqlite3.Connection) -> T:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = work(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

        return await self._run(run)

    async def asetup(self) -> None:
        """Open the file and create the tables. Safe to repeat."""
        await self._run(lambda conn: None)

    async def aclose(self) -> None:
        """Close the connection; it reopens on the next use."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
