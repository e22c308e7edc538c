"""`BaseCheckpointer`: the one interface every thread store implements.

A thread is stored as a small *header* (every state field except `context`, as JSON) plus an
append-only *message log*. Each save adds the messages of one step and replaces the header, so
its cost depends on what changed, never on the length of the history. Saves are versioned: a
writer that loaded version N may only write N+1 (compare-and-swap), otherwise it gets
`StaleStateError` and nothing is written.

Every store checks what it is given before it writes or reads anything: the thread id
(`valid_thread_id`), and that what a save writes reads back equal (`_codec`, `_storable`):
otherwise `ValueError` or `SerializationError`, naming the field, and nothing is written.
"""

from __future__ import annotations

import functools
import inspect
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from tenxgraph.core.exceptions import SerializationError
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer._codec import (
    decode_messages,
    decode_state,
    encode_header,
    encode_message,
)
from tenxgraph.storage.checkpointer._listing import (
    DEFAULT_PAGE_SIZE,
    check_page_limit,
    encode_cursor,
)
from tenxgraph.storage.checkpointer._storable import (
    format_path,
    message_problem,
)
from tenxgraph.storage.checkpointer.lease import DEFAULT_LEASE_TTL, Lease, LeaseHolder
from tenxgraph.storage.checkpointer.thread_ids import (
    THREAD_ID_MAX_LENGTH,
    thread_id_of,
    valid_thread_id,
)
from tenxgraph.storage.checkpointer.versions import Version, same_version

S = TypeVar("S", bound=AgentState)


@dataclass(frozen=True, slots=True)
class ThreadSnapshot(Generic[S]):
    """A thread as loaded: its state and the version it was read at."""

    thread_id: str
    version: int
    state: S


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    """One saved version of a thread, as listed by `ahistory`."""

    thread_id: str
    version: int
    step: int
    status: str
    node: str | None
    message_count: int
    created_at: float


class ThreadSummary(NamedTuple):
    """One thread as `alist_thread_page` lists it: its id, when it was created, and its
    latest saved version (when it was saved, and the step, status, node and message count
    stored with it). A named tuple: immutable, and made straight from a listing's row."""

    thread_id: str
    version: int
    created_at: float
    updated_at: float
    step: int
    status: str
    node: str | None
    message_count: int


@dataclass(frozen=True, slots=True)
class ThreadPage:
    """One page of `alist_thread_page`: its threads, oldest first, and the cursor that asks
    for the next page (`after=page.next_cursor`), or None when this page is the last."""

    threads: list[ThreadSummary]
    next_cursor: str | None


def thread_page(rows: Sequence[Sequence[Any]], limit: int) -> ThreadPage:
    """The page of a SQL listing query's rows: up to `limit` + 1 rows of (thread_id, version,
    created_at, and the latest checkpoint's created_at, step, status, node, message_count),
    the extra row only telling that there is a next page. A thread whose latest checkpoint
    row is missing (a damaged database) raises `SerializationError` naming it."""
    make = ThreadSummary._make  # the columns' types are the fields' (all NOT NULL but node)
    threads = [make(row) for row in rows[:limit]]
    for summary in threads:
        if summary.status is None:  # no checkpoint row joined
            raise SerializationError(
                f"Thread {summary.thread_id!r}: the checkpoint of its version "
                f"{summary.version} is missing",
                context={"thread_id": summary.thread_id, "field": "version"},
            )
    if len(rows) <= limit:
        return ThreadPage(threads, None)
    last = threads[-1]
    return ThreadPage(threads, encode_cursor(last.created_at, last.thread_id))


def checkpoint_fields(state: AgentState) -> tuple[int, str, str | None]:
    """(step, status, current node) of a state, stored beside each version for listings."""
    meta = state.execution_meta
    return meta.step, str(meta.status.value), meta.current_node


def check_messages(thread_id: str, messages: Iterable[Message]) -> None:
    """Refuse, before anything is written, a message whose stored JSON would not read back
    equal (`SerializationError` naming the message and the field). Walks each message's
    loosely typed slots (metadata, raw, tool arguments and outputs) and checks its floats."""
    for message in messages:
        problem = message_problem(message) if isinstance(message, Message) else None
        if problem is not None:
            field = format_path(problem.path)
            raise SerializationError(
                f"Thread {thread_id!r}: cannot store message {message.message_id!r}: field "
                f"{field!r}: {problem.reason}. Nothing was written.",
                context={"thread_id": thread_id, "message_id": message.message_id, "field": field},
            )


