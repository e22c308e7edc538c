"""Reducers: how a node's update to a field merges with the value already there.

A state field opts in with ``Annotated[T, reducer]``; a field without one is replaced.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import attrgetter
from typing import Any, SupportsIndex, TypeVar

from tenxgraph.core.state.message import Message
from tenxgraph.core.state.message_block import ToolCallBlock, ToolResultBlock
from tenxgraph.core.state.sealed import seal, untrack_history

T = TypeVar("T")
_message_id = attrgetter("message_id")


class _IdIndex:
    """The message ids of one history, valid while the history has `size` messages."""

    __slots__ = ("ids", "sealed", "size")

    def __init__(self, ids: set[str | int], size: int) -> None:
        self.ids = ids
        self.size = size
        self.sealed = 0  # the first `sealed` messages are known to be sealed


class MessageHistory(list[Message]):
    """A list of messages that remembers its ids, so `add_messages` costs O(new messages).

    It behaves as a plain list. Histories derived from one another by `add_messages` share one
    id index; any in-place change to a list (append, item assignment, sort...) detaches it from
    the index, and the index is rebuilt the next time that list is merged into.
    """

    __slots__ = ("_index",)

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        super().__init__(messages)
        self._index: _IdIndex | None = None

    def _detach(self) -> None:
        self._index = None

    def append(self, item: Message) -> None:
        self._detach()
        super().append(item)

    def extend(self, items: Iterable[Message]) -> None:
        self._detach()
        super().extend(items)

    def insert(self, index: SupportsIndex, item: Message) -> None:
        self._detach()
        super().insert(index, item)

    def pop(self, index: SupportsIndex = -1) -> Message:
        self._detach()
        return super().pop(index)

    def remove(self, item: Message) -> None:
        self._detach()
        super().remove(item)

    def clear(self) -> None:
        self._detach()
        super().clear()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self._detach()
        super().sort(*args, **kwargs)

    def reverse(self) -> None:
        self._detach()
        super().reverse()

    def __setitem__(self, key: Any, value: Any) -> None:
        self._detach()
        super().__setitem__(key, value)

    def __delitem__(self, key: Any) -> None:
        self._detach()
        super().__delitem__(key)

    def __iadd__(self, items: Iterable[Message]) -> MessageHistory:  # type: ignore[override, misc]
        self._detach()
        return super().__iadd__(items)

    def __imul__(self, n: SupportsIndex) -> MessageHistory:
        self._detach()
        return super().__imul__(n)


def _index_of(messages: Sequence[Message]) -> _IdIndex:
    index = getattr(messages, "_index", None)
    if isinstance(index, _IdIndex) and index.size == len(messages):
        return index
    return _IdIndex(set(map(_message_id, messages)), len(messages))


def add_messages(left: Sequence[Message], right: Sequence[Message] | Message) -> list[Message]:
    """Append `right` to `left`, skipping ids already present and partial (`delta`) messages.

    The result is a new list; `left` is never modified or reordered. Within `right`, the first
    message with a given id wins. Cost: O(len(right)) plus one list copy.
    """
    if isinstance(right, Message):
        right = (right,)
    index = _index_of(left)
    ids = index.ids
    derive = getattr(left, "_derive", None)  # a lazy history: a copy that fetches nothing
    merged: MessageHistory = MessageHistory(left) if derive is None else derive()
    # The index may be shared with `left`: update it only once the merge can no longer fail.
    new_ids: set[str | int] = set()
    added: list[Message] = []
    for message in right:
        if message.delta or message.message_id in ids or message.message_id in new_ids:
            continue
        new_ids.add(message.message_id)
        added.append(message)
    if derive is not None and added:  # ids may also be among the messages left in the store
        stored = left.stored_ids(new_ids)  # type: ignore[attr-defined]
        if stored:
            added = [m for m in added if m.message_id not in stored]
            new_ids -= stored
    for message in added:
        list.append(merged, message)
    ids.update(new_ids)
    index.size = len(merged)
    merged._index = index
    untrack_history(merged)
    return merged


def append_messages(history: MessageHistory, right: Sequence[Message]) -> list[Message]:
    """`add_messages` in place: appends to `history` itself, by the same rules, and returns
    what it appended. Only for a history nothing else holds (a run's thread as just read from
    its store, `Threads.checkout`'s "read"): whoever held it would see it change. (Written apart
    from `add_messages`, which runs at every step, to keep that one call shorter.)"""
    index = _index_of(history)
    ids = index.ids
    seen: set[str | int] = set()
    added = []
    for message in right:
        if not (message.delta or message.message_id in ids or message.message_id in seen):
            seen.add(message.message_id)
            added.append(message)
    in_store = getattr(history, "stored_ids", None)  # a lazy history: ask its store
    stored = in_store(seen) if in_store is not None and added else ()
    added = [m for m in added if m.message_id not in stored]
    for message in added:
        list.append(history, message)
    ids.update(m.message_id for m in added)
    index.size = len(history)
    history._index = index
    return added


def all_stored(history: Sequence[Message], messages: Sequence[Message]) -> bool:
    """Whether every one of `messages` already is in `history`, by id. Costs O(len(messages))
    on a history that came out of `add_messages`."""
    ids = _index_of(history).ids
    missing = {m.message_id for m in messages if m.message_id not in ids}
    if not missing:
        return True
    in_store = getattr(history, "stored_ids", None)  # a lazy history: ask its store
    return in_store is not None and missing <= in_store(missing)


def seal_history(history: Sequence[Message]) -> None:
    """Seal every message of `history` (see `tenxgraph.core.state.sealed`). A history that
    came out of `add_messages` remembers how far it is sealed, so sealing it after each turn
    costs O(new messages)."""
    index = getattr(history, "_index", None)
    valid = isinstance(index, _IdIndex) and index.size == len(history)
    start = index.sealed if valid else 0  # type: ignore[union-attr]
    for position in range(start, len(history)):
        seal(history[position])
    if valid:
        index.sealed = len(history)  # type: ignore[union-attr]


def replace_messages(left: Sequence[Message], right: Sequence[Message]) -> list[Message]:
    """Replace the whole history with `right`."""
    return list(right)


def replace_value(left: Any, right: T) -> T:
    """Replace the old value with the new one (the behaviour of a field without a reducer)."""
    return right


def _item_key(item: Any) -> Any:
    if isinstance(item, dict):
        return item.get("id")
    return getattr(item, "id", None)


def append_items(left: Sequence[T], right: Sequence[T]) -> list[T]:
    """Append `right` to `left`, skipping items whose ``id`` (attribute or dict key) is already
    present. Items without an id are always appended."""
    seen = {key for key in map(_item_key, left) if key is not None}
    merged = list(left)
    for item in right:
        key = _item_key(item)
        if key is not None:
            if key in seen:
                continue
            seen.add(key)
        merged.append(item)
    return merged


def _call_ids(message: Message) -> set[str] | None:
    """Ids of the tool calls `message` asks for; None when it asks for none."""
    ids = {b.id for b in message.content if isinstance(b, ToolCallBlock)}
    for call in message.tools_calls or ():
        if call.get("id") is not None:
            ids.add(str(call["id"]))
    if ids or message.tools_calls:
        return ids
    return None


def remove_tool_messages(messages: Sequence[Message]) -> list[Message]:
    """Drop finished tool exchanges, keeping the answers they led to.

    A finished exchange is one or more rounds of (assistant message asking for tools, then tool
    messages answering every call) followed by an assistant answer without tool calls; the rounds
    are removed and the answer kept. Anything incomplete (a call without its result, a round not
    yet answered) is kept whole, so no call is ever separated from its result.
    """
    kept: list[Message] = []
    i, n = 0, len(messages)
    while i < n:
        j = i  # start of the next round
        complete = True
        while j < n and messages[j].role == "assistant":
            calls = _call_ids(messages[j])
            if calls is None:
                break  # an answer: the exchange (if any) ends here
            k = j + 1
            answered: set[str] = set()
            while k < n and messages[k].role == "tool":
                answered.update(
                    b.call_id for b in messages[k].content if isinstance(b, ToolResultBlock)
                )
                k += 1
            unanswered = k == j + 1 or not calls <= answered
            j = k
            if unanswered:
                complete = False
                break
        if j == i:  # not the start of an exchange
            kept.append(messages[i])
            i += 1
        elif complete and j < n and messages[j].role == "assistant":
            i = j  # finished exchange: drop the rounds, the answer is kept next
        else:
            kept.extend(messages[i:j])  # unfinished: keep it whole
            i = j
    return kept


__all__ = [
    "MessageHistory",
    "add_messages",
    "append_items",
    "remove_tool_messages",
    "replace_messages",
    "replace_value",
    "seal_history",
]
