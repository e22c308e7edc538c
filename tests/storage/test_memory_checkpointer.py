"""InMemoryCheckpointer specifics: instances are separate stores, its bounds (least recently
used threads dropped), and corrupted data poked straight into its internals. The behaviour it
shares with the other checkpointers is tested in test_checkpointers.py."""

from __future__ import annotations

import logging

import pytest

from tenxgraph.core.exceptions import SerializationError
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.storage.checkpointer.lease import Lease
from tests.storage._support import Counted, msg, save, state_with, texts_of


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


# -- bounds ---------------------------------------------------------------------------------


async def test_a_store_is_unbounded_unless_given_a_bound() -> None:
    store = InMemoryCheckpointer()
    assert (store.max_threads, store.max_bytes) == (None, None)
    for i in range(50):
        await save(store, f"t{i}", state_with("x" * 1000), None)
    assert len(await store.alist_threads()) == 50


async def test_max_threads_drops_the_least_recently_used_thread() -> None:
    store = InMemoryCheckpointer(max_threads=2)
    await save(store, "a", state_with("a"), None)
    await save(store, "b", state_with("b"), None)
    assert await store.aload("a", Counted) is not None  # read: now "b" is the older one
    await save(store, "c", state_with("c"), None)
    assert await store.alist_threads() == ["a", "c"]
    assert await store.aversion("b") is None
    assert await texts_of(store, "a") == ["a"]


async def test_a_dropped_thread_is_gone_with_its_ledger_and_stop_request() -> None:
    store = InMemoryCheckpointer(max_threads=1)
    await save(store, "a", state_with("a"), None)
    await store.aput_tool_result("a", "m1", "c1", {"output": "done"})
    await store.arequest_stop("a")
    await save(store, "b", state_with("b"), None)
    assert await store.aget_tool_result("a", "m1", "c1") is None
    assert not await store.ais_stop_requested("a")
    assert await store.ahistory("a") == []
    assert await save(store, "a", state_with("again"), None) == 1  # a new thread


async def test_a_thread_a_run_holds_is_never_dropped() -> None:
    store = InMemoryCheckpointer(max_threads=1)
    held = state_with("held")
    await store.asave(
        "held",
        expected_version=None,
        state=held,
        new_messages=held.context,
        lease=Lease("run-1", 60.0),
    )
    await save(store, "b", state_with("b"), None)
    assert await store.alist_threads() == ["held", "b"]  # over the bound while it is held
    await store.arelease_lease("held", "run-1")
    await save(store, "c", state_with("c"), None)
    assert await store.alist_threads() == ["c"]


async def test_max_bytes_drops_the_oldest_threads_until_the_store_fits() -> None:
    store = InMemoryCheckpointer(max_bytes=25_000)
    for name in ("a", "b", "c"):
        await save(store, name, state_with("x" * 10_000), None)
    assert await store.alist_threads() == ["b", "c"]
    await save(store, "b", state_with(), 1, new=[msg("y" * 10_000)])  # "b" grows: "c" goes
    assert await store.alist_threads() == ["b"]


async def test_the_thread_being_saved_is_kept_even_alone_over_max_bytes() -> None:
    store = InMemoryCheckpointer(max_bytes=1_000)
    await save(store, "big", state_with("x" * 10_000), None)
    assert await store.alist_threads() == ["big"]
    await save(store, "small", state_with("s"), None)
    assert await store.alist_threads() == ["small"]


async def test_the_byte_count_follows_rewrites_and_deletes() -> None:
    store = InMemoryCheckpointer(max_bytes=10**9)
    await save(store, "a", state_with("x" * 10_000), None)
    await store.aput_tool_result("a", "m1", "c1", {"output": "z" * 5_000})
    grown = store._bytes
    assert grown > 15_000
    await save(store, "a", state_with("short"), 1, rewrite=True)
    assert store._bytes < grown - 9_000  # the long message's row is gone, a header added
    await store.adelete_thread("a")
    assert store._bytes == 0


async def test_the_first_drop_logs_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    store = InMemoryCheckpointer(max_threads=1)
    with caplog.at_level(logging.WARNING, logger="tenxgraph.storage.checkpointer.memory"):
        for name in ("a", "b", "c"):
            await save(store, name, state_with(name), None)
    [record] = caplog.records
    assert "drops its least recently used threads" in record.getMessage()
    assert "'a'" in record.getMessage()
    assert "SqliteCheckpointer" in record.getMessage()


@pytest.mark.parametrize("bound", [0, -1, 1.5, True, "10"])
@pytest.mark.parametrize("name", ["max_threads", "max_bytes"])
def test_a_bound_must_be_a_positive_int(name: str, bound: object) -> None:
    with pytest.raises(ValueError, match=name):
        InMemoryCheckpointer(**{name: bound})  # type: ignore[arg-type]
