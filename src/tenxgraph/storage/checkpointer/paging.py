"""Lazy histories over a store: what a thread loaded with its last messages only fetches later.

`LogPager` is the `Pager` of a `LazyHistory` built by a store's `aload_recent`: it holds the
rows read with the thread (their text, each decoded when first read) and reads the rest of the
thread's stored log (positions below `stored`, written once and never changed) for synchronous
code, on the process's read loop, through the store's own `aread_log` and `afind_ids`.
"""

from __future__ import annotations

import weakref
from collections.abc import Collection, Coroutine, Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state.lazy_history import LazyHistory
from tenxgraph.core.state.message import id_mark, made_after
from tenxgraph.core.state.sealed import seal
from tenxgraph.utils.sync_bridge import read_blocking

S = TypeVar("S", bound=AgentState)
T = TypeVar("T")

if TYPE_CHECKING:
    from tenxgraph.storage.checkpointer._codec import Listed
    from tenxgraph.storage.checkpointer.base import BaseCheckpointer

#: messages a thread is loaded with (the recent ones); older ones are fetched when read
RECENT_MESSAGES = 64
# how a stored system message's JSON names its role (the encoder writes compact JSON); the
# stores index the rows that contain it, and check each row found by decoding it
SYSTEM_MARK = '"role":"system"'
_IDS_KEPT = 10_000  # ids remembered as (not) in a thread's log, at most


class LogPager:
    """Reads one thread's stored log, as it was at `generation`, up to `stored` messages;
    `incarnation`: what identifies the thread in its store (see `BaseCheckpointer.aread_log`)."""

    __slots__ = (
        "absent",
        "born",
        "first",
        "generation",
        "incarnation",
        "present",
        "raw",
        "recent",
        "state_type",
        "store",
        "stored",
        "thread_id",
    )

    def __init__(
        self,
        store: BaseCheckpointer,
        thread_id: str,
        state_type: type[AgentState],
        generation: int,
        stored: int,
        recent: Sequence[str] = (),
        incarnation: int | None = None,
    ) -> None:
        self.store = store
        self.incarnation = incarnation
        self.thread_id = thread_id
        self.state_type = state_type
        self.generation = generation
        self.stored = stored
        # the log's last rows, read with the thread: each one's text until it is first asked
        # for, then its message (a turn reads few of them; decoding costs more than reading)
        self.recent: list[str | Message] = list(recent)
        self.first = stored - len(self.recent)  # the position of the first of them
        self.raw = len(self.recent)  # how many of them are text still
        self.absent: set[str | int] = set()  # ids looked up and not in the log
        self.present: set[str | int] = set()  # ids looked up and found
        # ids generated after this point are not in the log, which was read before it
        self.born = id_mark()

    def _blocking(self, read: Coroutine[Any, Any, T]) -> T:
        """`read` (a coroutine of the store) run on the read loop, waited for."""
        return read_blocking(_Release.of(self.store), read)

    def read(self, start: int, stop: int) -> list[Message]:
        return self._blocking(
            self.store.aread_log(
                self.thread_id,
                self.state_type,
                self.generation,
                start,
                stop,
                incarnation=self.incarnation,
            )
        )

    def take(self, start: int, stop: int) -> list[tuple[int, Message]]:
        low, high = max(start, self.first), min(stop, self.stored)
        return [(position, self._recent(position)) for position in range(low, high)]

    def _recent(self, position: int) -> Message:
        """One of the recent messages, decoded (and sealed) the first time it is asked for."""
        item = self.recent[position - self.first]
        if isinstance(item, str):
            from tenxgraph.storage.checkpointer._codec import decode_messages  # (loaded by then)

            item = decode_messages(self.state_type, self.thread_id, [item], position)[0]
            seal(item)
            self.recent[position - self.first] = item
            self.raw -= 1
        return item

    def held(self) -> int:
        return self.raw

    def stored_ids(self, ids: Collection[str | int]) -> set[str | int]:
        wanted = self._unknown(ids)
        if wanted:
            found = self._blocking(self._afind_ids(wanted))
            self.learn(wanted, found)
        present = self.present
        return {i for i in ids if i in present}

    def system_messages(self, start: int, stop: int) -> list[tuple[int, Message]]:
        stop = min(stop, self.stored)
        older = min(stop, self.first)  # positions below it are in the store only
        found = []
        if start < older:
            found = self._blocking(
                self.store.asystem_messages(
                    self.thread_id,
                    self.state_type,
                    self.generation,
                    start,
                    older,
                    incarnation=self.incarnation,
                )
            )
        for position in range(max(start, self.first), stop):
            item = self.recent[position - self.first]
            if isinstance(item, str) and SYSTEM_MARK not in item:
                continue  # (the test the stores' index makes; a match is then decoded)
            message = self._recent(position)
            if message.role == "system":
                found.append((position, message))
        return found

    async def alook_up(self, ids: Collection[str | int]) -> None:
        """Find out, from async code, which of `ids` the log holds, so that a later merge of
        messages with these ids needs no blocking read."""
        wanted = self._unknown(ids)
        if wanted:
            found = await self._afind_ids(wanted)
            self.learn(wanted, found)

    def _afind_ids(self, wanted: list[str | int]) -> Coroutine[Any, Any, set[str]]:
        return self.store.afind_ids(
            self.thread_id, self.generation, wanted, self.stored, incarnation=self.incarnation
        )

    def _unknown(self, ids: Collection[str | int]) -> list[str | int]:
        absent, present, born = self.absent, self.present, self.born
        return [i for i in ids if i not in absent and i not in present and not made_after(i, born)]

    def learn(self, wanted: list[str | int], found: set[str]) -> None:
        """Remember which of `wanted` the log holds (`found`, as text)."""
        # the log below `stored` never changes: what is (not) in it now, always will (not) be
        if len(self.absent) + len(self.present) > _IDS_KEPT:
            self.absent.clear()
            self.present.clear()
        for i in wanted:
            (self.present if str(i) in found else self.absent).add(i)


