"""PostgreSQL plumbing the checkpointer and the store share: asyncpg loaded on first use,
schema names checked, the errors worth a retry, an advisory-lock key, and the pools each owns:
one per event loop, closed with the loop that made it.

An asyncpg connection belongs to the event loop that opened it, so each loop using the
checkpointer gets its own pool. Once that loop is closed nothing can be awaited on it any
more, and its connections would stay open on the server until the garbage collector found
them. So each pool is closed while its loop is shutting down: next to the pool lives a small
async generator, suspended for the pool's life, whose `finally` closes the pool. A loop
closes every async generator it started in `loop.shutdown_asyncgens()`, which
`asyncio.run()`, `asyncio.Runner` and tenxgraph's own loop thread call after cancelling the
loop's tasks and before closing it. (A loop closed without that call, by hand, leaves its
pool to the garbage collector, as before.)

A call made on a loop after its pool was closed that way (the clean-up of another async
generator closed at the same moment) gets a connection of its own, closed right after.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import threading
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, TypeVar

Pool = Any  # asyncpg.Pool (asyncpg ships no type information)
Connection = Any  # asyncpg.Connection

T = TypeVar("T")
_BACKOFF_SECONDS = 0.05  # the first wait before a retry; it doubles each time
_CLOSE_SECONDS = 10.0  # a graceful close waits for busy connections this long, then cuts them
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def load_asyncpg(who: str) -> Any:
    """asyncpg, imported on first use; `who` needs it (named in the install hint)."""
    try:
        import asyncpg  # type: ignore[import-untyped]
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(f"{who} needs asyncpg: pip install 'tenxgraph[postgres]'") from exc
    return asyncpg


def check_schema(schema: str) -> None:
    """Refuse a schema name that would need quoting rules of its own."""
    if not _IDENTIFIER.match(schema):
        raise ValueError(
            f"schema {schema!r} is not a plain SQL identifier (letters, digits, _; at most "
            "63 characters, not starting with a digit)"
        )


def is_transient(exc: BaseException) -> bool:
    """Connection lost, server restarting or full, or a serialisation conflict: worth a retry."""
    if isinstance(exc, OSError | asyncio.TimeoutError):
        return True
    asyncpg = load_asyncpg("PostgreSQL storage")
    errors = asyncpg.exceptions
    transient = (
        asyncpg.PostgresConnectionError,  # includes ConnectionDoesNotExistError
        errors.TooManyConnectionsError,
        errors.CannotConnectNowError,
        errors.AdminShutdownError,
        errors.CrashShutdownError,
        errors.SerializationError,
        errors.DeadlockDetectedError,
    )
    if isinstance(exc, transient):
        return True
    return isinstance(exc, asyncpg.InterfaceError) and "closed" in str(exc).lower()


def advisory_key(label: str) -> int:
    """The 64-bit key of a transaction-level advisory lock named by `label`."""
    digest = hashlib.sha256(label.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


async def retrying(once: Callable[[], Awaitable[T]], retries: int, backoff: float, what: str) -> T:
    """`once()` (one attempt, a pooled connection and the call on it), run again after a
    transient failure (every call given here is safe to repeat), at most `retries` times with
    exponential backoff; then `TransientStorageError` naming `what`. (Attempts are plain
    coroutines, not async generators: a call made while its loop shuts down must not start
    one.)"""
    from tenxgraph.core.exceptions import TransientStorageError

    attempt = 0
    while True:
        try:
            return await once()
        except Exception as exc:
            if not is_transient(exc):
                raise
            if attempt >= retries:
                raise TransientStorageError(
                    f"{what}: gave up after {attempt + 1} attempts: {type(exc).__name__}: {exc}",
                    context={"attempts": attempt + 1},
                ) from exc
        await asyncio.sleep(backoff * 2**attempt)
        attempt += 1


class PgTables:
    """A PostgreSQL store of tenxgraph's own tables (the long-term store, the media store):
    calls on a pooled connection, the tables made by `_ensure` on first use, transient
    failures retried. A subclass sets `_pools`, `_retries` and `what`, and `_ensure`."""

    what = "PostgreSQL store"
    _pools: LoopPools
    _retries: int
    _ready = False

    async def _ensure(self, conn: Connection) -> None:
        """Create the schema's tables (once per store object)."""
        raise NotImplementedError

    async def _pool(self) -> Pool:
        return await self._pools.get()

    async def _run(self, operation: Callable[[Connection], Awaitable[T]]) -> T:
        """`operation` on a pooled connection, the tables made on first use, retrying
        transient failures (every call is safe to repeat)."""

        async def once() -> T:
            pool = await self._pool()
            async with self._pools.connection(pool) as conn:
                if not self._ready:
                    await self._ensure(conn)
                    self._ready = True
                return await operation(conn)

        return await retrying(once, self._retries, _BACKOFF_SECONDS, self.what)

    async def asetup(self) -> None:
        """Create the pool, the schema and the tables. Safe to repeat."""
        await self._run(noop)

    async def aclose(self) -> None:
        """Close the pools this store created (it reopens on its next use)."""
        await self._pools.aclose()


async def noop(conn: Connection) -> None:
    """Nothing: run through a store's retry loop, it opens (and checks) a connection."""
    return None


