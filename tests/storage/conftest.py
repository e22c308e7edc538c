"""One `checkpointer` fixture per backend: memory, SQLite (a file in tmp_path) and PostgreSQL.

PostgreSQL tests need a server: set TENXGRAPH_TEST_PG_DSN (`.ci/run` starts one on loopback);
without it they are skipped. Each PostgreSQL test gets its own schema, dropped afterwards.
"""

from __future__ import annotations

import os
import re
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.storage.checkpointer import BaseCheckpointer, InMemoryCheckpointer

PG_DSN_VAR = "TENXGRAPH_TEST_PG_DSN"


def pg_dsn() -> str:
    """The test server's DSN, or skip the test with the reason."""
    dsn = os.environ.get(PG_DSN_VAR)
    if not dsn:
        pytest.skip(
            f"{PG_DSN_VAR} is not set: PostgreSQL checkpointer tests need a server "
            "(.ci/run starts one on loopback)"
        )
    return dsn


def fresh_schema() -> str:
    return f"tx_test_{uuid.uuid4().hex[:16]}"


async def drop_schema(dsn: str, schema: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


class Backend:
    """A checkpointer plus a back door into its storage, for tests that inspect or damage
    stored rows and for reopening the same storage with a new instance."""

    FILE = "checkpoints.db"  # the SQLite file, in the test's own folder

    def __init__(self, name: str, tmp_path: Path) -> None:
        self.name = name
        self.opened: list[Any] = []
        if name == "sqlite":
            self.db_path = tmp_path / self.FILE
        elif name == "postgres":
            self.dsn = pg_dsn()
            self.schema = fresh_schema()
        self.store = self.open()

    @property
    def is_sql(self) -> bool:
        return self.name != "memory"

    def open(self) -> BaseCheckpointer:
        """A new checkpointer instance on this backend's storage."""
        store: BaseCheckpointer
        if self.name == "memory":
            store = InMemoryCheckpointer()
        elif self.name == "sqlite":
            from tenxgraph.storage.checkpointer import SqliteCheckpointer

            store = SqliteCheckpointer(self.db_path)
        else:
            from tenxgraph.storage.checkpointer import PgCheckpointer

            store = PgCheckpointer(self.dsn, schema=self.schema, max_size=4)
        self.opened.append(store)
        return store

    async def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        """Run raw SQL (`?` placeholders, unqualified `tx_*` table names) on the storage."""
        if self.name == "sqlite":
            conn = sqlite3.connect(self.db_path, isolation_level=None)
            try:
                return [tuple(row) for row in conn.execute(query, params).fetchall()]
            finally:
                conn.close()
        if self.name == "postgres":
            import asyncpg

            numbered = iter(range(1, len(params) + 1))
            query = re.sub(r"\?", lambda _: f"${next(numbered)}", query)
            conn = await asyncpg.connect(self.dsn, server_settings={"search_path": self.schema})
            try:
                return [tuple(row) for row in await conn.fetch(query, *params)]
            finally:
                await conn.close()
        raise AssertionError("the in-memory store has no SQL")

    async def close(self) -> None:
        for store in self.opened:
            await store.aclose()
        if self.name == "postgres":
            await drop_schema(self.dsn, self.schema)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    found = Backend(request.param, tmp_path)
    try:
        yield found
    finally:
        await found.close()


@pytest.fixture
def checkpointer(backend: Backend) -> BaseCheckpointer:
    """Each storage behaviour test runs once per checkpointer (memory, sqlite, postgres)."""
    return backend.store


@pytest.fixture(params=["sqlite", "postgres"])
async def sql_backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """Only the SQL checkpointers: for tests that reach into stored rows."""
    found = Backend(request.param, tmp_path)
    try:
        yield found
    finally:
        await found.close()
