"""A lazy history behaves exactly like a list of its messages, and fetches from its store only
what is read."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Collection
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state.lazy_history import PAGE, LazyHistory
from tenxgraph.core.state.reducers import add_messages, all_stored, append_messages, seal_history
from tenxgraph.core.state.sealed import is_sealed, seal


class ListPager:
    """A store's log held in a list; counts what it is asked."""

    def __init__(self, messages: list[Message]) -> None:
        self.log = messages
        self.reads: list[tuple[int, int]] = []
        self.lookups = 0

    def read(self, start: int, stop: int) -> list[Message]:
        self.reads.append((start, stop))
        return self.log[start:stop]

    def stored_ids(self, ids: Collection[str | int]) -> set[str | int]:
        self.lookups += 1
        held = {m.message_id for m in self.log}
        return {i for i in ids if i in held}

    def system_messages(self, start: int, stop: int) -> list[tuple[int, Message]]:
        self.reads.append((start, start))  # an index look-up: no message read in between
        return [(i, m) for i, m in enumerate(self.log[start:stop], start) if m.role == "system"]

    def take(self, start: int, stop: int) -> list[tuple[int, Message]]:
        return []  # holds nothing already read

    def held(self) -> int:
        return 0

    @property
    def fetched(self) -> int:
        return sum(stop - start for start, stop in self.reads)


def log_of(n: int) -> list[Message]:
    roles = ("user", "assistant", "user", "assistant", "system")
    messages = [Message.text_message(f"m{i}", roles[i % 5]) for i in range(n)]
    for message in messages:
        seal(message)
    return messages


def lazy(n: int, recent: int) -> tuple[LazyHistory, ListPager, list[Message]]:
    log = log_of(n)
    pager = ListPager(log)
    keep = min(recent, n)
    return LazyHistory.of(pager, n, log[n - keep :]), pager, log


# -- reading fetches only what is read -------------------------------------------------------


def test_the_recent_messages_and_the_length_need_no_fetch() -> None:
    history, pager, log = lazy(1000, 10)
    assert len(history) == 1000
    assert history[-1] is log[-1]
    assert history[-10:] == log[-10:]
    assert pager.reads == []


def test_reading_an_old_message_fetches_its_page_only() -> None:
    history, pager, log = lazy(1000, 10)
    assert history[3] is log[3]
    assert pager.reads == [(0, PAGE)]
    assert history[PAGE - 1] is log[PAGE - 1]  # same page: no second fetch
    assert len(pager.reads) == 1


def test_reading_backwards_fetches_page_by_page() -> None:
    history, pager, log = lazy(1000, 10)
    seen = []
    for message in reversed(history):
        seen.append(message)
        if len(seen) == 100:
            break
    assert seen == log[::-1][:100]
    assert pager.fetched <= 100 + 2 * PAGE


def test_system_messages_of_an_old_range_are_found_without_reading_it() -> None:
    history, pager, log = lazy(1000, 10)
    found = history.with_role_system(1, 900)
    assert found == [m for m in log[1:900] if m.role == "system"]
    assert pager.fetched == 0
    assert history.with_role_system(1, 900)[0] is found[0]  # kept: the same objects


def test_iterating_fetches_everything_in_one_read() -> None:
    history, pager, log = lazy(1000, 10)
    assert list(history) == log
    assert len(pager.reads) == 1
    assert list(history) == log
    assert len(pager.reads) == 1


def test_appending_and_merging_fetch_nothing() -> None:
    history, pager, log = lazy(1000, 10)
    new = Message.text_message("new")
    merged = add_messages(history, [new])
    assert isinstance(merged, LazyHistory)
    assert len(merged) == 1001
    assert merged[-1] is new
    assert merged[-2] is log[-1]
    assert pager.reads == []
    assert pager.lookups == 1  # is `new` among the messages left in the store?
    assert len(history) == 1000  # the left side is untouched


def test_a_merge_skips_a_message_already_in_the_store() -> None:
    history, pager, log = lazy(1000, 10)
    again = log[5].model_copy(deep=True)
    merged = add_messages(history, [again, Message.text_message("new")])
    assert len(merged) == 1001
    assert pager.reads == []
    assert all_stored(merged, [log[5], log[-1]])
    assert not all_stored(merged, [Message.text_message("never seen")])


def test_appending_in_place_skips_stored_messages_and_fetches_nothing() -> None:
    """What a run does to the history it has just read: `append_messages` appends to it,
    a message left in the store skipped."""
    history, pager, log = lazy(1000, 10)
    again = log[5].model_copy(deep=True)
    new = Message.text_message("new")
    assert append_messages(history, [again, new]) == [new]
    assert len(history) == 1001
    assert history[-1] is new
    assert pager.reads == []
    assert all_stored(history, [log[5], new])


