"""`InMemoryCheckpointer`: threads kept in this process, for tests and notebooks."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tenxgraph.core.exceptions import ResourceNotFoundError, StaleStateError, StorageError
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer._sql import encode_tool_result
from tenxgraph.storage.checkpointer.base import (
    BaseCheckpointer,
    CheckpointInfo,
    S,
    ThreadSnapshot,
    checkpoint_fields,
    decode_state,
    encode_header,
    encode_message,
)
from tenxgraph.storage.checkpointer.lease import (
    DEFAULT_LEASE_TTL,
    Lease,
    LeaseHolder,
    busy_error,
    check_ttl,
)


@dataclass(slots=True)
class _Version:
    version: int
    header: str
    message_count: int
    generation: int
    step: int
    status: str
    node: str | None
    created_at: float


@dataclass(slots=True)
class _Thread:
    versions: list[_Version] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    generation: int = 0
    lease_owner: str | None = None
    lease_expires: float = 0.0

    def holder(self, now: float) -> str | None:
        """The owner of the live lease, if any."""
        return self.lease_owner if self.lease_expires > now else None

    @property
    def version(self) -> int:
        return self.versions[-1].version


class InMemoryCheckpointer(BaseCheckpointer):
    """Stores JSON copies, never references: changing a state you got back (or one you saved)
    never changes what is stored. Each instance is its own store."""

    def __init__(self, *, lease_ttl: float = DEFAULT_LEASE_TTL) -> None:
        super().__init__()
        self.lease_ttl = check_ttl(lease_ttl)
        self._threads: dict[str, _Thread] = {}
        self._stop_requests: set[str] = set()
        self._ledger: dict[tuple[str, str, str], str] = {}

    async def aversion(self, thread_id: str) -> int | None:
        thread = self._threads.get(thread_id)
        return None if thread is None else thread.version

    async def aload(
        self, thread_id: str, state_type: type[S], version: int | None = None
    ) -> ThreadSnapshot[S] | None:
        thread = self._threads.get(thread_id)
        if thread is None:
            return None
        saved = thread.versions[-1] if version is None else _find(thread, thread_id, version)
        state = decode_state(
            state_type, thread_id, saved.header, thread.messages[: saved.message_count]
        )
        return ThreadSnapshot(thread_id, saved.version, state)

    async def asave(
        self,
        thread_id: str,
        *,
        expected_version: int | None,
        state: AgentState,
        new_messages: Sequence[Message],
        rewrite: bool = False,
        lease: Lease | None = None,
        release: bool = False,
    ) -> int:
        thread = self._threads.get(thread_id)
        now = time.time()
        if thread is not None:
            holder = thread.holder(now)
            if holder is not None and (lease is None or holder != lease.owner):
                raise busy_error(thread_id, holder, thread.lease_expires - now)
        current = None if thread is None else thread.version
        if current != expected_version:
            raise StaleStateError(
                f"Thread {thread_id!r} is at version {current}, but this write was based on "
                f"version {expected_version}: another run changed it. Reload and retry.",
                context={"thread_id": thread_id, "expected": expected_version, "found": current},
            )
        header = encode_header(state, thread_id)
        encoded = [encode_message(m) for m in new_messages]
        if thread is None:
            thread = self._threads[thread_id] = _Thread()
        if lease is None or release:
            thread.lease_owner, thread.lease_expires = None, 0.0
        else:
            thread.lease_owner, thread.lease_expires = lease.owner, now + lease.ttl
        if rewrite:
            thread.messages = encoded
            thread.generation += 1
        else:
            thread.messages.extend(encoded)
        step, status, node = checkpoint_fields(state)
        version = (current or 0) + 1
        thread.versions.append(
            _Version(
                version,
                header,
                len(thread.messages),
                thread.generation,
                step,
                status,
                node,
                time.time(),
            )
        )
        return version

    async def arenew_lease(self, thread_id: str, lease: Lease) -> bool:
        thread = self._threads.get(thread_id)
        now = time.time()
        if thread is None or thread.lease_owner != lease.owner:
            return False
        thread.lease_expires = now + lease.ttl
        return True

    async def arelease_lease(self, thread_id: str, owner: str) -> None:
        thread = self._threads.get(thread_id)
        if thread is not None and thread.lease_owner == owner:
            thread.lease_owner, thread.lease_expires = None, 0.0

    async def alease_holder(self, thread_id: str) -> LeaseHolder | None:
        thread = self._threads.get(thread_id)
        now = time.time()
        holder = None if thread is None else thread.holder(now)
        if thread is None or holder is None:
            return None
        return LeaseHolder(holder, thread.lease_expires - now)

    async def ahistory(self, thread_id: str, *, limit: int | None = None) -> list[CheckpointInfo]:
        thread = self._threads.get(thread_id)
        if thread is None:
            return []
        rows = thread.versions[::-1][:limit]
        return [
            CheckpointInfo(
                thread_id, v.version, v.step, v.status, v.node, v.message_count, v.created_at
            )
            for v in rows
        ]

    async def adelete_thread(self, thread_id: str) -> bool:
        self._stop_requests.discard(thread_id)
        for key in [k for k in self._ledger if k[0] == thread_id]:
            del self._ledger[key]
        return self._threads.pop(thread_id, None) is not None

    async def alist_threads(self, *, offset: int = 0, limit: int | None = None) -> list[str]:
        ids = list(self._threads)
        return ids[offset : None if limit is None else offset + limit]

    async def aput_tool_result(
        self, thread_id: str, message_id: str, call_id: str, result: dict[str, Any]
    ) -> bool:
        key = (thread_id, message_id, call_id)
        if key in self._ledger:
            return False
        self._ledger[key] = encode_tool_result(result)
        return True

    async def aget_tool_result(
        self, thread_id: str, message_id: str, call_id: str
    ) -> dict[str, Any] | None:
        found = self._ledger.get((thread_id, message_id, call_id))
        return None if found is None else json.loads(found)

    async def arequest_stop(self, thread_id: str) -> None:
        self._stop_requests.add(thread_id)

    async def ais_stop_requested(self, thread_id: str) -> bool:
        return thread_id in self._stop_requests

    async def aclear_stop_request(self, thread_id: str) -> None:
        self._stop_requests.discard(thread_id)


def _find(thread: _Thread, thread_id: str, version: int) -> _Version:
    for saved in thread.versions:
        if saved.version == version:
            if saved.generation != thread.generation:
                raise StorageError(
                    f"Thread {thread_id!r}: version {version} predates a rewrite of its "
                    "history and can no longer be loaded",
                    context={"thread_id": thread_id, "version": version},
                )
            return saved
    raise ResourceNotFoundError(
        f"Thread {thread_id!r} has no version {version} (latest is {thread.version})",
        context={"thread_id": thread_id, "version": version},
    )


__all__ = ["InMemoryCheckpointer"]
