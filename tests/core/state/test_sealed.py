"""Sealed messages: every way to change one is refused, copies are ordinary messages again."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import pytest

from tenxgraph.core.state import Message, TextBlock
from tenxgraph.core.state._construct import copied
from tenxgraph.core.state.message_block import ToolCallBlock
from tenxgraph.core.state.reducers import add_messages, seal_history
from tenxgraph.core.state.sealed import (
    FrozenDict,
    FrozenList,
    SealedError,
    is_sealed,
    kept_dict,
    seal,
)


def rich() -> Message:
    message = Message(
        role="assistant",
        content=[TextBlock(text="hi"), ToolCallBlock(id="c1", name="f", args={"a": [1, {"b": 2}]})],
        metadata={"tags": ["x"], "nested": {"k": "v"}},
        raw={"choices": [{"index": 0}]},
        tools_calls=[{"id": "c1", "function": {"name": "f"}}],
    )
    return message


CHANGES: dict[str, Callable[[Message], Any]] = {
    "set a field": lambda m: setattr(m, "role", "user"),
    "delete a field": lambda m: delattr(m, "role"),
    "append a block": lambda m: m.content.append(TextBlock(text="x")),
    "replace a block": lambda m: m.content.__setitem__(0, TextBlock(text="x")),
    "extend blocks": lambda m: m.content.extend([]),
    "clear blocks": lambda m: m.content.clear(),
    "pop a block": lambda m: m.content.pop(),
    "+= blocks": lambda m: m.content.__iadd__([]),
    "sort blocks": lambda m: m.content.sort(key=id),
    "change a block's field": lambda m: setattr(m.content[0], "text", "x"),
    "change tool args": lambda m: m.content[1].args.__setitem__("a", 0),
    "change nested tool args": lambda m: m.content[1].args["a"][1].update(b=3),
    "set metadata": lambda m: m.metadata.__setitem__("new", 1),
    "update metadata": lambda m: m.metadata.update(new=1),
    "setdefault metadata": lambda m: m.metadata.setdefault("new", 1),
    "pop metadata": lambda m: m.metadata.pop("tags"),
    "delete metadata": lambda m: m.metadata.__delitem__("tags"),
    "|= metadata": lambda m: m.metadata.__ior__({"new": 1}),
    "nested metadata list": lambda m: m.metadata["tags"].append("y"),
    "nested metadata dict": lambda m: m.metadata["nested"].clear(),
    "raw": lambda m: m.raw["choices"][0].__setitem__("index", 1),  # type: ignore[index]
    "tools_calls": lambda m: m.tools_calls[0]["function"].__setitem__("name", "g"),  # type: ignore[index]
    "the fields dict": lambda m: vars(m).__setitem__("role", "user"),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_every_change_to_a_sealed_message_is_refused_and_changes_nothing(change: str) -> None:
    message = rich()
    before = message.model_dump()
    seal(message)
    with pytest.raises(SealedError, match="part of a thread's history"):
        CHANGES[change](message)
    assert message.model_dump() == before


def test_the_error_is_a_type_error_that_says_how_to_change_a_copy() -> None:
    message = rich()
    seal(message)
    with pytest.raises(TypeError, match=r"model_copy\(update=\{\.\.\.\}, deep=True\)"):
        message.metadata["x"] = 1


def test_a_sealed_message_equals_and_serialises_as_before() -> None:
    message = rich()
    twin = copy.deepcopy(message)
    seal(message)
    assert message == twin
    assert twin == message
    assert message.model_dump_json() == twin.model_dump_json()
    assert Message.model_validate_json(message.model_dump_json()) == twin


@pytest.mark.parametrize(
    "make_copy",
    [
        lambda m: m.model_copy(deep=True),
        copy.deepcopy,
        lambda m: pickle.loads(pickle.dumps(m)),
        copied,
    ],
    ids=["model_copy-deep", "deepcopy", "pickle", "copied"],
)
def test_a_deep_copy_of_a_sealed_message_is_an_ordinary_message(
    make_copy: Callable[[Message], Message],
) -> None:
    message = rich()
    seal(message)
    twin = make_copy(message)
    assert not is_sealed(twin)
    twin.metadata["new"] = 1
    twin.content.append(TextBlock(text="more"))
    twin.content[0].text = "changed"
    twin.metadata["tags"].append("y")
    assert message.metadata == {"tags": ["x"], "nested": {"k": "v"}}
    assert message.text() == "hi"
    assert type(twin.content) is list
    assert type(twin.metadata) is dict


def test_a_model_copy_with_an_update_is_a_new_message() -> None:
    message = rich()
    seal(message)
    changed = message.model_copy(update={"role": "user"})
    assert changed.role == "user"
    assert message.role == "assistant"
    changed.reasoning = "thought"  # its own fields can change
    assert message.reasoning is None


def test_sealing_twice_is_free_and_keeps_the_same_objects() -> None:
    message = rich()
    seal(message)
    blocks = message.content
    seal(message)
    assert message.content is blocks
    assert type(blocks) is FrozenList
    assert type(message.metadata) is FrozenDict


def test_a_history_from_add_messages_seals_only_what_is_new() -> None:
    first = [Message.text_message(str(i)) for i in range(3)]
    history = add_messages([], first)
    seal_history(history)
    assert all(map(is_sealed, history))
    later = Message.text_message("later")
    longer = add_messages(history, [later])
    seal_history(longer)
    assert is_sealed(later)
    # a plain list is sealed whole
    plain = [Message.text_message("plain")]
    seal_history(plain)
    assert is_sealed(plain[0])


def test_sealed_messages_share_their_fields_set_and_copies_get_their_own() -> None:
    one, two = Message.text_message("a"), Message.text_message("b")
    names = set(one.__pydantic_fields_set__)
    seal(one)
    seal(two)
    assert one.__pydantic_fields_set__ is two.__pydantic_fields_set__
    assert set(one.__pydantic_fields_set__) == names
    changed = one.model_copy(update={"reasoning": "r"})
    assert "reasoning" in changed.__pydantic_fields_set__
    assert "reasoning" not in two.__pydantic_fields_set__


def test_messages_of_one_class_set_differently_keep_their_own_fields_set_when_sealed() -> None:
    # sealing remembers the last shared set of each class: a message whose set differs from
    # it must still get one equal to its own
    plain = Message.text_message("a")
    with_reasoning = Message(role="assistant", content=[], reasoning="why")
    expected = [set(m.model_fields_set) for m in (plain, with_reasoning)]
    assert expected[0] != expected[1]
    again = Message.text_message("b")
    for message in (plain, with_reasoning, again):
        seal(message)
    assert plain.model_fields_set == expected[0]
    assert with_reasoning.model_fields_set == expected[1]
    assert again.model_fields_set == expected[0]
    assert again.__pydantic_fields_set__ is plain.__pydantic_fields_set__


def test_a_sealed_message_is_left_to_reference_counting_not_the_cycle_collector() -> None:
    import gc
    import weakref

    message = rich()
    seal(message)
    held = [kept_dict(message), *(kept_dict(block) for block in message.content)]
    tree = [message, *held, message.content, *message.content, message.metadata]
    assert not any(map(gc.is_tracked, tree))
    gone = weakref.ref(message)
    del message, tree
    assert gone() is None  # freed at once by reference counting: it could not be in a cycle


class _Node:
    me: _Node


def holding_a_cycle(text: str) -> tuple[Message, Callable[[], object]]:
    """A message whose metadata holds an object in a reference cycle with itself, and a weak
    reference to that object."""
    import weakref

    node = _Node()
    node.me = node
    message = Message.text_message(text, role="assistant")
    message.metadata = {"node": node}
    return message, weakref.ref(node)


def test_a_sealed_message_holding_a_cycle_stays_with_the_cycle_collector() -> None:
    # An object sealing cannot freeze (here one in a reference cycle with itself) keeps the
    # containers that hold it, and the message, tracked: untracking them would hide the
    # cycle from the collector, and it would never be freed.
    import gc

    message, gone = holding_a_cycle("hi")
    seal(message)
    assert gc.is_tracked(message.metadata)
    assert gc.is_tracked(kept_dict(message))  # the compact dict slot holding metadata
    assert gc.is_tracked(message)
    del message
    gc.collect()
    assert gone() is None


def test_a_merged_history_is_left_to_reference_counting_and_its_messages_to_themselves() -> None:
    # The collector does not walk a history's list (it would walk every slot of each new one
    # on every turn); what is in it is tracked or not on its own, so a cycle inside a
    # message is still found, and dropping the history frees its messages at once.
    import gc
    import weakref

    holding, cyclic = holding_a_cycle("holds a cycle")  # not sealed: tracked
    plain = Message.text_message("plain")
    history = add_messages([plain], [holding])
    assert not gc.is_tracked(history)
    assert gc.is_tracked(holding)
    gone = weakref.ref(plain)
    del holding, plain
    gc.collect()
    assert cyclic() is not None  # held through the history
    del history
    assert gone() is None  # freed by reference counting: no collection needed
    gc.collect()
    assert cyclic() is None  # the cycle inside a message is still the collector's
