"""`LazyHistory`: a thread's conversation whose older messages stay in the store until read.

A thread loaded from a store that pages (SQLite, PostgreSQL) comes with its last messages in
memory (held by its pager as their stored text, each decoded when first read: `Pager.take`)
and the rest left where they are. It is a list, and behaves as one for every operation:
reading a message that is not in memory yet fetches its page (`PAGE` messages, one query);
iterating, searching, comparing or printing the whole history fetches every missing page at
once. Appending never fetches anything, so a turn that reads only recent messages costs the
same at message 50,000 as at message 30.

Positions below `stored` are the thread's stored log, which never changes (history is append
only; a rewrite makes the store refuse further reads, naming the thread). Any other in-place
change (insert, remove, sort, assigning an item...) first fetches everything, and from then on
the list is an ordinary in-memory one.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Any, Protocol, SupportsIndex

from tenxgraph.core.state.message import Message
from tenxgraph.core.state.reducers import MessageHistory, _IdIndex
from tenxgraph.core.state.sealed import untrack_history

PAGE = 64  # messages fetched together when one of them is read


class Pager(Protocol):
    """Where a lazy history's unread messages are: a thread's stored log, up to `stored`."""

    def read(self, start: int, stop: int) -> list[Message]:
        """Messages `start` to `stop` of the log (sealed), in order; blocking."""

    def stored_ids(self, ids: Collection[str | int]) -> set[str | int]:
        """Which of `ids` the log holds; blocking."""

    def system_messages(self, start: int, stop: int) -> list[tuple[int, Message]]:
        """(position, message) of the log's system messages from `start` to `stop`;
        blocking."""

    def take(self, start: int, stop: int) -> list[tuple[int, Message]]:
        """(position, message) of the positions `start` to `stop` the pager holds already
        (read with the thread, decoded when first asked for): no query."""

    def held(self) -> int:
        """How many messages the pager holds not decoded yet (as their stored text)."""


class _Unloaded:
    """Stands in a lazy history's list for a message still in the store. Never handed out."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<message not loaded>"

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(
            "A lazy history's placeholder escaped its list (read the history through its own "
            "methods, not list's C functions); please report this"
        )


UNLOADED = _Unloaded()


def _unloaded(history: list[Any], count: int) -> None:
    """Append `count` placeholders to an empty `history`, in C: one allocation filled by
    list's own repeat, with no temporary list (50,000 of them in 39 us here, against 103 us
    from an iterator and 333 us copied from another list through a temporary one)."""
    if count > 0:
        list.append(history, UNLOADED)
        list.__imul__(history, count)


_get: Callable[[list[Any], Any], Any] = list.__getitem__
_set: Callable[[list[Any], Any, Any], None] = list.__setitem__
_extend: Callable[[list[Any], Iterable[Any]], None] = list.extend


