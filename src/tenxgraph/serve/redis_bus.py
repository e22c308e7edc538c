"""`RedisBus`: wake-ups between workers over Redis pub/sub (`create_app(..., redis_url=...)`),
for deployments that already run Redis or would rather keep LISTEN/NOTIFY off PostgreSQL.

One subscribed connection reads the channel; `publish` wakes this process's waiters at once
and PUBLISHes the topic for the others. When the subscription drops, the bus reconnects
(backing off) and then wakes every waiter, since messages sent meanwhile are lost.

redis is imported on first use: `pip install "tenxgraph[redis]"`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from tenxgraph.serve.bus import SharedBus

logger = logging.getLogger("tenxgraph.serve")
_BACKOFF_SECONDS = (0.1, 0.5, 1.0, 2.0, 5.0)  # waits between reconnection attempts


def _load_redis() -> Any:
    try:
        import redis.asyncio as redis
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError('RedisBus needs redis: pip install "tenxgraph[redis]"') from exc
    return redis


class RedisBus(SharedBus):
    """Wake-ups carried by the Redis server at `url` on `channel`."""

    def __init__(self, url: str, *, channel: str = "tx_serve") -> None:
        super().__init__(channel)
        self.url = url
        self._client: Any = None  # redis.asyncio.Redis

    def __repr__(self) -> str:
        return f"RedisBus(channel={self.channel!r})"

    async def start(self) -> None:
        if self._task is not None:
            return
        self._client = _load_redis().from_url(self.url)
        pubsub = await self._subscribe()  # the first failure is the caller's to see
        self._task = asyncio.create_task(self._read(pubsub), name="tenxgraph-redis-bus")

    async def stop(self) -> None:
        await self._stop_listening()
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.aclose()

    async def _send(self, topics: list[str]) -> None:
        if self._client is None:
            return
        try:
            for payload in self._payloads(topics):
                await self._client.publish(self.channel, payload)
        except Exception as exc:  # a lost wake-up costs a poll interval, never an event
            if not isinstance(exc, _load_redis().RedisError | OSError):
                raise
            logger.warning("RedisBus could not publish %r: %s", topics[:3], exc)

    async def _subscribe(self) -> Any:
        pubsub = self._client.pubsub(ignore_subscribe_messages=True)
        await pubsub.subscribe(self.channel)
        self.connections += 1
        self.listening.set()
        return pubsub

    async def _read(self, pubsub: Any) -> None:
        """Read messages; after a lost connection, subscribe again and wake everyone."""
        errors = (_load_redis().RedisError, OSError)
        while True:
            try:
                async for message in pubsub.listen():
                    self._received(message)
            except errors as exc:
                logger.warning("RedisBus lost its subscription: %s", exc)
            self.listening.clear()
            with contextlib.suppress(Exception):
                await pubsub.aclose()
            pubsub = await self._resubscribe(errors)
            for topic in list(self._waiting):  # what was sent meanwhile is lost: look again
                self.wake(topic)

    async def _resubscribe(self, errors: tuple[type[BaseException], ...]) -> Any:
        attempt = 0
        while True:
            try:
                return await self._subscribe()
            except errors as exc:
                delay = _BACKOFF_SECONDS[min(attempt, len(_BACKOFF_SECONDS) - 1)]
                logger.warning("RedisBus reconnecting in %ss: %s", delay, exc)
                await asyncio.sleep(delay)
                attempt += 1

    def _received(self, message: dict[str, Any]) -> None:
        if message.get("type") != "message":
            return
        data = message.get("data")
        text = data.decode() if isinstance(data, bytes) else str(data)
        self._wake_from(text)


__all__ = ["RedisBus"]
