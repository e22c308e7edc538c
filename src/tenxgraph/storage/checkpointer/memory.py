"""`InMemoryCheckpointer`: threads kept in this process, for tests and notebooks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tenxgraph.core.exceptions import StaleStateError
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer.base import (
    BaseCheckpointer,
    S,
    ThreadSnapshot,
    decode_state,
    encode_header,
    encode_message,
)


@dataclass(slots=True)
class _Thread:
    version: int
    header: str
    messages: list[str] = field(default_factory=list)


class InMemoryCheckpointer(BaseCheckpointer):
    """Stores JSON copies, never references: changing a state you got back (or one you saved)
    never changes what is stored. Each instance is its own store."""

    def __init__(self) -> None:
        super().__init__()
        self._threads: dict[str, _Thread] = {}
        self._stop_requests: set[str] = set()

    async def aversion(self, thread_id: str) -> int | None:
        thread = self._threads.get(thread_id)
        return None if thread is None else thread.version

    async def aload(self, thread_id: str, state_type: type[S]) -> ThreadSnapshot[S] | None:
        thread = self._threads.get(thread_id)
        if thread is None:
            return None
        state = decode_state(state_type, thread_id, thread.header, thread.messages)
        return ThreadSnapshot(thread_id, thread.version, state)

    async def asave(
        self,
        thread_id: str,
        *,
        expected_version: int | None,
        state: AgentState,
        new_messages: Sequence[Message],
        rewrite: bool = False,
    ) -> int:
        thread = self._threads.get(thread_id)
        current = None if thread is None else thread.version
        if current != expected_version:
            raise StaleStateError(
                f"Thread {thread_id!r} is at version {current}, but this write was based on "
                f"version {expected_version}: another run changed it. Reload and retry.",
                context={"thread_id": thread_id, "expected": expected_version, "found": current},
            )
        header = encode_header(state)
        encoded = [encode_message(m) for m in new_messages]
        if thread is None:
            thread = self._threads[thread_id] = _Thread(0, header)
        thread.version += 1
        thread.header = header
        if rewrite:
            thread.messages = encoded
        else:
            thread.messages.extend(encoded)
        return thread.version

    async def adelete_thread(self, thread_id: str) -> bool:
        self._stop_requests.discard(thread_id)
        return self._threads.pop(thread_id, None) is not None

    async def alist_threads(self, *, offset: int = 0, limit: int | None = None) -> list[str]:
        ids = list(self._threads)
        return ids[offset : None if limit is None else offset + limit]

    async def arequest_stop(self, thread_id: str) -> None:
        self._stop_requests.add(thread_id)

    async def ais_stop_requested(self, thread_id: str) -> bool:
        return thread_id in self._stop_requests

    async def aclear_stop_request(self, thread_id: str) -> None:
        self._stop_requests.discard(thread_id)


__all__ = ["InMemoryCheckpointer"]
