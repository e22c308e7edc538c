"""Compact sealed messages: what a kept message takes in memory, and that nothing public
changed (issue 17: a loaded message at most 2x its JSON).

A sealed `Message` keeps its id, role, content and timestamp in slots and only its other fields
not at their default in a dict; a sealed `TextBlock` keeps its text in a slot and no dict.
Every test here compares a sealed message with an unsealed twin made before sealing.
"""

from __future__ import annotations

import copy
import gc
import pickle
import tracemalloc
import weakref
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from tenxgraph.core.state import AgentState, Message, TextBlock, TokenUsages
from tenxgraph.core.state.message_block import AnnotationRef, ImageBlock, MediaRef, ToolCallBlock
from tenxgraph.core.state.sealed import (
    CompactFields,
    FrozenDict,
    FrozenList,
    SealedError,
    is_sealed,
    kept_dict,
    seal,
)
from tenxgraph.storage.checkpointer._codec import decode_messages, encode_message

_FILLER = "The quick brown fox jumps over the lazy dog. "


class Parsed(BaseModel):
    answer: int


def text_240(i: int) -> Message:
    return Message.text_message((f"{i:06d} " + _FILLER * 6)[:240], "user" if i % 2 else "assistant")


def rich() -> Message:
    return Message(
        message_id=7,
        role="assistant",
        content=[
            TextBlock(
                text="see", annotations=[AnnotationRef(url="u")], cache_control={"type": "e"}
            ),
            ToolCallBlock(id="c1", name="f", args={"a": [1, {"b": 2}]}),
            ImageBlock(media=MediaRef(url="http://x/i.png")),
        ],
        reasoning="because",
        tools_calls=[{"id": "c1", "function": {"name": "f"}}],
        metadata={"tags": ["x"]},
        usages=TokenUsages(completion_tokens=1, prompt_tokens=2, total_tokens=3),
        raw={"choices": [{"index": 0}]},
        parsed_content=Parsed(answer=42),
    )


KINDS: dict[str, Callable[[], Message]] = {
    "plain text": lambda: text_240(1),
    "text read from a row": lambda: decode_messages(AgentState, "t", [encode_message(text_240(2))])[
        0
    ],
    "delta chunk": lambda: Message.text_message("tok", "assistant", delta=True),
    "empty content, a system role": lambda: Message(role="system", content=[]),
    "every field set": rich,
    "timestamp None": lambda: Message(role="user", content="x", timestamp=None),
}


def pair(kind: str) -> tuple[Message, Message]:
    """(sealed, unsealed twin) of one message kind."""
    message = KINDS[kind]()
    twin = copy.deepcopy(message)
    seal(message)
    assert is_sealed(message)
    assert not is_sealed(twin)
    return message, twin


# -- memory -----------------------------------------------------------------------------------


def held_per_message(make: Callable[[], list[Message]]) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = make()
        gc.collect()
        size = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return size / len(kept)


@pytest.mark.parametrize("chars", [240, 800])
def test_a_loaded_and_sealed_text_message_takes_at_most_twice_its_json(chars: int) -> None:
    seal(text_240(0))  # the first seal's one-time set-up is not a message's bytes
    rows = [
        encode_message(Message.text_message((f"{i:06d} " + _FILLER * 20)[:chars]))
        for i in range(300)
    ]  # new ids: none of them made by an earlier read
    json_bytes = sum(len(row.encode()) for row in rows) / len(rows)

    def load() -> list[Message]:
        messages = decode_messages(AgentState, "t", rows)
        for message in messages:
            seal(message)
        return messages

    per_message = held_per_message(load)
    assert per_message <= 2 * json_bytes, (per_message, json_bytes)


def test_a_plain_sealed_text_message_keeps_no_dict_of_its_own() -> None:
    one, two = text_240(1), text_240(2)
    seal(one)
    seal(two)
    assert kept_dict(one) is kept_dict(two) is kept_dict(one.content[0])  # one shared, empty
    assert type(kept_dict(one)) is CompactFields
    assert not kept_dict(one)
    assert len(kept_dict(pair("every field set")[0])) == 6  # the fields not at their default


def test_sealing_leaves_an_unsealed_message_as_it_was() -> None:
    message = text_240(1)
    assert type(kept_dict(message)) is dict
    assert len(kept_dict(message)) == 11
    assert kept_dict(message) is message.__dict__


