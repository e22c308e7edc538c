"""Reducers: add_messages (and its id-index cache), replace_*, append_items,
remove_tool_messages."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from tenxgraph.core.state import (
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    add_messages,
    append_items,
    remove_tool_messages,
    replace_messages,
    replace_value,
)
from tenxgraph.core.state.reducers import MessageHistory, append_messages
from tests._helpers import naive_add_messages, same_objects


def msg(message_id: str | int, *, delta: bool = False, role: Any = "user") -> Message:
    return Message(message_id=message_id, role=role, content=f"text of {message_id}", delta=delta)


def ids(messages: Sequence[Message]) -> list[str | int]:
    return [m.message_id for m in messages]


# -- add_messages: the rules ------------------------------------------------------------------


def test_add_messages_appends_in_order() -> None:
    a, b, c = msg("a"), msg("b"), msg("c")
    assert same_objects(add_messages([a], [b, c]), [a, b, c])


def test_add_messages_skips_ids_already_in_left() -> None:
    a, b = msg("a"), msg("b")
    resent = msg("a", role="assistant")
    assert same_objects(add_messages([a, b], [resent, msg("b"), msg("c")])[:2], [a, b])
    assert ids(add_messages([a, b], [resent, msg("c")])) == ["a", "b", "c"]


def test_add_messages_distinguishes_str_and_int_ids() -> None:
    assert ids(add_messages([msg(1)], [msg("1"), msg(1)])) == [1, "1"]


def test_add_messages_skips_delta_messages() -> None:
    partial, final = msg("a", delta=True), msg("a")
    merged = add_messages([], [partial, msg("p", delta=True), final])
    assert same_objects(merged, [final])


def test_add_messages_keeps_the_first_of_duplicate_ids_within_right() -> None:
    first, second = msg("x"), msg("x", role="assistant")
    merged = add_messages([msg("a")], [first, msg("b"), second])
    assert ids(merged) == ["a", "x", "b"]
    assert merged[1] is first


def test_add_messages_never_mutates_or_reorders_left() -> None:
    left = [msg("b"), msg("a"), msg("c")]
    snapshot = list(left)
    merged = add_messages(left, [msg("d"), msg("a")])
    assert same_objects(left, snapshot)
    assert same_objects(merged[:3], snapshot)


def test_add_messages_returns_a_new_list() -> None:
    left, right = [msg("a")], [msg("b")]
    merged = add_messages(left, right)
    assert merged is not left
    assert merged is not right
    nothing_new = add_messages(left, [])
    assert nothing_new is not left
    assert same_objects(nothing_new, left)
    nothing_new.append(msg("z"))
    assert ids(left) == ["a"]


def test_add_messages_accepts_a_single_message() -> None:
    a, b = msg("a"), msg("b")
    assert same_objects(add_messages([a], b), [a, b])
    assert same_objects(add_messages([a], msg("a")), [a])
    assert add_messages([a], msg("d", delta=True)) == [a]


def test_add_messages_accepts_tuples_and_iterators() -> None:
    a, b, c = msg("a"), msg("b"), msg("c")
    assert same_objects(add_messages((a,), (b, c)), [a, b, c])
    assert same_objects(add_messages([a], iter([b, c, b])), [a, b, c])


def test_add_messages_result_is_a_list() -> None:
    merged = add_messages([], [msg("a")])
    assert isinstance(merged, list)
    assert merged == [merged[0]]


def test_chained_merges_match_the_naive_reducer() -> None:
    real: list[Message] = []
    expected: list[Message] = []
    pool = [msg(i % 37) for i in range(200)] + [msg(f"s{i}") for i in range(50)]
    for step in range(120):
        right = [pool[(step * 7 + k) % len(pool)] for k in range(step % 5)]
        if step % 9 == 0:
            right.append(msg(f"delta{step}", delta=True))
        real = add_messages(real, right)
        expected = naive_add_messages(expected, right)
        assert same_objects(real, expected)
    assert len({m.message_id for m in real}) == len(real)


# -- add_messages: forks of one history -------------------------------------------------------


def test_fork_two_different_messages_into_the_same_history() -> None:
    base = add_messages(add_messages([], [msg("a")]), [msg("b")])
    c, d = msg("c"), msg("d")
    branch_c = add_messages(base, [c])
    branch_d = add_messages(base, [d])
    assert ids(base) == ["a", "b"]
    assert ids(branch_c) == ["a", "b", "c"]
    assert ids(branch_d) == ["a", "b", "d"]
    # each branch still accepts the other branch's message, and rejects its own
    assert ids(add_messages(branch_c, [d, c])) == ["a", "b", "c", "d"]
    assert ids(add_messages(branch_d, [c, d])) == ["a", "b", "d", "c"]


def test_fork_the_same_message_twice_into_the_same_history() -> None:
    base = add_messages([], [msg("a")])
    c = msg("c")
    first = add_messages(base, [c])
    second = add_messages(base, [c])
    assert ids(first) == ids(second) == ["a", "c"]
    assert ids(add_messages(base, [c])) == ["a", "c"]


def test_merge_into_an_older_history_of_a_chain() -> None:
    chain: list[list[Message]] = [add_messages([], [msg("h0")])]
    for i in range(1, 6):
        chain.append(add_messages(chain[-1], [msg(f"h{i}")]))
    old = chain[2]
    assert ids(add_messages(old, [msg("h4"), msg("h1")])) == ["h0", "h1", "h2", "h4"]
    assert ids(add_messages(chain[-1], [msg("h4"), msg("new")])) == [
        *[f"h{i}" for i in range(6)],
        "new",
    ]
    assert ids(add_messages(chain[0], [msg("h5")])) == ["h0", "h5"]


def test_noop_merge_then_fork() -> None:
    base = add_messages([], [msg("a"), msg("b")])
    same = add_messages(base, [msg("a")])  # nothing new
    grown = add_messages(same, [msg("c")])
    assert ids(grown) == ["a", "b", "c"]
    assert ids(add_messages(base, [msg("c")])) == ["a", "b", "c"]
    assert ids(add_messages(same, [msg("c")])) == ["a", "b", "c"]


def test_failed_merge_does_not_change_later_merges() -> None:
    history = add_messages(add_messages([], [msg("a")]), [msg("b")])
    c = msg("c")
    with pytest.raises(AttributeError):
        add_messages(history, [c, "not a message"])  # type: ignore[list-item]
    assert ids(history) == ["a", "b"]
    assert same_objects(add_messages(history, [c]), [*history, c])


def test_merge_from_a_failing_iterator_does_not_change_later_merges() -> None:
    history = add_messages([], [msg("a")])
    c = msg("c")

    def broken() -> Iterator[Message]:
        yield c
        raise RuntimeError("source failed")

    with pytest.raises(RuntimeError):
        add_messages(history, broken())
    assert ids(add_messages(history, [c])) == ["a", "c"]


# -- add_messages: in-place changes to a returned history -------------------------------------


@dataclass(frozen=True)
class Mutation:
    name: str
    apply: Callable[[list[Message], list[Message]], list[Message]]
    """(history, fresh messages) -> the history to merge into next (same object, except +=)."""


def _append(h: list[Message], new: list[Message]) -> list[Message]:
    h.append(new[0])
    return h


def _setitem(h: list[Message], new: list[Message]) -> list[Message]:
    h[0] = new[0]
    return h


def _setslice(h: list[Message], new: list[Message]) -> list[Message]:
    h[0:2] = new[:3]
    return h


def _setslice_grow(h: list[Message], new: list[Message]) -> list[Message]:
    h[len(h) :] = new[:2]
    return h


def _pop(h: list[Message], new: list[Message]) -> list[Message]:
    h.pop()
    return h


def _pop_first(h: list[Message], new: list[Message]) -> list[Message]:
    h.pop(0)
    return h


def _delitem(h: list[Message], new: list[Message]) -> list[Message]:
    del h[1]
    return h


def _delslice(h: list[Message], new: list[Message]) -> list[Message]:
    del h[:2]
    return h


def _extend(h: list[Message], new: list[Message]) -> list[Message]:
    h.extend(new[:2])
    return h


def _insert(h: list[Message], new: list[Message]) -> list[Message]:
    h.insert(0, new[0])
    return h


def _sort(h: list[Message], new: list[Message]) -> list[Message]:
    h.sort(key=lambda m: str(m.message_id), reverse=True)
    return h


def _reverse(h: list[Message], new: list[Message]) -> list[Message]:
    h.reverse()
    return h


def _clear(h: list[Message], new: list[Message]) -> list[Message]:
    h.clear()
    return h


def _remove(h: list[Message], new: list[Message]) -> list[Message]:
    h.remove(h[1])
    return h


def _iadd(h: list[Message], new: list[Message]) -> list[Message]:
    h += new[:2]
    return h


def _imul(h: list[Message], new: list[Message]) -> list[Message]:
    h *= 2
    return h


def _replace_all(h: list[Message], new: list[Message]) -> list[Message]:
    h[:] = new[:3]
    return h


MUTATIONS = [
    Mutation("append", _append),
    Mutation("setitem", _setitem),
    Mutation("setslice", _setslice),
    Mutation("setslice_grow", _setslice_grow),
    Mutation("pop", _pop),
    Mutation("pop_first", _pop_first),
    Mutation("delitem", _delitem),
    Mutation("delslice", _delslice),
    Mutation("extend", _extend),
    Mutation("insert", _insert),
    Mutation("sort", _sort),
    Mutation("reverse", _reverse),
    Mutation("clear", _clear),
    Mutation("remove", _remove),
    Mutation("iadd", _iadd),
    Mutation("imul", _imul),
    Mutation("replace_all", _replace_all),
]


def _changed_history(
    mutation: Mutation, with_sibling: bool
) -> tuple[list[Message], list[Message], list[Message] | None, list[Message]]:
    """A merged history changed in place: (changed, what it holds, sibling fork, its contents)."""
    history = add_messages(add_messages([], [msg("a"), msg("b")]), [msg("c")])
    fresh = [msg("n1"), msg("n2"), msg("n3")]
    reference = mutation.apply(list(history), fresh)
    grown_by = len(reference) - len(history)
    sibling: list[Message] | None = None
    if with_sibling:
        # A fork that grows by exactly as much as the in-place change: the id index the two
        # share then covers as many messages as the changed history holds.
        sibling = add_messages(history, [msg(f"x{i}") for i in range(max(grown_by, 0))])
    sibling_snapshot = list(sibling or ())
    changed = mutation.apply(history, fresh)
    assert same_objects(changed, reference)
    return changed, reference, sibling, sibling_snapshot


PROBE_IDS = ("a", "b", "c", "n1", "n2", "n3", "x0", "x1", "x2", "zz")


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.name for m in MUTATIONS])
@pytest.mark.parametrize("with_sibling", [False, True], ids=["alone", "after_fork"])
def test_merge_after_in_place_change_dedupes_against_real_contents(
    mutation: Mutation, with_sibling: bool
) -> None:
    for probe_id in PROBE_IDS:  # each probe merged into a freshly changed history
        changed, reference, sibling, sibling_snapshot = _changed_history(mutation, with_sibling)
        probe = msg(probe_id)
        got = add_messages(changed, [probe])
        assert same_objects(got, naive_add_messages(reference, [probe])), probe_id
        if sibling is not None:
            assert same_objects(sibling, sibling_snapshot)
            got = add_messages(sibling, [probe])
            assert same_objects(got, naive_add_messages(sibling_snapshot, [probe])), probe_id

    changed, reference, _, _ = _changed_history(mutation, with_sibling)
    probes = [msg(x) for x in PROBE_IDS]
    got = add_messages(changed, probes)
    expected = naive_add_messages(reference, probes)
    assert same_objects(got, expected)
    more = [*probes, msg("last")]
    assert same_objects(add_messages(got, more), naive_add_messages(expected, more))


def test_changing_the_left_after_a_merge_does_not_change_the_result() -> None:
    history = add_messages([], [msg("a"), msg("b")])
    merged = add_messages(history, [msg("c")])
    history.append(msg("d"))
    history[0] = msg("e")
    assert ids(merged) == ["a", "b", "c"]
    assert ids(add_messages(merged, [msg("d"), msg("e")])) == ["a", "b", "c", "d", "e"]


def test_changing_the_result_does_not_change_the_left() -> None:
    history = add_messages([], [msg("a")])
    merged = add_messages(history, [msg("b")])
    merged.clear()
    assert ids(history) == ["a"]
    assert ids(add_messages(history, [msg("b")])) == ["a", "b"]
    assert ids(add_messages(merged, [msg("a")])) == ["a"]


def test_mutating_a_plain_list_left_between_merges() -> None:
    left = [msg("a"), msg("b")]
    assert ids(add_messages(left, [msg("c")])) == ["a", "b", "c"]
    left[1] = msg("c")
    assert ids(add_messages(left, [msg("b"), msg("c")])) == ["a", "c", "b"]


# -- the other reducers -----------------------------------------------------------------------


def test_append_messages_follows_add_messages_rules_in_place() -> None:
    """`append_messages` (what a run does to the history it has just read) appends to the
    history itself, by the rules of `add_messages`, and says what it appended; a merge into
    the history afterwards sees those ids."""
    history = MessageHistory([msg("a"), msg("b")])
    same = history
    appended = append_messages(history, [msg("b"), msg("c"), msg("d", delta=True), msg("c")])
    assert history is same
    assert ids(history) == ["a", "b", "c"]
    assert ids(appended) == ["c"]
    assert ids(add_messages(history, [msg("c"), msg("e")])) == ["a", "b", "c", "e"]
    assert ids(append_messages(history, [msg("a")])) == []


def test_replace_messages_returns_right_as_a_new_list() -> None:
    left, right = [msg("a")], (msg("b"), msg("c"))
    result = replace_messages(left, right)  # type: ignore[arg-type]
    assert same_objects(result, list(right))
    assert isinstance(result, list)
    assert result is not right
    assert ids(left) == ["a"]


def test_replace_value_returns_the_new_value() -> None:
    new = {"k": 1}
    assert replace_value({"old": 0}, new) is new
    assert replace_value(1, None) is None


@dataclass
class Item:
    id: Any
    value: str = ""


def test_append_items_dedupes_by_id_attribute() -> None:
    left = [Item(1, "a"), Item(2, "b")]
    result = append_items(left, [Item(2, "dup"), Item(3, "c"), Item(3, "dup2")])
    assert [(i.id, i.value) for i in result] == [(1, "a"), (2, "b"), (3, "c")]
    assert [i.id for i in left] == [1, 2]
    assert result is not left


def test_append_items_dedupes_by_dict_id_key() -> None:
    left = [{"id": "x", "v": 1}]
    result = append_items(left, [{"id": "x", "v": 2}, {"id": "y", "v": 3}])
    assert result == [{"id": "x", "v": 1}, {"id": "y", "v": 3}]


def test_append_items_always_appends_items_without_id() -> None:
    left: list[Any] = ["s", {"name": "no id"}, Item(None)]
    result = append_items(left, ["s", {"name": "no id"}, Item(None), 5, 5])
    assert result == ["s", {"name": "no id"}, Item(None), "s", {"name": "no id"}, Item(None), 5, 5]


def test_append_items_with_mixed_objects_and_dicts() -> None:
    result = append_items([Item("k")], [{"id": "k"}, {"id": "j"}, Item("j")])
    assert result == [Item("k"), {"id": "j"}]


# -- remove_tool_messages ---------------------------------------------------------------------


def user(text: str) -> Message:
    return Message.text_message(text, "user", message_id=f"u-{text}")


def answer(text: str) -> Message:
    return Message.text_message(text, "assistant", message_id=f"a-{text}")


def call(*call_ids: str, openai: bool = False) -> Message:
    if openai:
        return Message(
            role="assistant",
            content=[],
            tools_calls=[
                {"id": c, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                for c in call_ids
            ],
        )
    return Message(
        role="assistant", content=[ToolCallBlock(id=c, name="f", args={}) for c in call_ids]
    )


def result(*call_ids: str) -> Message:
    return Message.tool_message([ToolResultBlock(call_id=c, output="ok") for c in call_ids])


@pytest.mark.parametrize("openai", [False, True], ids=["blocks", "openai_dicts"])
def test_remove_tool_messages_drops_a_finished_exchange_and_keeps_the_answer(openai: bool) -> None:
    messages = [user("q"), call("c1", openai=openai), result("c1"), answer("done")]
    assert same_objects(remove_tool_messages(messages), [messages[0], messages[3]])


@pytest.mark.parametrize("openai", [False, True], ids=["blocks", "openai_dicts"])
def test_remove_tool_messages_drops_multi_round_exchanges(openai: bool) -> None:
    messages = [
        user("q"),
        call("c1", "c2", openai=openai),
        result("c1"),
        result("c2"),
        call("c3", openai=openai),
        result("c3"),
        answer("done"),
        user("q2"),
        call("c4", openai=openai),
        result("c4"),
        answer("done2"),
    ]
    kept = remove_tool_messages(messages)
    assert same_objects(kept, [messages[0], messages[6], messages[7], messages[10]])


def test_remove_tool_messages_one_tool_message_may_answer_several_calls() -> None:
    messages = [call("c1", "c2"), result("c1", "c2"), answer("done")]
    assert same_objects(remove_tool_messages(messages), [messages[2]])


@pytest.mark.parametrize("openai", [False, True], ids=["blocks", "openai_dicts"])
def test_remove_tool_messages_keeps_a_call_with_a_missing_result(openai: bool) -> None:
    messages = [user("q"), call("c1", "c2", openai=openai), result("c1"), answer("partial")]
    assert same_objects(remove_tool_messages(messages), messages)


def test_remove_tool_messages_keeps_a_call_without_any_result() -> None:
    messages = [user("q"), call("c1"), answer("gave up")]
    assert same_objects(remove_tool_messages(messages), messages)


@pytest.mark.parametrize("openai", [False, True], ids=["blocks", "openai_dicts"])
def test_remove_tool_messages_keeps_an_exchange_without_a_final_answer(openai: bool) -> None:
    messages = [user("q"), call("c1", openai=openai), result("c1")]
    assert same_objects(remove_tool_messages(messages), messages)
    followed_by_user = [*messages, user("next")]
    assert same_objects(remove_tool_messages(followed_by_user), followed_by_user)


def test_remove_tool_messages_keeps_a_multi_round_exchange_whose_last_round_is_open() -> None:
    messages = [user("q"), call("c1"), result("c1"), call("c2"), result("c2"), call("c3")]
    assert same_objects(remove_tool_messages(messages), messages)
    messages = [user("q"), call("c1"), result("c1"), call("c2"), answer("interrupted")]
    assert same_objects(remove_tool_messages(messages), messages)


def test_remove_tool_messages_mixed_complete_and_incomplete() -> None:
    messages = [
        user("q1"),
        call("c1"),
        result("c1"),
        answer("a1"),
        user("q2"),
        call("c2"),
        answer("a2-without-result"),
        user("q3"),
        call("c3"),
        result("c3"),
        answer("a3"),
    ]
    kept = remove_tool_messages(messages)
    expected = [messages[i] for i in (0, 3, 4, 5, 6, 7, 10)]
    assert same_objects(kept, expected)


def test_remove_tool_messages_without_tool_calls_keeps_everything() -> None:
    messages = [
        Message.text_message("sys", "system"),
        user("q"),
        answer("a"),
        Message(role="assistant", content="x", tools_calls=[]),
        result("orphan"),
    ]
    assert same_objects(remove_tool_messages(messages), messages)
    assert remove_tool_messages([]) == []


def test_remove_tool_messages_does_not_modify_its_input() -> None:
    messages = [user("q"), call("c1"), result("c1"), answer("a")]
    snapshot = list(messages)
    remove_tool_messages(messages)
    assert same_objects(messages, snapshot)


def test_remove_tool_messages_answer_with_text_and_tool_call_is_a_round() -> None:
    mixed = Message(
        role="assistant", content=[TextBlock(text="let me check"), ToolCallBlock(id="c1", name="f")]
    )
    messages = [user("q"), mixed, result("c1"), answer("a")]
    assert same_objects(remove_tool_messages(messages), [messages[0], messages[3]])