class LazyHistory(MessageHistory):
    """A message history backed by a store for its first `stored` positions."""

    __slots__ = ("_filled", "_loaded", "_low", "_pager", "_stored")

    _pager: Pager | None
    _stored: int
    _loaded: bytearray  # per page of the stored part: 1 once every message of it is in memory
    _filled: int  # positions of the stored part in memory
    _low: int  # every position below it is UNLOADED (see `_unloaded`)

    @classmethod
    def of(cls, pager: Pager, stored: int, recent: list[Message]) -> LazyHistory:
        """The history of a log of `stored` messages of which `recent` are the last ones."""
        history = cls.__new__(cls)
        unread = max(stored - len(recent), 0)
        _unloaded(history, unread)
        _extend(history, recent)
        history._low = unread
        history._pager = pager
        history._stored = stored
        history._filled = min(len(recent), stored)
        pages = -(-stored // PAGE)
        complete = -(-max(unread, 0) // PAGE)  # the first page the recent messages fill
        history._loaded = bytearray(complete) + b"\x01" * (pages - complete)
        index = _IdIndex({m.message_id for m in recent}, stored)
        index.sealed = stored  # messages come sealed from the store
        history._index = index
        untrack_history(history)
        return history

    # -- fetching ------------------------------------------------------------------------------

    def _fetch(self, start: int, stop: int) -> None:
        """Bring positions `start` to `stop` (of the stored part) into memory."""
        pager = self._pager
        stop = min(stop, self._stored)
        if pager is None or start >= stop:
            return
        for position, message in pager.take(start, stop):
            if _get(self, position) is UNLOADED:
                self._place(position, message)
        loaded = self._loaded
        first, last = start // PAGE, (stop - 1) // PAGE
        page = first
        while page <= last:
            if loaded[page] or not self._missing(page, start, stop):
                page += 1
                continue
            end = page
            while end + 1 <= last and not loaded[end + 1]:
                end += 1
            low, high = page * PAGE, min((end + 1) * PAGE, self._stored)
            messages = pager.read(low, high)
            if len(messages) != high - low:
                raise RuntimeError(f"the store gave {len(messages)} messages for {low}..{high}")
            for offset, message in enumerate(messages):
                if _get(self, low + offset) is UNLOADED:
                    self._place(low + offset, message)
            loaded[page : end + 1] = b"\x01" * (end + 1 - page)
            page = end + 1

    def _place(self, position: int, message: Message) -> None:
        """Put a stored message read now in its (unloaded) position."""
        _set(self, position, message)
        self._filled += 1
        if position < self._low:
            self._low = position
        if self._index is not None:
            self._index.ids.add(message.message_id)

    def _missing(self, page: int, start: int, stop: int) -> bool:
        """Whether positions `start` to `stop` on `page` lack a message (a page the recent
        messages cover in part); a page found complete is marked so."""
        low, high = page * PAGE, min((page + 1) * PAGE, self._stored)
        slots = _get(self, slice(low, high))
        if not any(slot is UNLOADED for slot in slots):
            self._loaded[page] = 1
            return False
        return any(
            slot is UNLOADED for slot in slots[max(start, low) - low : min(stop, high) - low]
        )

    def _fetch_all(self) -> None:
        if self._pager is not None and not all(self._loaded):
            self._fetch(0, self._stored)

    def _materialize(self) -> None:
        """Everything in memory, and no longer tied to the store (before an in-place change
        that moves positions)."""
        self._fetch_all()
        self._pager = None
        self._stored = self._filled = self._low = 0
        self._loaded = bytearray()

    def _position(self, index: SupportsIndex) -> int:
        position = index.__index__()
        return position + len(self) if position < 0 else position

    # -- reading -------------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if (step > 0 and start < stop) or (step < 0 and start > stop):
                low, high = (start, stop) if step > 0 else (stop + 1, start + 1)
                self._fetch(low, high)
            return _get(self, key)
        item = _get(self, key)
        if item is UNLOADED:
            position = self._position(key)
            self._fetch(position, position + 1)
            item = _get(self, key)
        return item

    def __iter__(self) -> Iterator[Message]:
        self._fetch_all()
        return list.__iter__(self)

    def __reversed__(self) -> Iterator[Message]:
        """From the last message back, fetching older pages only when reached."""
        position = len(self)
        while position > 0:
            position -= 1
            if position >= len(self):  # shortened while being read
                position = len(self)
                continue
            yield self[position]

    def __contains__(self, item: object) -> bool:
        self._fetch_all()
        return list.__contains__(self, item)

    def index(self, *args: Any) -> int:
        self._fetch_all()
        return list.index(self, *args)

    def count(self, item: Any) -> int:
        self._fetch_all()
        return list.count(self, item)

    def _compared(self, other: object, compare: Callable[[Any, Any], Any]) -> Any:
        self._fetch_all()
        if isinstance(other, LazyHistory):
            other._fetch_all()
        return compare(self, other)

    def __eq__(self, other: object) -> bool:
        return self._compared(other, list.__eq__)  # type: ignore[no-any-return]

    def __ne__(self, other: object) -> bool:
        return self._compared(other, list.__ne__)  # type: ignore[no-any-return]

    def __lt__(self, other: list[Message]) -> bool:
        return self._compared(other, list.__lt__)  # type: ignore[no-any-return]

    def __le__(self, other: list[Message]) -> bool:
        return self._compared(other, list.__le__)  # type: ignore[no-any-return]

    def __gt__(self, other: list[Message]) -> bool:
        return self._compared(other, list.__gt__)  # type: ignore[no-any-return]

    def __ge__(self, other: list[Message]) -> bool:
        return self._compared(other, list.__ge__)  # type: ignore[no-any-return]

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        self._fetch_all()
        return list.__repr__(self)

    def in_memory(self) -> int:
        """How many of its messages are in memory (the others are still in the store), the
        ones its pager holds not decoded yet included."""
        held = 0 if self._pager is None else self._pager.held()
        return len(self) - self._stored + self._filled + held

    def materialized(self) -> list[Message]:
        """Every message, in a plain list (for serialisers that read a list's memory)."""
        self._fetch_all()
        return _get(self, slice(None))  # type: ignore[no-any-return]

    # -- copies --------------------------------------------------------------------------------

    def _derive(self) -> LazyHistory:
        """A copy sharing the store and what is already in memory (no fetch)."""
        twin = LazyHistory.__new__(LazyHistory)
        low = self._low
        _unloaded(twin, low)  # the positions still in the store: no temporary list of them
        _extend(twin, _get(self, slice(low, None)))
        twin._low = low
        twin._pager = self._pager
        twin._stored = self._stored
        twin._filled = self._filled
        twin._loaded = bytearray(self._loaded)
        index = self._index
        twin._index = index if index is not None and index.size == len(self) else None
        untrack_history(twin)
        return twin

    def copy(self) -> LazyHistory:
        twin = self._derive()
        twin._own_index()
        return twin

    __copy__ = copy

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Message]:
        import copy

        return [copy.deepcopy(message, memo) for message in self]

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        return (list, (self.materialized(),))

    def __add__(self, other: Iterable[Message]) -> LazyHistory:  # type: ignore[override]
        twin = self.copy()
        twin.extend(other)
        return twin

    def __radd__(self, other: list[Message]) -> list[Message]:
        return [*other, *self]

    def __mul__(self, n: SupportsIndex) -> list[Message]:
        return self.materialized() * n

    __rmul__ = __mul__

    def with_role_system(self, start: int, stop: int) -> list[Message]:
        """The system messages among positions `start` to `stop`, in order, the ones still in
        the store found by the store's index (the others are not read)."""
        start, stop, _ = slice(start, stop).indices(len(self))
        pager = self._pager
        slots = _get(self, slice(start, stop))
        if pager is None or not any(slot is UNLOADED for slot in slots):
            return [m for m in slots if m.role == "system"]
        found: dict[int, Message] = {}
        for position, message in pager.system_messages(start, stop):
            if _get(self, position) is UNLOADED:
                self._place(position, message)
            found[position] = _get(self, position)
        for offset, slot in enumerate(slots):
            if slot is not UNLOADED and slot.role == "system":
                found[start + offset] = slot
        return [found[position] for position in sorted(found)]

    def stored_ids(self, ids: Collection[str | int]) -> set[str | int]:
        """Which of `ids` this history holds, asking the store about the part not in
        memory (one query, for ids not seen in memory)."""
        index = self._index
        known = index.ids if index is not None and index.size == len(self) else None
        if known is None:
            return {m.message_id for m in self} & set(ids)
        found = {i for i in ids if i in known}
        rest = [i for i in ids if i not in known]
        if rest and self._pager is not None and not all(self._loaded):
            found |= self._pager.stored_ids(rest)
        return found

    # -- changes -------------------------------------------------------------------------------

    def _own_index(self) -> None:
        """An id index of this list alone (appends must not touch one shared with others)."""
        index = self._index
        if index is not None and index.size == len(self):
            own = _IdIndex(set(index.ids), len(self))
            own.sealed = index.sealed
            self._index = own
        else:
            self._index = None

    def append(self, item: Message) -> None:
        self._own_index()
        list.append(self, item)
        if self._index is not None:
            self._index.ids.add(item.message_id)
            self._index.size += 1

    def extend(self, items: Iterable[Message]) -> None:
        for item in list(items):
            self.append(item)

    def __iadd__(self, items: Iterable[Message]) -> LazyHistory:  # type: ignore[override]
        self.extend(items)
        return self

    def __delitem__(self, key: Any) -> None:
        if isinstance(key, slice) and key.step in (None, 1) and key.stop is None:
            start = key.indices(len(self))[0]
            if start >= self._stored:  # only messages appended in memory
                self._index = None
                list.__delitem__(self, key)
                return
        self._materialize()
        super().__delitem__(key)

    def _changing(name: str) -> Any:  # type: ignore[misc]
        def change(self: LazyHistory, *args: Any, **kwargs: Any) -> Any:
            self._materialize()
            return getattr(MessageHistory, name)(self, *args, **kwargs)

        change.__name__ = name
        return change

    def clear(self) -> None:
        self._pager, self._stored, self._loaded, self._index = None, 0, bytearray(), None
        self._filled = self._low = 0
        list.clear(self)

    insert = _changing("insert")
    pop = _changing("pop")
    remove = _changing("remove")
    sort = _changing("sort")
    reverse = _changing("reverse")
    __setitem__ = _changing("__setitem__")
    __imul__ = _changing("__imul__")
    del _changing


__all__ = ["PAGE", "UNLOADED", "LazyHistory", "Pager"]
