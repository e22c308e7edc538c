"""InMemoryCheckpointer specifics: instances are separate stores, and corrupted data poked
straight into its internals. The behaviour it shares with the other checkpointers is tested
in test_checkpointers.py."""

from __future__ import annotations

import pytest

from tenxgraph.core.exceptions import SerializationError
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tests.storage._support import Counted, msg, save, state_with


async def test_two_stores_are_independent() -> None:
    one, two = InMemoryCheckpointer(), InMemoryCheckpointer()
    await save(one, "t", state_with("in one"), None)
    assert await two.aversion("t") is None
    await save(two, "t", state_with("in two"), None)
    await save(two, "t", state_with(), 1, new=[msg("more")])
    assert await one.aversion("t") == 1
    await one.arequest_stop("t")
    assert not await two.ais_stop_requested("t")


# -- corrupted data -------------------------------------------------------------------------


async def stored(thread_id: str = "t") -> InMemoryCheckpointer:
    store = InMemoryCheckpointer()
    await save(store, thread_id, state_with("a", count=1), None)
    return store


async def test_corrupted_header_field_names_the_thread_and_field() -> None:
    store = await stored("thread-7")
    store._threads["thread-7"].versions[-1].header = '{"count": "x"}'
    with pytest.raises(SerializationError) as info:
        await store.aload("thread-7", Counted)
    assert "thread-7" in str(info.value)
    assert "count" in str(info.value)
    assert info.value.context["field"] == "count"
    assert info.value.context["thread_id"] == "thread-7"


async def test_corrupted_nested_header_field_is_named() -> None:
    store = await stored()
    header = '{"execution_meta": {"current_node": "a", "step": "many"}}'
    store._threads["t"].versions[-1].header = header
    with pytest.raises(SerializationError) as info:
        await store.aload("t", Counted)
    assert "execution_meta.step" in str(info.value)


async def test_corrupted_message_names_the_thread_and_field() -> None:
    store = await stored()
    store._threads["t"].messages[0] = '{"role": "robot", "content": []}'
    with pytest.raises(SerializationError) as info:
        await store.aload("t", Counted)
    assert "'t'" in str(info.value)
    assert "context.0.role" in str(info.value)


@pytest.mark.parametrize("header", ["not json", "[1, 2]", '{"count": ', ""])
async def test_header_that_is_not_a_json_object_is_a_serialization_error(header: str) -> None:
    store = await stored()
    store._threads["t"].versions[-1].header = header
    with pytest.raises(SerializationError, match="'t'"):
        await store.aload("t", Counted)


async def test_message_that_is_not_json_is_a_serialization_error() -> None:
    store = await stored()
    store._threads["t"].messages[0] = "{broken"
    with pytest.raises(SerializationError, match="'t'"):
        await store.aload("t", Counted)