# The methods of a store that take a thread id first; `__init_subclass__` wraps each one a
# store defines so that the id is checked (and, for `asave`, the new messages) before the
# store's own code runs.
_THREAD_METHODS = frozenset(
    {
        "aversion",
        "aload",
        "aload_recent",
        "arestore",
        "aread_log",
        "afind_ids",
        "asystem_messages",
        "asave",
        "ahistory",
        "adelete_thread",
        "aput_tool_result",
        "aget_tool_result",
        "arequest_stop",
        "ais_stop_requested",
        "aclear_stop_request",
        "arenew_lease",
        "arelease_lease",
        "alease_holder",
    }
)
_CHECKED: set[Callable[..., Any]] = set()


def _checked(
    method: Callable[..., Awaitable[Any]], saves: bool, deletes: bool = False
) -> Callable[..., Any]:
    """`method`, checking its thread id (and for `asave` the new messages) first. A plain
    function returning the method's coroutine, not a coroutine of its own: no extra frame on
    every call; a bad id raises when the method is called."""

    @functools.wraps(method)
    def checked(self: BaseCheckpointer, thread_id: Any, *args: Any, **kwargs: Any) -> Any:
        if not _plainly_valid(thread_id):
            thread_id = valid_thread_id(thread_id)
        return method(self, thread_id, *args, **kwargs)

    @functools.wraps(method)
    def checked_save(self: BaseCheckpointer, thread_id: Any, *args: Any, **kwargs: Any) -> Any:
        if not _plainly_valid(thread_id):
            thread_id = valid_thread_id(thread_id)
        for message in kwargs.get("new_messages", ()):
            if message_problem(message) is not None:
                check_messages(thread_id, [message])  # raises, naming the field
        return method(self, thread_id, *args, **kwargs)

    @functools.wraps(method)
    async def checked_delete(self: BaseCheckpointer, thread_id: Any) -> Any:
        thread_id = valid_thread_id(thread_id)
        existed = await method(self, thread_id)
        media = self.media_store
        if media is not None:  # the thread's media no other thread names goes with it
            await media.arelease_thread(thread_id)
        return existed

    if deletes:
        _CHECKED.add(checked_delete)
        return checked_delete
    marked: Callable[..., Any] = _as_coroutine_function(checked_save if saves else checked)
    _CHECKED.add(marked)
    return marked


def _plainly_valid(thread_id: Any) -> bool:
    """The usual thread id, accepted at a glance; anything else goes to `valid_thread_id`."""
    return (
        type(thread_id) is str
        and 0 < len(thread_id) <= THREAD_ID_MAX_LENGTH
        and thread_id.isprintable()
    )


def _as_coroutine_function(function: Callable[..., Any]) -> Callable[..., Any]:
    """`function`, marked so that `inspect.iscoroutinefunction` sees what it returns
    (Python 3.12+; 3.11 has no such mark)."""
    mark = getattr(inspect, "markcoroutinefunction", None)
    return function if mark is None else mark(function)