def dsn_pools(dsn: str | None, min_size: int, max_size: int, who: str) -> LoopPools:
    """Pools of connections to `dsn`, one per event loop. A connection goes back to its pool
    as it is: asyncpg's reset query would cost a round trip per call, to undo what tenxgraph
    never does (SET, LISTEN, cursors or advisory locks outliving a transaction); a
    transaction left open is still rolled back."""

    async def create_pool() -> Pool:
        return await load_asyncpg(who).create_pool(
            dsn, min_size=min_size, max_size=max_size, reset=noop
        )

    async def connect() -> Connection:
        return await load_asyncpg(who).connect(dsn)

    return LoopPools(create_pool, connect)


class LoopPools:
    """One pool per event loop, made by `create` on first use and closed with its loop (or by
    `aclose`); `connect` makes the one-off connection of a loop whose pool was closed."""

    def __init__(
        self,
        create: Callable[[], Awaitable[Pool]],
        connect: Callable[[], Awaitable[Connection]],
    ) -> None:
        self._create = create
        self._connect = connect
        self._pools: dict[asyncio.AbstractEventLoop, Pool] = {}
        # per loop: the async generator that closes its pool when the loop shuts down
        self._closers: dict[asyncio.AbstractEventLoop, AsyncGenerator[None, None]] = {}
        self._locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}
        self._ended: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
        self._guard = threading.Lock()

    def __len__(self) -> int:
        return len(self._pools)

    async def get(self) -> Pool | None:
        """This loop's pool, made on first use; None once the loop is shutting down."""
        loop = asyncio.get_running_loop()
        with self._guard:
            self._forget_closed_loops()
            pool = self._pools.get(loop)
            if pool is not None:
                return pool
            if loop in self._ended:
                return None
            lock = self._locks.setdefault(loop, asyncio.Lock())
        async with lock:
            pool = self._pools.get(loop)
            if pool is None and loop not in self._ended:
                pool = await self._create()
                closer = self._close_with_loop(loop, pool)
                await closer.__anext__()  # started on this loop: its shutdown will close it
                with self._guard:
                    self._pools[loop] = pool
                    self._closers[loop] = closer
        return pool

    def connection(self, pool: Pool | None) -> Borrowed:
        """`async with pools.connection(pool) as conn:` a connection of `pool`, or (None: the
        loop's pool is closed) one of its own, closed after the block."""
        return Borrowed(pool, self._connect)

    async def aclose(self) -> None:
        """Close every pool: this loop's here, another loop's on that loop."""
        loop = asyncio.get_running_loop()
        with self._guard:
            closers, self._closers = self._closers, {}
            self._pools, self._locks = {}, {}
        for owner, closer in closers.items():
            if owner is loop:
                await closer.aclose()
            elif not owner.is_closed():
                asyncio.run_coroutine_threadsafe(closer.aclose(), owner)

    async def _close_with_loop(
        self, loop: asyncio.AbstractEventLoop, pool: Pool
    ) -> AsyncGenerator[None, None]:
        """Suspended while the pool lives; closed by `aclose`, by the loop's
        `shutdown_asyncgens()`, or (dropped with its checkpointer) by the loop's finaliser
        of async generators. Its end closes the pool."""
        try:
            yield
        finally:
            with self._guard:
                if self._pools.get(loop) is pool:  # not `aclose`: the loop is ending
                    del self._pools[loop]
                    self._closers.pop(loop, None)
                    self._locks.pop(loop, None)
                    self._ended.add(loop)
            await _close(pool)

    def _forget_closed_loops(self) -> None:
        """Loops closed without shutting down their async generators: their pools cannot be
        closed any more (nothing runs on a closed loop); the garbage collector takes them."""
        for other in [lp for lp in self._pools if lp.is_closed()]:
            del self._pools[other]
            self._closers.pop(other, None)
            self._locks.pop(other, None)


class Borrowed:
    """A connection for an `async with` block: a plain object, not an async generator, so it
    also works while the loop shuts down (after `loop.shutdown_asyncgens()`)."""

    __slots__ = ("_acquiring", "_conn", "_connect", "_pool")

    def __init__(self, pool: Pool | None, connect: Callable[[], Awaitable[Connection]]) -> None:
        self._pool = pool
        self._connect = connect
        self._acquiring: Any = None
        self._conn: Connection = None

    async def __aenter__(self) -> Connection:
        if self._pool is not None:
            self._acquiring = self._pool.acquire()
            return await self._acquiring.__aenter__()
        self._conn = await self._connect()
        return self._conn

    async def __aexit__(self, *exc_info: Any) -> None:
        if self._acquiring is not None:
            await self._acquiring.__aexit__(*exc_info)
            return
        try:
            await self._conn.close()
        except Exception:  # broken on the way: just drop the socket
            self._conn.terminate()


async def _close(pool: Pool) -> None:
    """Close gracefully (each connection says goodbye to the server); cut what will not."""
    try:
        await asyncio.wait_for(pool.close(), _CLOSE_SECONDS)
    except Exception:
        pool.terminate()


__all__ = [
    "Borrowed",
    "LoopPools",
    "advisory_key",
    "check_schema",
    "dsn_pools",
    "is_transient",
    "load_asyncpg",
    "noop",
]