class _Release:
    """Closes what a store opened on the read loop (its connection there), at exit."""

    _made: ClassVar[weakref.WeakKeyDictionary[BaseCheckpointer, _Release]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, store: BaseCheckpointer) -> None:
        self.store = weakref.ref(store)

    @classmethod
    def of(cls, store: BaseCheckpointer) -> _Release:
        found = cls._made.get(store)
        if found is None:
            found = cls._made[store] = cls(store)
        return found

    async def aclose(self) -> None:
        store = self.store()
        if store is not None:
            await store.aclose_loop()


async def alook_up_ids(history: list[Message], messages: Iterable[Message]) -> None:
    """For a lazy history over a store: look up, without blocking, which of these messages'
    ids its stored part already holds (a merge skips those), before they are merged."""
    pager = getattr(history, "_pager", None)
    if isinstance(pager, LogPager):
        await pager.alook_up([m.message_id for m in messages])


def system_rows(
    state_type: type[AgentState], thread_id: str, rows: Sequence[Sequence[Any]]
) -> list[tuple[int, Message]]:
    """(position, message) of the rows (seq, body) holding a system message, sealed; a row
    that only mentions the role elsewhere (in a metadata key, say) is left out."""
    from tenxgraph.storage.checkpointer._codec import decode_messages, stored_text

    found = []
    for row in rows:
        seq = int(row[0])
        body = stored_text(thread_id, f"context.{seq}", row[1])
        message = decode_messages(state_type, thread_id, [body], seq)[0]
        if message.role == "system":
            seal(message)
            found.append((seq, message))
    return found


def sealed(messages: list[Message]) -> list[Message]:
    """`messages`, each sealed: what a store gives a lazy history is the thread's."""
    for message in messages:
        seal(message)
    return messages


def recent_state(
    store: BaseCheckpointer,
    state_type: type[S],
    thread_id: str,
    header: str,
    bodies: list[str],
    generation: int,
    stored: int,
    known: tuple[list[str | int], set[str]] | None = None,
    listed: Listed | None = None,
    incarnation: int | None = None,
) -> S:
    """A thread's state read with its stored header and its last rows only (`bodies`, the
    log's last positions up to `stored`). When they are the whole log they are decoded now;
    else the state's `context` is a lazy history over the log whose messages, these included,
    are decoded when first read. `known`: ids looked up in the same read as the state, and
    those of them the log holds; `listed`: the step, status and node of the header's
    checkpoint row (see `decode_state`); `incarnation`: what identifies the thread in its
    store (see `BaseCheckpointer.aread_log`)."""
    # (the stores' codec, imported by the stores: not by a graph that only runs)
    from tenxgraph.storage.checkpointer._codec import decode_state

    first = stored - len(bodies)
    if first <= 0:
        state = decode_state(state_type, thread_id, header, bodies, listed=listed)
        sealed(state.context)
        return state
    state = decode_state(state_type, thread_id, header, [], first, listed)
    pager = LogPager(store, thread_id, state_type, generation, stored, bodies, incarnation)
    if known is not None and known[0]:
        pager.learn(*known)
    state.__dict__["context"] = LazyHistory.of(pager, stored, [])
    return state


__all__ = [
    "RECENT_MESSAGES",
    "SYSTEM_MARK",
    "LogPager",
    "alook_up_ids",
    "recent_state",
    "sealed",
    "system_rows",
]
