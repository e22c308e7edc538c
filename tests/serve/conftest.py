"""The server's databases for the serve tests: `serve_db` is SQLite (a file in tmp_path) and
PostgreSQL (its own fresh schema, dropped afterwards; skipped without TENXGRAPH_TEST_PG_DSN,
which `.ci/run` sets)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tenxgraph.serve.db.base import ServeDB
from tests.storage.conftest import drop_schema, fresh_schema, pg_dsn

REDIS_URL_VAR = "TENXGRAPH_TEST_REDIS_URL"


def redis_url() -> str:
    """The test Redis server's URL, or skip the test with the reason."""
    url = os.environ.get(REDIS_URL_VAR)
    if not url:
        pytest.skip(f"{REDIS_URL_VAR} is not set: Redis tests need a server (.ci/run starts one)")
    return url


@pytest.fixture
async def pg_schema() -> AsyncIterator[tuple[str, str]]:
    """(DSN, a fresh schema name), the schema dropped after the test."""
    dsn, schema = pg_dsn(), fresh_schema()
    yield dsn, schema
    await drop_schema(dsn, schema)


@pytest.fixture(params=["sqlite", "postgres"])
async def serve_db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ServeDB]:
    db: ServeDB
    if request.param == "sqlite":
        from tenxgraph.serve.db.sqlite import SqliteServeDB

        db = SqliteServeDB(tmp_path / "serve.db")
        yield db
        await db.aclose()
        return
    from tenxgraph.serve.db.postgres import PostgresServeDB

    dsn, schema = pg_dsn(), fresh_schema()
    db = PostgresServeDB(dsn, schema=schema)
    try:
        yield db
    finally:
        await db.aclose()
        await drop_schema(dsn, schema)
