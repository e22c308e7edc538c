"""`Bus`: wakes whoever waits for something another task, or another worker, did: a run was
queued (`QUEUE`), a run has new events (`run_topic`), a run was asked to stop (`CANCEL`).

A wake-up carries no data; the waiter reads what changed from the database. So a lost or
duplicated wake-up costs at most one poll interval, never a lost event. `Bus` alone wakes
tasks of this process (enough for one server on SQLite); `PgBus` and `RedisBus` also carry
wake-ups between workers.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Iterator

QUEUE = "queue"
CANCEL = "cancel"


def run_topic(run_id: str) -> str:
    return f"run:{run_id}"


class Bus:
    """In-process wake-ups (and the base of the ones that cross processes)."""

    def __init__(self) -> None:
        self._waiting: dict[str, set[asyncio.Event]] = {}

    async def start(self) -> None:
        """Connect (for the buses that cross processes)."""

    async def stop(self) -> None:
        """Disconnect."""

    async def publish(self, topic: str) -> None:
        """Wake the waiters of `topic` here and, on a shared bus, in every worker."""
        await self.publish_many((topic,))

    async def publish_many(self, topics: Iterable[str]) -> None:
        """`publish` each topic, in as few messages between workers as fit."""
        topics = list(topics)
        for topic in topics:
            self.wake(topic)
        if topics:
            await self._send(topics)

    async def _send(self, topics: list[str]) -> None:
        """Tell the other workers (a bus that crosses processes)."""

    def wake(self, topic: str) -> None:
        for event in self._waiting.get(topic, ()):
            event.set()

    @contextlib.contextmanager
    def watch(self, topic: str) -> Iterator[asyncio.Event]:
        """An event set on each wake-up of `topic` while inside the block (clear it before
        reading, then wait on it)."""
        event = asyncio.Event()
        self._waiting.setdefault(topic, set()).add(event)
        try:
            yield event
        finally:
            waiting = self._waiting.get(topic)
            if waiting is not None:
                waiting.discard(event)
                if not waiting:
                    del self._waiting[topic]


def payloads(sender: str, topics: list[str], size: int = 7000) -> Iterator[str]:
    """`sender:topic topic ...` messages of at most about `size` characters (a NOTIFY
    payload must stay under 8000 bytes); topics never contain spaces."""
    chunk: list[str] = []
    length = 0
    for topic in topics:
        if chunk and length + len(topic) > size:
            yield f"{sender}:{' '.join(chunk)}"
            chunk, length = [], 0
        chunk.append(topic)
        length += len(topic) + 1
    if chunk:
        yield f"{sender}:{' '.join(chunk)}"


def received(bus: Bus, me: str, payload: str) -> None:
    """Wake the topics of another worker's message (`payloads`); ignore this worker's own."""
    sender, _, topics = payload.partition(":")
    if sender != me:
        for topic in topics.split(" "):
            bus.wake(topic)


async def wait_for(event: asyncio.Event, seconds: float) -> None:
    """Wait for a wake-up, or `seconds` (the poll that covers a lost one)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)
    event.clear()


__all__ = ["CANCEL", "QUEUE", "Bus", "payloads", "received", "run_topic", "wait_for"]
