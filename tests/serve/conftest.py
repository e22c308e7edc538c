"""The serve tests' fixtures. `served`: a real server, `create_app(...)` on uvicorn on
loopback, in a thread with its own event loop, over a SQLite db in tmp_path, with the default
graphs (see graphs.py); parametrize it indirectly with a dict of `create_app` arguments:

    @pytest.mark.parametrize("served", [{"auth": bearer_tokens({...})}], indirect=True)

`serve_db`: the server's database alone, SQLite (a file in tmp_path) and PostgreSQL (its own
fresh schema, dropped afterwards; skipped without TENXGRAPH_TEST_PG_DSN, which `.ci/run`
sets); `redis_url()` the test Redis (TENXGRAPH_TEST_REDIS_URL).
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from starlette.applications import Starlette

from tenxgraph.serve import create_app
from tenxgraph.serve.db.base import ServeDB
from tests.serve.graphs import Gate, all_graphs
from tests.storage.conftest import drop_schema, fresh_schema, pg_dsn


@dataclass
class Served:
    url: str
    gate: Gate
    app: Starlette
    options: dict[str, Any] = field(default_factory=dict)

    def client(self, token: str | None = None) -> LangGraphClient:
        headers = {"Authorization": f"Bearer {token}"} if token else None
        return get_client(url=self.url, api_key=None, headers=headers)

    def http(self, token: str | None = None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=10)


def _wait_ready(url: str, thread: threading.Thread) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if not thread.is_alive():
            raise RuntimeError("the test server stopped while starting")
        try:
            if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.02)  # polling readiness is the one wait a server start has
    raise RuntimeError("the test server did not answer /ok in time")


def _ours(task: asyncio.Task[Any]) -> bool:
    """Whether a task still running after the server stopped is a leak of ours (not this
    fixture's, nor sse-starlette's one watcher per loop, which lives until the loop ends)."""
    name = getattr(task.get_coro(), "__qualname__", "")
    return task is not asyncio.current_task() and not task.done() and name != "_shutdown_watcher"


@pytest.fixture
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    options: dict[str, Any] = dict(getattr(request, "param", None) or {})
    gate = Gate()
    graphs = options.pop("graphs", None) or all_graphs(gate)
    app = create_app(graphs, db=str(tmp_path / "serve.db"), **options)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(
        app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5, ws="none"
    )
    server = uvicorn.Server(config)
    leftover: list[asyncio.Task[Any]] = []

    async def serve() -> None:
        await server.serve(sockets=[sock])
        leftover.extend(t for t in asyncio.all_tasks() if _ours(t))

    threads_before = set(threading.enumerate())
    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    try:
        _wait_ready(url, thread)
        yield Served(url, gate, app, options)
    finally:
        gate.release.set()
        server.should_exit = True
        thread.join(30)
        sock.close()
    assert not thread.is_alive(), "the test server did not stop"
    assert not leftover, f"tasks left running after the server stopped: {leftover}"
    left = [t for t in set(threading.enumerate()) - threads_before if t.is_alive()]
    for closing in left:  # a closed aiosqlite connection's thread ends on its next queue poll
        closing.join(5)
    left = [t for t in left if t.is_alive()]
    assert not left, f"threads left running after the server stopped: {left}"


@pytest.fixture
async def client(served: Served) -> AsyncIterator[LangGraphClient]:
    sdk = served.client()
    try:
        yield sdk
    finally:
        await sdk.aclose()


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