def test_copies_keep_every_message_read_below_the_recent_ones() -> None:
    """A copy (what every merge makes) holds placeholders only where nothing was read yet:
    messages read from an old page, or found as system messages, are in it, and reading
    them again fetches nothing; a fully read history copies as a plain one."""
    history, pager, log = lazy(1000, 10)
    assert history[5] is log[5]  # page 0 read
    systems = history.with_role_system(500, 600)  # found through the index, placed
    assert systems
    assert all(m.role == "system" for m in systems)
    reads = len(pager.reads)
    twin = add_messages(history, [Message.text_message("new")])
    assert isinstance(twin, LazyHistory)
    assert len(twin) == 1001
    assert [twin[i] for i in range(64)] == log[:64]
    assert [m for m in twin[500:600] if m.role == "system"] == systems
    assert len(pager.reads) == reads + 1  # the slice's pages not read yet, in one read
    assert twin.copy()[5] is log[5]
    whole, _, whole_log = lazy(300, 10)
    list(whole)  # everything read
    assert list.__eq__(whole.copy(), whole_log)


def test_sealing_a_lazy_history_fetches_nothing() -> None:
    history, pager, _ = lazy(1000, 10)
    new = Message.text_message("new")
    merged = add_messages(history, [new])
    seal_history(merged)
    assert is_sealed(new)
    assert pager.reads == []


def test_copies_share_the_store_and_fetch_nothing() -> None:
    history, pager, log = lazy(1000, 10)
    twin = history.copy()
    assert isinstance(twin, LazyHistory)
    twin.append(Message.text_message("only in the copy"))
    assert len(history) == 1000
    assert len(twin) == 1001
    assert pager.reads == []
    assert twin[0] is log[0]


def test_deep_copies_and_pickles_are_plain_lists_of_everything() -> None:
    history, _, log = lazy(300, 10)
    for twin in (copy.deepcopy(history), pickle.loads(pickle.dumps(history))):
        assert type(twin) is list
        assert [m.model_dump() for m in twin] == [m.model_dump() for m in log]


def test_a_state_holding_a_lazy_history_dumps_every_message() -> None:
    history, _, log = lazy(300, 10)
    state = AgentState()
    state.__dict__["context"] = history
    dumped = state.model_dump()
    assert [m["message_id"] for m in dumped["context"]] == [m.message_id for m in log]
    assert AgentState.model_validate_json(state.model_dump_json()).context == log


def test_an_in_place_change_that_moves_positions_fetches_everything_first() -> None:
    history, _pager, log = lazy(300, 10)
    extra = Message.text_message("first")
    history.insert(0, extra)
    assert history == [extra, *log]
    history.append(Message.text_message("last"))
    assert len(history) == 302
    assert history[1] is log[0]


# -- a list in every respect: random operations against a plain list ---------------------------

OPS = st.one_of(
    st.tuples(st.just("get"), st.integers(-320, 320)),
    st.tuples(
        st.just("slice"),
        st.integers(-320, 320),
        st.integers(-320, 320),
        st.sampled_from([None, 1, 2, -1, -3]),
    ),
    st.tuples(st.just("append")),
    st.tuples(st.just("extend"), st.integers(0, 3)),
    st.tuples(st.just("merge"), st.integers(0, 3)),
    st.tuples(st.just("insert"), st.integers(-320, 320)),
    st.tuples(st.just("pop"), st.integers(-320, 320)),
    st.tuples(st.just("del_tail"), st.integers(-5, 320)),
    st.tuples(st.just("del_item"), st.integers(-320, 320)),
    st.tuples(st.just("set"), st.integers(-320, 320)),
    st.tuples(st.just("remove_old"), st.integers(0, 299)),
    st.tuples(st.just("reverse")),
    st.tuples(st.just("contains_old"), st.integers(0, 299)),
    st.tuples(st.just("index_old"), st.integers(0, 299)),
    st.tuples(st.just("count_old"), st.integers(0, 299)),
    st.tuples(st.just("add"), st.integers(0, 2)),
    st.tuples(st.just("radd"), st.integers(0, 2)),
    st.tuples(st.just("iadd"), st.integers(0, 2)),
    st.tuples(st.just("reversed"), st.integers(0, 400)),
    st.tuples(st.just("copy")),
    st.tuples(st.just("clear")),
    st.tuples(st.just("len")),
    st.tuples(st.just("eq")),
    st.tuples(st.just("bool")),
    st.tuples(st.just("system"), st.integers(-320, 320), st.integers(-320, 320)),
)


