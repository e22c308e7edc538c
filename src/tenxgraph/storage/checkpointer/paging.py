"""Lazy histories over a store: what a thread loaded with its last messages only fetches later.

`LogPager` is the `Pager` of a `LazyHistory` built by a store's `aload_recent`: it reads the
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
from tenxgraph.storage.checkpointer._codec import decode_messages
from tenxgraph.storage.checkpointer._sql import stored_text
from tenxgraph.utils.sync_bridge import read_blocking

S = TypeVar("S", bound=AgentState)
T = TypeVar("T")

if TYPE_CHECKING:
    from tenxgraph.storage.checkpointer.base import BaseCheckpointer

#: messages a thread is loaded with (the recent ones); older ones are fetched when read
RECENT_MESSAGES = 64
# how a stored system message's JSON names its role (the encoder writes compact JSON); the
# stores index the rows that contain it, and check each row found by decoding it
SYSTEM_MARK = '"role":"system"'
_IDS_KEPT = 10_000  # ids remembered as (not) in a thread's log, at most


class LogPager:
    """Reads one thread's stored log, as it was at `generation`, up to `stored` messages."""

    __slots__ = (
        "absent",
        "born",
        "generation",
        "present",
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
    ) -> None:
        self.store = store
        self.thread_id = thread_id
        self.state_type = state_type
        self.generation = generation
        self.stored = stored
        self.absent: set[str | int] = set()  # ids looked up and not in the log
        self.present: set[str | int] = set()  # ids looked up and found
        # ids generated after this point are not in the log, which was read before it
        self.born = id_mark()

    def _blocking(self, read: Coroutine[Any, Any, T]) -> T:
        """`read` (a coroutine of the store) run on the read loop, waited for."""
        return read_blocking(_Release.of(self.store), read)

    def read(self, start: int, stop: int) -> list[Message]:
        return self._blocking(
            self.store.aread_log(self.thread_id, self.state_type, self.generation, start, stop)
        )

    def stored_ids(self, ids: Collection[str | int]) -> set[str | int]:
        wanted = self._unknown(ids)
        if wanted:
            found = self._blocking(
                self.store.afind_ids(self.thread_id, self.generation, wanted, self.stored)
            )
            self.learn(wanted, found)
        present = self.present
        return {i for i in ids if i in present}

    def system_messages(self, start: int, stop: int) -> list[tuple[int, Message]]:
        return self._blocking(
            self.store.asystem_messages(
                self.thread_id, self.state_type, self.generation, start, min(stop, self.stored)
            )
        )

    async def alook_up(self, ids: Collection[str | int]) -> None:
        """Find out, from async code, which of `ids` the log holds, so that a later merge of
        messages with these ids needs no blocking read."""
        wanted = self._unknown(ids)
        if wanted:
            found = await self.store.afind_ids(self.thread_id, self.generation, wanted, self.stored)
            self.learn(wanted, found)

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


def lazy_state(
    store: BaseCheckpointer,
    state: S,
    thread_id: str,
    generation: int,
    stored: int,
    known: tuple[list[str | int], set[str]] | None = None,
) -> S:
    """`state`, decoded with its last messages only, given a history over the rest. `known`:
    ids looked up in the same read as the state, and those of them the log holds."""
    recent = sealed(state.context)
    if len(recent) < stored:
        pager = LogPager(store, thread_id, type(state), generation, stored)
        if known is not None and known[0]:
            pager.learn(*known)
        state.__dict__["context"] = LazyHistory.of(pager, stored, recent)
    return state


__all__ = [
    "RECENT_MESSAGES",
    "SYSTEM_MARK",
    "LogPager",
    "alook_up_ids",
    "lazy_state",
    "sealed",
    "system_rows",
]
