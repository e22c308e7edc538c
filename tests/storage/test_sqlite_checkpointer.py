"""SqliteCheckpointer specifics: the file, WAL, default path, several event loops, lock waits."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tenxgraph.core.exceptions import TransientStorageError
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tests.storage._support import Counted, msg, save, state_with, texts_of

T = TypeVar("T")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteCheckpointer]:
    found = SqliteCheckpointer(tmp_path / "checkpoints.db")
    yield found
    await found.aclose()


def run_in_private_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on a new event loop in another thread, as sync `invoke` does."""
    results: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            results.append(asyncio.run(coro))
        except BaseException as exc:  # pragma: no cover - surfaced below
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return results[0]


async def test_the_file_is_in_wal_mode(store: SqliteCheckpointer, tmp_path: Path) -> None:
    await save(store, "t", state_with("a"), None)
    conn = sqlite3.connect(tmp_path / "checkpoints.db")
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()
    slot = next(iter(store._slots.values()))
    assert slot.conn is not None
    async with slot.conn.execute("PRAGMA synchronous") as cursor:
        row = await cursor.fetchone()
    assert row is not None
    assert row[0] == 1  # NORMAL


async def test_default_path_is_in_the_home_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    store = SqliteCheckpointer()
    assert store.db_path == tmp_path / ".tenxgraph" / "checkpoints.db"
    assert not (tmp_path / ".tenxgraph").exists()  # nothing happens before first use
    await save(store, "t", state_with("a"), None)
    await store.aclose()
    assert (tmp_path / ".tenxgraph" / "checkpoints.db").is_file()


async def test_folders_of_the_path_are_created(tmp_path: Path) -> None:
    store = SqliteCheckpointer(str(tmp_path / "a" / "b" / "threads.db"))
    await store.asetup()
    await store.aclose()
    assert (tmp_path / "a" / "b" / "threads.db").is_file()


async def test_in_memory_database() -> None:
    store = SqliteCheckpointer(":memory:")
    await save(store, "t", state_with("a"), None)
    assert await texts_of(store, "t") == ["a"]
    # another loop (another connection) sees the same in-memory database
    assert run_in_private_loop(store.aversion("t")) == 1
    other = SqliteCheckpointer(":memory:")
    assert await other.aversion("t") is None  # but another instance does not
    await store.aclose()
    await other.aclose()


async def test_one_instance_works_from_a_private_loop_thread_and_the_callers_loop(
    store: SqliteCheckpointer,
) -> None:
    await save(store, "t", state_with("from the test loop"), None)

    async def in_private_loop() -> list[str]:
        snapshot = await store.aload("t", Counted)
        assert snapshot is not None
        await save(store, "t", snapshot.state, snapshot.version, new=[msg("from a thread")])
        return await texts_of(store, "t")

    for _ in range(2):  # a fresh private loop each time, as repeated sync invokes would have
        run_in_private_loop(in_private_loop())
    assert await texts_of(store, "t") == ["from the test loop", "from a thread", "from a thread"]
    await save(store, "t", state_with(), 3, new=[msg("back in the test loop")])
    assert await store.aversion("t") == 4
    assert len(store._slots) == 1  # connections of finished loops were released


async def test_a_write_blocked_by_another_writer_is_transient_and_writes_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "checkpoints.db"
    store = SqliteCheckpointer(path, busy_timeout=0.05)
    await save(store, "t", state_with("a"), None)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another process holding the write lock
    try:
        with pytest.raises(TransientStorageError, match="locked"):
            await save(store, "t", state_with(), 1, new=[msg("b")])
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert await texts_of(store, "t") == ["a"]
    assert await save(store, "t", state_with(), 1, new=[msg("b")]) == 2  # and it recovers
    await store.aclose()


async def test_two_instances_on_one_file_share_threads_and_versions(tmp_path: Path) -> None:
    one = SqliteCheckpointer(tmp_path / "x.db")
    two = SqliteCheckpointer(tmp_path / "x.db")
    await save(one, "t", state_with("a"), None)
    results = await asyncio.gather(
        save(one, "t", state_with(), 1, new=[msg("one")]),
        save(two, "t", state_with(), 1, new=[msg("two")]),
        return_exceptions=True,
    )
    assert sorted(type(r).__name__ for r in results) == ["StaleStateError", "Version"]
    assert len(await texts_of(two, "t")) == 2
    await one.aclose()
    await two.aclose()


def test_importing_the_package_does_not_import_database_drivers(tmp_path: Path) -> None:
    code = (
        "import sys, tenxgraph, tenxgraph.storage.checkpointer as c\n"
        "assert 'aiosqlite' not in sys.modules and 'asyncpg' not in sys.modules\n"
        "assert c.SqliteCheckpointer.__name__ == 'SqliteCheckpointer'\n"
        "assert 'aiosqlite' in sys.modules and 'asyncpg' not in sys.modules\n"
        "print('ok')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ok\n"


@pytest.mark.parametrize("ticks", range(6))
async def test_a_save_cancelled_anywhere_leaves_the_connection_usable(
    store: SqliteCheckpointer, ticks: int
) -> None:
    """A run cancelled mid-save (a server cancelling it) must not leave the shared connection
    inside a transaction: its BEGIN, still queued on the connection's thread when the await
    was cancelled, used to run anyway, and the next save failed with "cannot start a
    transaction within a transaction"."""
    await save(store, "warm", state_with("a"), None)  # the connection is open
    saving = asyncio.create_task(save(store, "t", state_with("x"), None))
    for _ in range(ticks):  # cancel it at a different point of the save each time
        await asyncio.sleep(0)
    saving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await saving

    await save(store, "u", state_with("y"), None)
    assert await texts_of(store, "u") == ["y"]