class BaseCheckpointer(ABC):
    """Keeps threads: a versioned state header plus an append-only message log per thread,
    and each thread's lease (which run owns it; see `tenxgraph.storage.checkpointer.lease`).
    """

    #: seconds a run's lease lasts past its last save or heartbeat (built-in stores take it as
    #: `lease_ttl=`): how long a thread stays blocked after its owner's process died
    lease_ttl: float = DEFAULT_LEASE_TTL

    #: whether a run saves after every step (a crash loses at most the running step), or only
    #: when it starts, pauses, fails and ends: for a store that cannot outlive the process
    #: anyway (the default in-memory one), where the saves between would only cost time
    saves_every_step: bool = True

    #: whether a save that takes the thread's lease (a run's first save: the thread was not
    #: its own) also deletes the thread's stop requests in the same write: they were asked of
    #: no run, or of another one, never of the run now taking the thread. Otherwise the
    #: engine looks for one after that save, and clears it (two more calls)
    lease_clears_stop_requests: bool = False

    #: the `tenxgraph.storage.media.MediaStore` holding the media of this store's threads
    #: (set by `compile`, see `tenxgraph.storage.media.defaults`): `adelete_thread` releases
    #: the deleted thread's media there (`MediaStore.arelease_thread`). None: no media store
    media_store: Any = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A store's methods that take a thread id check it first (`valid_thread_id`), and its
        `asave` checks the new messages (`check_messages`), before the store's own code runs:
        a bad id or value is refused the same way by every store, before anything is written."""
        super().__init_subclass__(**kwargs)
        for name in _THREAD_METHODS.intersection(vars(cls)):
            method = vars(cls)[name]
            if callable(method) and method not in _CHECKED:
                setattr(
                    cls,
                    name,
                    _checked(method, saves=name == "asave", deletes=name == "adelete_thread"),
                )

    def __init__(self) -> None:
        self.state_type: type[AgentState] = AgentState

    def bind_state_type(self, state_type: type[AgentState]) -> None:
        """The state class `aget_state` validates stored data against by default."""
        self.state_type = state_type

    # -- lifecycle -------------------------------------------------------------------------

    async def asetup(self) -> None:  # noqa: B027 - optional hook
        """Create tables, pools or files. Safe to call more than once."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections and files."""

    async def aclose_loop(self) -> None:  # noqa: B027 - optional hook
        """Release what this store opened for the running event loop only (stores that keep
        a connection or pool per loop)."""

    # -- threads ---------------------------------------------------------------------------

    @abstractmethod
    async def aversion(self, thread_id: str) -> int | None:
        """The current version of a thread, or None if it does not exist. Cheap."""

    @abstractmethod
    async def aload(
        self, thread_id: str, state_type: type[S], version: int | None = None
    ) -> ThreadSnapshot[S] | None:
        """The thread's state at `version` (default: the latest), or None if the thread does
        not exist. An unknown version raises `ResourceNotFoundError`; a version from before a
        history rewrite (`asave(..., rewrite=True)`) raises `StorageError`."""

    @abstractmethod
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
        """Append `new_messages` and replace the header, if the thread is still at
        `expected_version` (None: the thread must not exist yet). Returns the new version;
        raises `StaleStateError` otherwise. With `rewrite=True`, `new_messages` is the whole
        history and replaces the stored log (only when a context reducer rewrote history).

        Leases: while another owner's lease on the thread is live, the save raises
        `ThreadBusyError` and writes nothing (checked before the version). With `lease`, the
        save takes or extends that lease (`lease.ttl` from now), or releases it when
        `release` is true; without one, it leaves the thread unleased. (A run whose lease
        expired and was taken over gets `ThreadBusyError` here; the engine reports it as
        `LeaseLostError`.)"""

    async def arestore(
        self,
        thread_id: str,
        version: int | None,
        *,
        expected_version: int,
        empty: AgentState | None = None,
    ) -> int:
        """Make the thread's state at `version` its state again, as a new version: that
        version's header and messages, copied to the end of the stored log. Nothing is
        rewritten or deleted: every earlier version still loads, the ones after `version`
        too (a rolled-back run's steps stay in the history). `version=None`: a new version
        with `empty`'s header and no messages (the thread as it was before it had state).

        Refused like `asave`, before anything is written: `ThreadBusyError` while another
        run's lease is live, `StaleStateError` unless the thread is at `expected_version`;
        `ResourceNotFoundError` for an unknown thread or version, `StorageError` for a
        version from before a history rewrite. The new version holds no lease. Returns it."""
        raise NotImplementedError(f"{type(self).__name__} does not implement arestore")

    # -- lazy histories: a thread loaded with its recent messages only ----------------------

    async def aload_recent(
        self,
        thread_id: str,
        state_type: type[S],
        keep: int,
        look_up: Collection[str | int] = (),
    ) -> ThreadSnapshot[S] | None:
        """The thread's latest state with only its last `keep` messages read; the others stay
        in the store until code reads them (the state's `context` is then a `LazyHistory`).
        `look_up`: ids of messages about to be merged into it (a turn's input); a store may
        find out in the same read which of them its log holds, so that the merge needs no
        query of its own. The default reads every message (`aload`); a store that pages
        overrides this."""
        return await self.aload(thread_id, state_type)

    async def aread_log(
        self,
        thread_id: str,
        state_type: type[AgentState],
        generation: int,
        start: int,
        stop: int,
        *,
        incarnation: int | None = None,
    ) -> list[Message]:
        """Messages `start` to `stop` of the thread's log as it was at `generation` (sealed);
        `StorageError` if the log was rewritten or deleted since. For lazy histories.
        `incarnation`: what the store said identifies the thread when the history was read
        (a thread deleted and made again under the same id starts at generation 0 again, and
        is another); None checks the generation only. The same in the two methods below."""
        raise NotImplementedError(f"{type(self).__name__} does not page histories")

    async def asystem_messages(
        self,
        thread_id: str,
        state_type: type[AgentState],
        generation: int,
        start: int,
        stop: int,
        *,
        incarnation: int | None = None,
    ) -> list[tuple[int, Message]]:
        """The system messages among positions `start` to `stop` of the thread's log, with
        their positions (sealed), found without reading the others."""
        raise NotImplementedError(f"{type(self).__name__} does not page histories")

    async def afind_ids(
        self,
        thread_id: str,
        generation: int,
        ids: list[str | int],
        below: int,
        *,
        incarnation: int | None = None,
    ) -> set[str]:
        """Which of `ids` (as text) the thread's log holds before position `below`."""
        raise NotImplementedError(f"{type(self).__name__} does not page histories")

    # -- leases: a run owns its thread from its first save to its last ---------------------

    @abstractmethod
    async def arenew_lease(self, thread_id: str, lease: Lease) -> bool:
        """Extend `lease` by `lease.ttl` from now if its owner still holds it, expired or not,
        as long as no other run took it (the heartbeat of a long step). False if the lease
        was taken over or released."""

    @abstractmethod
    async def arelease_lease(self, thread_id: str, owner: str) -> None:
        """Release the thread's lease if `owner` holds it; otherwise do nothing."""

    @abstractmethod
    async def alease_holder(self, thread_id: str) -> LeaseHolder | None:
        """The owner of the thread's live lease and its remaining seconds, or None."""

    @abstractmethod
    async def ahistory(self, thread_id: str, *, limit: int | None = None) -> list[CheckpointInfo]:
        """The saved versions of a thread, newest first (empty for an unknown thread)."""

    @abstractmethod
    async def adelete_thread(self, thread_id: str) -> bool:
        """Delete a thread; True if it existed."""

    @abstractmethod
    async def alist_threads(self, *, offset: int = 0, limit: int | None = None) -> list[str]:
        """Thread ids, oldest first (by creation time, then id), skipping `offset` of them
        and returning at most `limit` (None: all). A negative `offset` or `limit` raises
        `ValueError`. OFFSET paging reads past every skipped thread: to walk many threads,
        use `alist_thread_page` (or `aiter_threads`), whose cost per page does not grow."""

    async def alist_thread_page(
        self, *, after: str | None = None, limit: int = DEFAULT_PAGE_SIZE
    ) -> ThreadPage:
        """A page of at most `limit` threads with their latest version's summary, oldest
        first (by creation time, then thread id), starting after the cursor `after` (None:
        from the first thread). Pass the page's `next_cursor` as `after` for the next page;
        it is None on the last page. A cursor is opaque text, valid on any instance of the
        same store, and stays valid when threads are added or deleted (the one it names
        included); threads created while you page come at the end. The built-in stores read a
        page in one query, an index seek (keyset paging), so every page costs the same however
        far in it is.

        `ValueError` if `limit` is not a positive int or `after` is not a cursor. A store
        that does not implement it raises `NotImplementedError`."""
        raise NotImplementedError(
            f"{type(self).__name__} does not implement alist_thread_page (thread listing)"
        )

    async def aiter_threads(
        self, *, page_size: int = DEFAULT_PAGE_SIZE
    ) -> AsyncIterator[ThreadSummary]:
        """Every thread's summary, oldest first, read `page_size` at a time with
        `alist_thread_page` (one query per page in the built-in stores)."""
        check_page_limit(page_size)
        cursor: str | None = None
        while True:
            page = await self.alist_thread_page(after=cursor, limit=page_size)
            for summary in page.threads:
                yield summary
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    # -- tool ledger: a finished tool call is recorded once and replayed, never re-run --------

    @abstractmethod
    async def aput_tool_result(
        self, thread_id: str, message_id: str, call_id: str, result: dict[str, Any]
    ) -> bool:
        """Record the result of tool call `call_id` of assistant message `message_id`. The
        first record wins: returns False (and keeps the old one) if there already is one."""

    @abstractmethod
    async def aget_tool_result(
        self, thread_id: str, message_id: str, call_id: str
    ) -> dict[str, Any] | None:
        """The recorded result of a tool call, or None."""

    # -- stop requests (one process asks a run in another to stop) -------------------------

    @abstractmethod
    async def arequest_stop(self, thread_id: str) -> None: ...

    @abstractmethod
    async def ais_stop_requested(self, thread_id: str) -> bool: ...

    @abstractmethod
    async def aclear_stop_request(self, thread_id: str) -> None: ...

    # -- conveniences ----------------------------------------------------------------------

    async def aget_state(
        self, config: dict[str, Any], state_type: type[AgentState] | None = None
    ) -> AgentState | None:
        """The stored state of `config["thread_id"]` (a fresh copy), or None."""
        snapshot = await self.aload(thread_id_of(config), state_type or self.state_type)
        return None if snapshot is None else snapshot.state


__all__ = [
    "THREAD_ID_MAX_LENGTH",
    "BaseCheckpointer",
    "CheckpointInfo",
    "ThreadPage",
    "ThreadSnapshot",
    "ThreadSummary",
    "Version",
    "check_messages",
    "checkpoint_fields",
    "decode_messages",
    "decode_state",
    "encode_header",
    "encode_message",
    "same_version",
    "thread_id_of",
    "thread_page",
    "valid_thread_id",
]