# -- nothing public changed -------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_sealed_message_dumps_exactly_as_its_unsealed_twin(kind: str) -> None:
    sealed, twin = pair(kind)
    assert sealed.model_dump_json() == twin.model_dump_json()  # byte for byte: key order too
    for options in ({}, {"mode": "json"}, {"exclude_unset": True}, {"exclude_defaults": True}):
        assert sealed.model_dump(**options) == twin.model_dump(**options)  # type: ignore[arg-type]
    assert list(sealed.model_dump()) == list(Message.model_fields)
    assert encode_message(sealed) == encode_message(twin)
    assert repr(sealed) == repr(twin)
    assert str(sealed) == str(twin)
    state, twin_state = AgentState(context=[sealed]), AgentState(context=[twin])
    assert state.model_dump_json() == twin_state.model_dump_json()


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_sealed_message_reads_every_field_as_its_unsealed_twin(kind: str) -> None:
    sealed, twin = pair(kind)
    for name in Message.model_fields:
        value, expected = getattr(sealed, name), getattr(twin, name)
        assert value == expected
        assert type(value) in (type(expected), FrozenList, FrozenDict)
    for block, twin_block in zip(sealed.content, twin.content, strict=True):
        assert type(block) is type(twin_block)
        for name in type(block).model_fields:
            assert getattr(block, name) == getattr(twin_block, name)
            assert type(getattr(block, name)) in (
                type(getattr(twin_block, name)),
                FrozenList,
                FrozenDict,
            )
    assert vars(sealed) == vars(twin)
    assert list(vars(sealed)) == list(vars(twin))
    assert sealed.model_fields_set == twin.model_fields_set
    assert sealed.text() == twin.text()
    assert sealed.has_tool_calls() == twin.has_tool_calls()
    assert type(sealed) is Message
    assert isinstance(sealed, BaseModel)
    assert weakref.ref(sealed)() is sealed
    for block in sealed.content:
        assert weakref.ref(block)() is block


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_sealed_message_equals_its_unsealed_twin_and_not_a_changed_one(kind: str) -> None:
    sealed, twin = pair(kind)
    assert sealed == twin
    assert twin == sealed
    assert (sealed != twin) is False
    assert [sealed] == [twin]
    for change in ({"role": "tool"}, {"timestamp": 1.0}, {"delta": not twin.delta}):
        assert sealed != twin.model_copy(update=change)
        assert twin.model_copy(update=change) != sealed


@pytest.mark.parametrize("kind", list(KINDS))
def test_copies_of_a_sealed_message_are_ordinary_equal_messages(kind: str) -> None:
    sealed, twin = pair(kind)
    copies = {
        "model_copy": sealed.model_copy(),
        "model_copy(deep=True)": sealed.model_copy(deep=True),
        "copy.copy": copy.copy(sealed),
        "copy.deepcopy": copy.deepcopy(sealed),
        "pickle": pickle.loads(pickle.dumps(sealed)),
    }
    for how, made in copies.items():
        assert type(made) is Message, how
        assert made == twin, how
        assert not is_sealed(made), how
        assert made.model_dump_json() == twin.model_dump_json(), how
        made.role = "tool"  # a copy can be changed ...
        assert made.role == "tool", how
        assert sealed.role == twin.role, how  # ... the sealed one not
    deep = copies["model_copy(deep=True)"]
    deep.metadata["new"] = 1
    deep.content.append(TextBlock(text="more"))
    assert "new" not in sealed.metadata
    assert len(sealed.content) == len(twin.content)
    updated = sealed.model_copy(update={"reasoning": "new"})
    assert updated.reasoning == "new"
    assert sealed.reasoning == twin.reasoning
    assert updated.model_dump(exclude={"reasoning"}) == twin.model_dump(exclude={"reasoning"})


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_sealed_message_validates_back_to_an_equal_message(kind: str) -> None:
    sealed, twin = pair(kind)
    assert Message.model_validate(sealed) is sealed  # an instance is taken as it is
    from_dump = Message.model_validate(sealed.model_dump())
    from_json = Message.model_validate_json(sealed.model_dump_json())
    expected = Message.model_validate_json(twin.model_dump_json())
    assert from_dump == Message.model_validate(twin.model_dump())
    assert from_json == expected
    state = AgentState.model_validate_json(AgentState(context=[sealed]).model_dump_json())
    assert state.context == [expected]
    with pytest.raises(ValidationError):
        Message.model_validate({**sealed.model_dump(), "role": "nobody"})


@pytest.mark.parametrize(
    "change",
    [
        lambda m: setattr(m, "delta", True),  # a field left out of its dict
        lambda m: setattr(m, "message_id", "x"),  # a field in a slot
        lambda m: setattr(m.content[0], "text", "x"),
        lambda m: setattr(m.content[0], "type", "x"),
        lambda m: vars(m).__setitem__("reasoning", "x"),
        lambda m: vars(m.content[0]).__setitem__("text", "x"),
        lambda m: delattr(m, "content"),
    ],
)
def test_a_compact_sealed_message_still_refuses_changes(change: Callable[[Any], Any]) -> None:
    sealed, twin = pair("plain text")
    with pytest.raises(SealedError):
        change(sealed)
    assert sealed == twin
    assert sealed.model_dump_json() == twin.model_dump_json()


def test_fields_still_read_as_pydantic_answers_on_the_class() -> None:
    for cls, name in [(Message, "delta"), (Message, "role"), (TextBlock, "text")]:
        assert not hasattr(cls, name)
        with pytest.raises(AttributeError):
            getattr(cls, name)
    assert Message(role="user", content="x").delta is False


def test_a_message_missing_a_field_is_sealed_whole_as_before() -> None:
    partial = Message.model_construct(role="user")  # no content: cannot be compact
    seal(partial)
    assert is_sealed(partial)
    assert type(kept_dict(partial)) is FrozenDict
    assert partial.role == "user"
    with pytest.raises(AttributeError):
        _ = partial.content
    with pytest.raises(SealedError):
        partial.role = "tool"


def test_subclasses_keep_their_fields_and_defaults_and_seal_whole() -> None:
    class Tagged(Message):
        tag: str = "t"

    class Noted(TextBlock):
        note: str = "n"

    message = Tagged(role="user", content=[Noted(text="a")])
    assert Tagged.model_fields["delta"].default is False
    assert (message.delta, message.tag, message.content[0].note) == (False, "t", "n")
    before = message.model_dump_json()
    seal(message)
    assert type(kept_dict(message)) is FrozenDict  # only the registered classes are compact
    assert message.model_dump_json() == before
    assert (message.delta, message.tag, message.content[0].text) == (False, "t", "a")
