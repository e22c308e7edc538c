"""`InMemoryCheckpointer`: threads kept in this process, for tests and notebooks, and the
store `compile()` gives an app that brings none (bounded: least recently used threads go)."""

from __future__ import annotations

import bisect
import itertools
import json
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tenxgraph.core.exceptions import ResourceNotFoundError, StaleStateError, StorageError
from tenxgraph.core.redaction import get_logger
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer._listing import (
    DEFAULT_PAGE_SIZE,
    check_offset_and_limit,
    check_page_limit,
    decode_cursor,
    encode_cursor,
)
from tenxgraph.storage.checkpointer._sql import (
    check_restore,
    encode_tool_result,
    no_thread_error,
    stale_error,
)
from tenxgraph.storage.checkpointer.base import (
    BaseCheckpointer,
    CheckpointInfo,
    S,
    ThreadPage,
    ThreadSnapshot,
    ThreadSummary,
    Version,
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

logger = get_logger(__name__)

#: the bounds of the store `StateGraph.compile()` gives an app compiled without a checkpointer
DEFAULT_MAX_THREADS = 1_000
DEFAULT_MAX_BYTES = 64 * 1024 * 1024

# what a kept version or message row costs beyond its JSON text (the objects holding it), as
# counted against `max_bytes`
_ROW_OVERHEAD = 100


@dataclass(slots=True)
class _Version:
    version: int
    header: str
    message_count: int
    generation: int
    log_start: int  # where its messages start in the thread's `messages`
    step: int
    status: str
    node: str | None
    created_at: float


_INCARNATIONS = itertools.count(1)


@dataclass(slots=True)
class _Thread:
    versions: list[_Version] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    generation: int = 0
    oldest_generation: int = 0  # the generation of the last rewrite: older ones cannot load
    log_start: int = 0  # where the head's messages start in `messages` (moved by a restore)
    lease_owner: str | None = None
    lease_expires: float = 0.0
    size: int = 0  # what it counts against `max_bytes`: its JSON text plus row overheads
    # what tells it from a thread deleted before it under the same id (`Version`)
    incarnation: int = field(default_factory=lambda: next(_INCARNATIONS))

    def holder(self, now: float) -> str | None:
        """The owner of the live lease, if any."""
        return self.lease_owner if self.lease_expires > now else None

    @property
    def version(self) -> int:
        return Version(self.versions[-1].version, self.incarnation)


class InMemoryCheckpointer(BaseCheckpointer):
    """Stores JSON copies, never references: changing a state you got back (or one you saved)
    never changes what is stored. Each instance is its own store.

    Unbounded unless given a bound: with `max_threads` (a number of threads) and/or
    `max_bytes` (the JSON text kept, in characters, plus about 100 per stored version, message
    row and ledger entry), a save that takes the store past a bound drops the least recently
    used threads (read or written last the longest ago) until it is within it again; a thread
    a run holds (its lease) is never dropped, nor the one being saved. A dropped thread is
    gone, as if deleted: its state, history, pause and tool ledger. The first drop logs a
    warning. `compile()` without a checkpointer gives the app one bounded at 1,000 threads
    and 64 MiB."""

    def __init__(
        self,
        *,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        max_threads: int | None = None,
        max_bytes: int | None = None,
    ) -> None:
        super().__init__()
        self.lease_ttl = check_ttl(lease_ttl)
        self.max_threads = _bound("max_threads", max_threads)
        self.max_bytes = _bound("max_bytes", max_bytes)
        self._threads: dict[str, _Thread] = {}
        # (created_at, thread_id) of every thread, sorted: the listing order
        self._order: list[tuple[float, str]] = []
        self._stop_requests: set[str] = set()
        self._ledger: dict[tuple[str, str, str], str] = {}
        self._ledger_keys: dict[str, list[tuple[str, str, str]]] = {}  # by thread
        # least recently used first; kept only when bounded
        self._recent: OrderedDict[str, None] | None = (
            None if self.max_threads is None and self.max_bytes is None else OrderedDict()
        )
        self._bytes = 0  # the sum of the threads' `size` (counted only under `max_bytes`)
        self._dropped = 0  # threads dropped to stay within the bounds, so far

    def _touch(self, thread_id: str) -> None:
        """`thread_id` was just used: the last to be dropped."""
        recent = self._recent
        if recent is not None:
            try:
                recent.move_to_end(thread_id)
            except KeyError:  # a new thread
                recent[thread_id] = None

    async def aversion(self, thread_id: str) -> int | None:
        thread = self._threads.get(thread_id)
        if thread is None:
            return None
        self._touch(thread_id)
        return thread.version

    async def aload(
        self, thread_id: str, state_type: type[S], version: int | None = None
    ) -> ThreadSnapshot[S] | None:
        thread = self._threads.get(thread_id)
        if thread is None:
            return None
        self._touch(thread_id)
        saved = thread.versions[-1] if version is None else _find(thread, thread_id, version)
        start = saved.log_start
        rows = thread.messages[start : start + saved.message_count]
        state = decode_state(state_type, thread_id, saved.header, rows)
        return ThreadSnapshot(thread_id, Version(saved.version, thread.incarnation), state)

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
        if self.max_bytes is not None:
            self._count(thread, header, encoded, thread.messages if rewrite else ())
        if rewrite:
            thread.messages = encoded
            thread.generation += 1
            thread.oldest_generation, thread.log_start = thread.generation, 0
        else:
            thread.messages.extend(encoded)
        step, status, node = checkpoint_fields(state)
        version = (current or 0) + 1
        thread.versions.append(
            _Version(
                version,
                header,
                len(thread.messages) - thread.log_start,
                thread.generation,
                thread.log_start,
                step,
                status,
                node,
                time.time(),
            )
        )
        if current is None:
            bisect.insort(self._order, (thread.versions[0].created_at, thread_id))
        if self._recent is not None:
            self._touch(thread_id)
            self._keep_within_bounds(thread_id)
        return Version(version, thread.incarnation)

    async def arestore(
        self,
        thread_id: str,
        version: int | None,
        *,
        expected_version: int,
        empty: AgentState | None = None,
    ) -> int:
        check_restore(thread_id, version, empty)
        thread = self._threads.get(thread_id)
        if thread is None:
            raise no_thread_error(thread_id)
        now = time.time()
        holder = thread.holder(now)
        if holder is not None:
            raise busy_error(thread_id, holder, thread.lease_expires - now)
        if thread.version != expected_version:
            raise stale_error(thread_id, expected_version, thread.version)
        if version is None:
            assert empty is not None
            header, rows = encode_header(empty, thread_id), []
            step, status, node = checkpoint_fields(empty)
        else:
            saved = _find(thread, thread_id, version)
            header, step, status, node = saved.header, saved.step, saved.status, saved.node
            rows = thread.messages[saved.log_start : saved.log_start + saved.message_count]
        if self.max_bytes is not None:
            self._count(thread, header, rows, ())
        thread.generation += 1  # a lazy history of the head before reads nothing of this one
        thread.log_start = len(thread.messages)
        thread.messages.extend(rows)
        thread.lease_owner, thread.lease_expires = None, 0.0
        restored = thread.version + 1
        start, generation = thread.log_start, thread.generation
        thread.versions.append(
            _Version(restored, header, len(rows), generation, start, step, status, node, now)
        )
        if self._recent is not None:
            self._touch(thread_id)
            self._keep_within_bounds(thread_id)
        return restored

    # -- the bounds ------------------------------------------------------------------------

    def _count(
        self, thread: _Thread, header: str, added: list[str], removed: Sequence[str]
    ) -> None:
        """Count a save's new version and rows against `max_bytes` (and rows it replaces)."""
        change = len(header) + _ROW_OVERHEAD
        for row in added:
            change += len(row) + _ROW_OVERHEAD
        for row in removed:
            change -= len(row) + _ROW_OVERHEAD
        thread.size += change
        self._bytes += change

    def _over(self, threads: int, size: int) -> bool:
        return (self.max_threads is not None and threads > self.max_threads) or (
            self.max_bytes is not None and size > self.max_bytes
        )

    def _keep_within_bounds(self, saved: str) -> None:
        """Drop the least recently used threads until the store is within its bounds; never
        `saved` (the thread just written) nor a thread whose lease is live."""
        threads, size = len(self._threads), self._bytes
        if not self._over(threads, size):
            return
        assert self._recent is not None
        now = time.time()
        victims = []
        for thread_id in self._recent:  # least recently used first
            if not self._over(threads, size):
                break
            thread = self._threads.get(thread_id)
            if thread_id == saved or thread is None or thread.holder(now) is not None:
                continue
            victims.append(thread_id)
            threads -= 1
            size -= thread.size
        release = getattr(self.media_store, "release_thread_now", None)  # in-memory media
        for thread_id in victims:
            self._drop(thread_id)
            if release is not None:
                release(thread_id)
        if victims and not self._dropped:
            logger.warning(
                "InMemoryCheckpointer (max_threads=%s, max_bytes=%s) is full and drops its "
                "least recently used threads, starting with %r: their state is gone. Compile "
                "the app with SqliteCheckpointer(path) to keep every thread, or give this "
                "store larger bounds",
                self.max_threads,
                self.max_bytes,
                victims[0],
            )
        self._dropped += len(victims)

    def _drop(self, thread_id: str) -> bool:
        """Forget the thread: its versions, messages, stop request and ledger."""
        self._stop_requests.discard(thread_id)
        for key in self._ledger_keys.pop(thread_id, ()):
            self._ledger.pop(key, None)
        if self._recent is not None:
            self._recent.pop(thread_id, None)
        thread = self._threads.pop(thread_id, None)
        if thread is None:
            return False
        del self._order[bisect.bisect_left(self._order, (thread.versions[0].created_at, thread_id))]
        self._bytes -= thread.size
        return True

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
        self._touch(thread_id)
        rows = thread.versions[::-1][:limit]
        return [
            CheckpointInfo(
                thread_id, v.version, v.step, v.status, v.node, v.message_count, v.created_at
            )
            for v in rows
        ]

    async def adelete_thread(self, thread_id: str) -> bool:
        return self._drop(thread_id)

    async def alist_threads(self, *, offset: int = 0, limit: int | None = None) -> list[str]:
        offset, limit = check_offset_and_limit(offset, limit)
        rows = self._order[offset : None if limit is None else offset + limit]
        return [thread_id for _, thread_id in rows]

    async def alist_thread_page(
        self, *, after: str | None = None, limit: int = DEFAULT_PAGE_SIZE
    ) -> ThreadPage:
        limit = check_page_limit(limit)
        start = 0 if after is None else bisect.bisect_right(self._order, decode_cursor(after))
        rows = self._order[start : start + limit + 1]  # one more: is there a next page?
        threads = []
        for created_at, thread_id in rows[:limit]:
            thread = self._threads[thread_id]
            latest = thread.versions[-1]
            threads.append(
                ThreadSummary(
                    thread_id,
                    latest.version,
                    created_at,
                    latest.created_at,
                    latest.step,
                    latest.status,
                    latest.node,
                    latest.message_count,
                )
            )
        more = len(rows) > limit
        return ThreadPage(threads, encode_cursor(*rows[limit - 1]) if more else None)

    async def aput_tool_result(
        self, thread_id: str, message_id: str, call_id: str, result: dict[str, Any]
    ) -> bool:
        key = (thread_id, message_id, call_id)
        if key in self._ledger:
            return False
        encoded = self._ledger[key] = encode_tool_result(result)
        self._ledger_keys.setdefault(thread_id, []).append(key)
        thread = self._threads.get(thread_id)
        if self.max_bytes is not None and thread is not None:
            thread.size += len(encoded) + _ROW_OVERHEAD
            self._bytes += len(encoded) + _ROW_OVERHEAD
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


class DefaultCheckpointer(InMemoryCheckpointer):
    """The store of an app compiled without a checkpointer (see `default_checkpointer`). A
    class of its own so that a host with a better default (the `tenxgraph` command keeps
    threads in SQLite) can tell it from a store the app chose. It cannot outlive the process,
    so a run saves to it when it starts, pauses, fails and ends, not after every step."""

    saves_every_step = False


def default_checkpointer() -> DefaultCheckpointer:
    """A new store for an app compiled without one: in memory, at most 1,000 threads and
    about 64 MiB of them, the least recently used dropped first. Enough for a notebook, a test
    or a small service, and never an unbounded leak in a long-running one."""
    return DefaultCheckpointer(max_threads=DEFAULT_MAX_THREADS, max_bytes=DEFAULT_MAX_BYTES)


def _bound(name: str, value: int | None) -> int | None:
    if value is not None and (type(value) is not int or value < 1):
        raise ValueError(f"InMemoryCheckpointer({name}=...) must be a positive int or None")
    return value


def _find(thread: _Thread, thread_id: str, version: int) -> _Version:
    for saved in thread.versions:
        if saved.version == version:
            if saved.generation < thread.oldest_generation:
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


__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_THREADS",
    "DefaultCheckpointer",
    "InMemoryCheckpointer",
    "default_checkpointer",
]