def apply(
    target: list[Message], op: tuple[Any, ...], made: list[Message], log: list[Message]
) -> Any:
    kind = op[0]

    def fresh(k: int) -> list[Message]:
        return made[:k]

    try:
        if kind == "get":
            return target[op[1]]
        if kind == "slice":
            return list(target[op[1] : op[2] : op[3]])
        if kind == "append":
            target.append(made[0])
        elif kind == "extend":
            target.extend(fresh(op[1]))
        elif kind == "merge":
            return add_messages(target, [*fresh(op[1]), log[0]])
        elif kind == "insert":
            target.insert(op[1], made[0])
        elif kind == "pop":
            return target.pop(op[1])
        elif kind == "del_tail":
            del target[op[1] :]
        elif kind == "del_item":
            del target[op[1]]
        elif kind == "set":
            target[op[1]] = made[0]
        elif kind == "remove_old":
            target.remove(log[op[1]])
        elif kind == "reverse":
            target.reverse()
        elif kind == "contains_old":
            return log[op[1]] in target
        elif kind == "index_old":
            return target.index(log[op[1]])
        elif kind == "count_old":
            return target.count(log[op[1]])
        elif kind == "add":
            return list(target + fresh(op[1]))
        elif kind == "radd":
            return fresh(op[1]) + target
        elif kind == "iadd":
            target += fresh(op[1])
        elif kind == "reversed":
            return [m for _, m in zip(range(op[1]), reversed(target), strict=False)]
        elif kind == "copy":
            return list(target.copy())
        elif kind == "clear":
            target.clear()
        elif kind == "len":
            return len(target)
        elif kind == "eq":
            return (target == list(target), list(target) == target, target != [])
        elif kind == "bool":
            return bool(target)
        elif kind == "system":
            select = getattr(target, "with_role_system", None)
            if select is not None:
                return select(op[1], op[2])
            return [m for m in target[op[1] : op[2]] if m.role == "system"]
    except (IndexError, ValueError) as exc:
        return type(exc)
    return None


@settings(max_examples=150, deadline=None)
@given(recent=st.integers(0, 300), ops=st.lists(OPS, max_size=12))
def test_a_lazy_history_behaves_exactly_like_a_list(
    recent: int, ops: list[tuple[Any, ...]]
) -> None:
    history, _, log = lazy(300, recent)
    plain = list(log)
    made = [Message.text_message(f"new{i}") for i in range(4)]
    for op in ops:
        want = apply(plain, op, made, log)
        got = apply(history, op, made, log)
        if op[0] == "merge":
            assert list(got) == list(want)
            continue
        assert got == want, op
        assert len(history) == len(plain)
    assert list(history) == plain


def test_it_counts_the_messages_it_holds_in_memory() -> None:
    history, _, _ = lazy(1000, 10)
    assert history.in_memory() == 10
    _ = history[0]
    assert history.in_memory() == 10 + PAGE
    history.append(Message.text_message("new"))
    assert history.in_memory() == 11 + PAGE
    assert history.copy().in_memory() == 11 + PAGE
    _ = list(history)
    assert history.in_memory() == 1001


class HoldingPager(ListPager):
    """Also holds the log's last `held_count` messages, handed out by `take` (no read)."""

    def __init__(self, messages: list[Message], held_count: int) -> None:
        super().__init__(messages)
        self.first = len(messages) - held_count
        self.taken: set[int] = set()

    def take(self, start: int, stop: int) -> list[tuple[int, Message]]:
        positions = range(max(start, self.first), min(stop, len(self.log)))
        self.taken.update(positions)
        return [(i, self.log[i]) for i in positions]

    def held(self) -> int:
        return len(self.log) - self.first - len(self.taken)


def test_what_the_pager_holds_is_read_without_a_fetch() -> None:
    log = log_of(300)
    pager = HoldingPager(log, 70)  # more than a page, starting mid-page
    history = LazyHistory.of(pager, 300, [])
    assert history.in_memory() == 70  # held by the pager, counted
    assert history[-1] is log[-1]
    assert history[230] is log[230]
    assert history[-70:] == log[-70:]
    assert pager.reads == []
    assert history.in_memory() == 70  # now in the list, no longer held
    assert history[229] is log[229]  # below what is held: its page is read
    assert pager.reads == [(3 * PAGE, 4 * PAGE)]
    assert list(history) == log


def test_a_lazy_history_and_its_copies_are_left_to_reference_counting() -> None:
    import gc

    history, _, _ = lazy(3 * PAGE, 10)
    merged = add_messages(history, [Message.text_message("new")])
    assert isinstance(merged, LazyHistory)
    for made in (history, merged, history.copy(), copy.copy(merged)):
        assert not gc.is_tracked(made)
    assert [m.text() for m in merged[-2:]] == [f"m{3 * PAGE - 1}", "new"]
