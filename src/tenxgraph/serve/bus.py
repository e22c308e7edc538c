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
import uuid
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


class SharedBus(Bus):
    """A bus whose wake-ups also cross processes over `channel` (`PgBus`, `RedisBus`): its
    own messages come back to it, so they carry a name of its own and are skipped; one
    task listens (`_task`), and tests watch `connections` and `listening`."""

    def __init__(self, channel: str) -> None:
        super().__init__()
        self.channel = channel
        self._me = uuid.uuid4().hex[:12]
        self._task: asyncio.Task[None] | None = None
        self.connections = 0  # listening connections (or subscriptions) opened so far
        self.listening = asyncio.Event()  # set while one is up

    async def _stop_listening(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _payloads(self, topics: list[str], size: int = 7000) -> Iterator[str]:
        """`sender:topic topic ...` messages of at most about `size` characters (a NOTIFY
        payload must stay under 8000 bytes); topics never contain spaces."""
        chunk: list[str] = []
        length = 0
        for topic in topics:
            if chunk and length + len(topic) > size:
                yield f"{self._me}:{' '.join(chunk)}"
                chunk, length = [], 0
            chunk.append(topic)
            length += len(topic) + 1
        if chunk:
            yield f"{self._me}:{' '.join(chunk)}"

    def _wake_from(self, payload: str) -> None:
        """Wake the topics of another process's message (`_payloads`); skip our own."""
        sender, _, topics = payload.partition(":")
        if sender != self._me:
            for topic in topics.split(" "):
                self.wake(topic)


async def wait_for(event: asyncio.Event, seconds: float) -> None:
    """Wait for a wake-up, or `seconds` (the poll that covers a lost one)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)
    event.clear()


__all__ = ["CANCEL", "QUEUE", "Bus", "SharedBus", "run_topic", "wait_for"]
