"""Fixtures shared by the graph tests."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tenxgraph.storage.checkpointer import InMemoryCheckpointer, SqliteCheckpointer
from tenxgraph.storage.checkpointer.base import BaseCheckpointer

PG_DSN_VAR = "TENXGRAPH_TEST_PG_DSN"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BaseCheckpointer]:
    """One checkpointer per backend (PostgreSQL when TENXGRAPH_TEST_PG_DSN names a server)."""
    found: BaseCheckpointer
    if request.param == "memory":
        found = InMemoryCheckpointer()
    elif request.param == "sqlite":
        found = SqliteCheckpointer(tmp_path / "t.db")
    else:
        dsn = os.environ.get(PG_DSN_VAR)
        if not dsn:
            pytest.skip(f"{PG_DSN_VAR} is not set: PostgreSQL tests need a server")
        from tenxgraph.storage.checkpointer import PgCheckpointer

        found = PgCheckpointer(dsn, max_size=4)
    await found.asetup()
    try:
        yield found
    finally:
        await found.aclose()
