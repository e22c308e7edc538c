"""`PgBus`: wake-ups between workers over PostgreSQL's LISTEN/NOTIFY, so a deployment on
PostgreSQL needs nothing else.

One dedicated connection LISTENs on the channel; `publish` wakes this process's waiters at
once and sends `pg_notify(channel, topic)` for the others. When the listening connection
drops, the bus reconnects (backing off) and then wakes every waiter: notifications sent
while it was away are lost, and a waiter woken for nothing just reads the database again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from tenxgraph.serve.bus import SharedBus
from tenxgraph.storage.checkpointer._pg_pools import dsn_pools, is_transient, load_asyncpg

logger = logging.getLogger("tenxgraph.serve")
_BACKOFF_SECONDS = (0.1, 0.5, 1.0, 2.0, 5.0)  # waits between reconnection attempts


class PgBus(SharedBus):
    """Wake-ups carried by PostgreSQL (`dsn`) on `channel` between every process using it."""

    def __init__(self, dsn: str, *, channel: str = "tx_serve") -> None:
        super().__init__(channel)
        self.dsn = dsn
        self._pools = dsn_pools(dsn, 1, 4, "PgBus")
        self._listener: Any = None  # asyncpg.Connection
        self._lost = asyncio.Event()

    def __repr__(self) -> str:
        return f"PgBus(channel={self.channel!r})"

    async def start(self) -> None:
        if self._task is not None:
            return
        await self._listen()  # the first connection's failure is the caller's to see
        self._task = asyncio.create_task(self._supervise(), name="tenxgraph-pg-bus")

    async def stop(self) -> None:
        await self._stop_listening()
        await self._drop()
        await self._pools.aclose()

    async def _send(self, topics: list[str]) -> None:
        async def notify() -> None:
            pool = await self._pools.get()
            async with self._pools.connection(pool) as conn:
                for payload in self._payloads(topics):
                    await conn.execute("SELECT pg_notify($1, $2)", self.channel, payload)

        try:
            await notify()
        except Exception as exc:  # a lost wake-up costs a poll interval, never an event
            if not is_transient(exc):
                raise
            logger.warning("PgBus could not notify %r: %s", topics[:3], exc)

    # -- the listening connection -----------------------------------------------------------

    async def _listen(self) -> None:
        conn = await load_asyncpg("PgBus").connect(self.dsn)
        self._lost.clear()
        conn.add_termination_listener(lambda _conn: self._lost.set())
        await conn.add_listener(self.channel, self._received)
        self._listener = conn
        self.connections += 1
        self.listening.set()

    def _received(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self._wake_from(payload)

    async def _supervise(self) -> None:
        """Wait for the connection to drop; then reconnect and wake everyone."""
        while True:
            await self._lost.wait()
            self.listening.clear()
            await self._drop()
            attempt = 0
            while True:
                try:
                    await self._listen()
                    break
                except Exception as exc:
                    delay = _BACKOFF_SECONDS[min(attempt, len(_BACKOFF_SECONDS) - 1)]
                    logger.warning("PgBus reconnecting in %ss: %s", delay, exc)
                    await asyncio.sleep(delay)
                    attempt += 1
            for topic in list(self._waiting):  # what was sent meanwhile is lost: look again
                self.wake(topic)

    async def _drop(self) -> None:
        conn, self._listener = self._listener, None
        if conn is None:
            return
        try:
            await asyncio.wait_for(conn.close(), 2.0)
        except Exception:
            conn.terminate()


__all__ = ["PgBus"]
