"""`create_app`: the Agent Protocol server as an ASGI app, to run with `tenxgraph serve` or
to mount in your own Starlette/FastAPI service.

    app = create_app({"agent": graph}, db="server.db")   # or db="postgresql://..."

`db` is where the server keeps its threads, runs and events, and, for a graph compiled
without a checkpointer (or store), its checkpoints (and long-term store): a SQLite path (the
embedded default; one server process) or a PostgreSQL DSN (any number of workers on any
number of hosts). With PostgreSQL, workers wake each other with LISTEN/NOTIFY, or through
Redis pub/sub when `redis_url` is given. `max_runs` is how many runs this process executes at
once; 0 serves the API only (the runs it queues are executed by other workers).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tenxgraph.core.graph.compiled_graph import CompiledGraph
from tenxgraph.serve.auth import Authenticate
from tenxgraph.serve.bus import Bus
from tenxgraph.serve.db.base import ServeDB
from tenxgraph.serve.http import HTTPError
from tenxgraph.serve.routes import assistants, page, protocol, runs, store, threads
from tenxgraph.serve.server import DEFAULT_BODY_LIMIT, DEFAULT_HEARTBEAT, Server
from tenxgraph.storage.checkpointer.base import BaseCheckpointer
from tenxgraph.storage.store.base import BaseStore

DEFAULT_DB = "tenxgraph-server.db"


def _backends(db: str, redis_url: str | None) -> tuple[ServeDB, Bus, BaseCheckpointer, BaseStore]:
    """The server's tables, bus, checkpointer and store for `db`."""
    if db.startswith(("postgresql://", "postgres://")):
        from tenxgraph.serve.db.postgres import PostgresServeDB
        from tenxgraph.storage.checkpointer.postgres import PgCheckpointer
        from tenxgraph.storage.store.postgres import PostgresStore

        serve_db = PostgresServeDB(db)
        bus: Bus = serve_db.bus() if redis_url is None else _redis(redis_url)
        return serve_db, bus, PgCheckpointer(db), PostgresStore(db)
    from tenxgraph.serve.db.sqlite import SqliteServeDB
    from tenxgraph.storage.checkpointer.sqlite import SqliteCheckpointer
    from tenxgraph.storage.store.sqlite import SqliteStore

    bus = Bus() if redis_url is None else _redis(redis_url)
    return SqliteServeDB(db), bus, SqliteCheckpointer(db), SqliteStore(db)


def _redis(url: str) -> Bus:
    from tenxgraph.serve.redis_bus import RedisBus

    return RedisBus(url)


def create_app(
    graphs: CompiledGraph[Any] | Mapping[str, CompiledGraph[Any]],
    *,
    db: str = DEFAULT_DB,
    auth: Authenticate | None = None,
    redis_url: str | None = None,
    lease_ttl: float = 30.0,
    max_runs: int = 64,
    body_limit: int = DEFAULT_BODY_LIMIT,
    heartbeat: float = DEFAULT_HEARTBEAT,
    page_enabled: bool = True,
) -> Starlette:
    """The server for `graphs` (one graph is served under its `name`). See the module doc.
    `body_limit` is the largest request body accepted (bytes; larger is a 413), `heartbeat`
    the seconds between the SSE ping comments that keep a quiet stream open."""
    if isinstance(graphs, CompiledGraph):
        graphs = {graphs.name: graphs}
    served = dict(graphs)
    serve_db, bus, checkpointer, default_store = _backends(db, redis_url)
    for graph in served.values():  # an app without its own keeps its threads in `db`
        graph.adopt_checkpointer(checkpointer)
    stores = [g.store for g in served.values() if g.store is not None]
    server = Server(
        served, serve_db, bus, auth=auth, store=stores[0] if stores else default_store,
        lease_ttl=lease_ttl, max_runs=max_runs, body_limit=body_limit, heartbeat=heartbeat,
        run_worker=max_runs > 0,
    )  # fmt: skip

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await server.start()
        try:
            yield
        finally:
            await server.stop()
            await checkpointer.aclose()
            await default_store.aclose()

    async def ok(request: Request) -> Response:
        return JSONResponse({"ok": server.ready}, 200 if server.ready else 503)

    async def info(request: Request) -> Response:
        await server.owner(request)
        return JSONResponse({"version": "tenxgraph", "flags": {"assistants": True}})

    routes = [Route("/ok", ok), Route("/info", info)]
    routes += assistants.ROUTES + threads.ROUTES + runs.ROUTES + store.ROUTES + protocol.ROUTES
    if page_enabled:
        routes += page.ROUTES
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPError: _error})
    app.state.tenxgraph = server
    return app


async def _error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPError)
    return JSONResponse({"detail": exc.detail}, exc.status)


__all__ = ["DEFAULT_DB", "create_app"]
