"""InMemoryCheckpointer: versioned saves, copies, corrupted data, threads, stop requests."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import Field

from tenxgraph.core.exceptions import SerializationError, StaleStateError, StorageError
from tenxgraph.core.state import AgentState, Message, append_items
from tenxgraph.storage.checkpointer import BaseCheckpointer, InMemoryCheckpointer, ThreadSnapshot


class Counted(AgentState):
    count: int = 0
    tags: Annotated[list[str], append_items] = Field(default_factory=list)
    data: dict[str, Any] = Field(default_factory=dict)


def msg(text: str, role: Any = "user") -> Message:
    return Message.text_message(text, role)


def state_with(*texts: str, **fields: Any) -> Counted:
    return Counted(context=[msg(t) for t in texts], **fields)


async def save(
    store: InMemoryCheckpointer,
    thread_id: str,
    state: Counted,
    expected: int | None,
    new: list[Message] | None = None,
    rewrite: bool = False,
) -> int:
    return await store.asave(
        thread_id,
        expected_version=expected,
        state=state,
        new_messages=state.context if new is None else new,
        rewrite=rewrite,
    )


def test_is_a_base_checkpointer() -> None:
    assert isinstance(InMemoryCheckpointer(), BaseCheckpointer)


# -- versions -------------------------------------------------------------------------------


async def test_versions_start_at_one_and_increase_by_one_per_save() -> None:
    store = InMemoryCheckpointer()
    assert await store.aversion("t") is None
    state = state_with("a")
    assert await save(store, "t", state, None) == 1
    assert await save(store, "t", state, 1, new=[]) == 2
    assert await save(store, "t", state, 2, new=[]) == 3
    assert await store.aversion("t") == 3


async def test_stale_expected_version_raises_and_writes_nothing() -> None:
    store = InMemoryCheckpointer()
    await save(store, "t", state_with("a", count=1), None)
    await save(store, "t", state_with(count=2), 1, new=[msg("b")])
    with pytest.raises(StaleStateError) as info:
        await save(store, "t", state_with(count=99), 1, new=[msg("lost")])
    assert isinstance(info.value, StorageError)
    assert "'t'" in str(info.value)
    assert await store.aversion("t") == 2
    snapshot = await store.aload("t", Counted)
    assert snapshot is not None
    assert snapshot.state.count == 2
    assert [m.text() for m in snapshot.state.context] == ["a", "b"]


async def test_creating_an_existing_thread_is_stale() -> None:
    store = InMemoryCheckpointer()
    await save(store, "t", state_with("a"), None)
    with pytest.raises(StaleStateError):
        await save(store, "t", state_with("other"), None)
    snapshot = await store.aload("t", Counted)
    assert snapshot is not None
    assert [m.text() for m in snapshot.state.context] == ["a"]


async def test_saving_a_version_of_a_missing_thread_is_stale() -> None:
    store = InMemoryCheckpointer()
    with pytest.raises(StaleStateError):
        await save(store, "t", state_with("a"), 3)
    assert await store.aversion("t") is None
    assert await store.alist_threads() == []


# -- loading --------------------------------------------------------------------------------


async def test_aload_round_trips_the_state() -> None:
    store = InMemoryCheckpointer()
    state = state_with("hello", count=3, tags=["x"], data={"nested": {"n": [1, 2]}})
    state.context.append(msg("reply", "assistant"))
    state.context_summary = "summary"
    state.execution_meta.step = 4
    state.execution_meta.internal_data["k"] = "v"
    await save(store, "t", state, None)
    snapshot = await store.aload("t", Counted)
    assert isinstance(snapshot, ThreadSnapshot)
    assert (snapshot.thread_id, snapshot.version) == ("t", 1)
    assert isinstance(snapshot.state, Counted)
    assert snapshot.state == state


async def test_aload_of_an_unknown_thread_is_none() -> None:
    assert await InMemoryCheckpointer().aload("nobody", Counted) is None


async def test_messages_are_appended_per_save() -> None:
    store = InMemoryCheckpointer()
    state = state_with("one")
    version = await save(store, "t", state, None)
    state.context.append(msg("two"))
    version = await save(store, "t", state, version, new=[state.context[-1]])
    snapshot = await store.aload("t", Counted)
    assert snapshot is not None
    assert [m.text() for m in snapshot.state.context] == ["one", "two"]


async def test_rewrite_replaces_the_message_log() -> None:
    store = InMemoryCheckpointer()
    version = await save(store, "t", state_with("one", "two", "three"), None)
    rewritten = state_with("summary of one to three")
    version = await save(store, "t", rewritten, version, rewrite=True)
    snapshot = await store.aload("t", Counted)
    assert snapshot is not None
    assert snapshot.version == version == 2
    assert [m.text() for m in snapshot.state.context] == ["summary of one to three"]


async def test_header_is_replaced_on_every_save() -> None:
    store = InMemoryCheckpointer()
    version = await save(store, "t", state_with("a", count=1, data={"x": 1}), None)
    await save(store, "t", state_with(count=2), version, new=[])
    snapshot = await store.aload("t", Counted)
    assert snapshot is not None
    assert (snapshot.state.count, snapshot.state.data) == (2, {})
    assert [m.text() for m in snapshot.state.context] == ["a"]


async def test_aget_state_uses_the_bound_state_type() -> None:
    store = InMemoryCheckpointer()
    await save(store, "t", state_with("a", count=5), None)
    plain = await store.aget_state({"thread_id": "t"})
    assert type(plain) is AgentState
    store.bind_state_type(Counted)
    bound = await store.aget_state({"thread_id": "t"})
    assert isinstance(bound, Counted)
    assert bound.count == 5
    assert await store.aget_state({"thread_id": "other"}) is None
    with pytest.raises(ValueError, match="thread_id"):
        await store.aget_state({})


# -- copies ---------------------------------------------------------------------------------


async def test_changing_a_saved_state_afterwards_does_not_change_the_store() -> None:
    store = InMemoryCheckpointer()
    state = state_with("a", data={"k": 1}, tags=["x"])
    await save(store, "t", state, None)
    state.data["k"] = 2
    state.tags.append("y")
    state.count = 7
    state.context[0].metadata["changed"] = True
    state.context.append(msg("b"))
    snapshot = await store.aload("t", Counted)
    assert snapshot is not None
    got = snapshot.state
    assert (got.data, got.tags, got.count) == ({"k": 1}, ["x"], 0)
    assert [m.text() for m in got.context] == ["a"]
    assert got.context[0].metadata == {}


async def test_each_load_is_a_fresh_copy() -> None:
    store = InMemoryCheckpointer()
    await save(store, "t", state_with("a", data={"k": 1}), None)
    first = await store.aload("t", Counted)
    assert first is not None
    first.state.data["k"] = 2
    first.state.context.clear()
    second = await store.aload("t", Counted)
    assert second is not None
    assert second.state.data == {"k": 1}
    assert [m.text() for m in second.state.context] == ["a"]
    assert second.state is not first.state


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
    store._threads["t"].versions[-1].header = '{"execution_meta": {"current_node": "a", "step": "many"}}'
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


# -- threads --------------------------------------------------------------------------------


async def test_list_threads_oldest_first_with_offset_and_limit() -> None:
    store = InMemoryCheckpointer()
    for name in ["c", "a", "b"]:
        await save(store, name, state_with(name), None)
    assert await store.alist_threads() == ["c", "a", "b"]
    assert await store.alist_threads(offset=1) == ["a", "b"]
    assert await store.alist_threads(limit=2) == ["c", "a"]
    assert await store.alist_threads(offset=1, limit=1) == ["a"]


async def test_delete_thread() -> None:
    store = InMemoryCheckpointer()
    await save(store, "a", state_with("a"), None)
    await save(store, "b", state_with("b"), None)
    await store.arequest_stop("a")
    assert await store.adelete_thread("a") is True
    assert await store.adelete_thread("a") is False
    assert await store.aload("a", Counted) is None
    assert await store.aversion("a") is None
    assert not await store.ais_stop_requested("a")
    assert await store.alist_threads() == ["b"]
    # a deleted thread can be created again from scratch
    assert await save(store, "a", state_with("new"), None) == 1


# -- stop requests --------------------------------------------------------------------------


async def test_stop_request_flags() -> None:
    store = InMemoryCheckpointer()
    assert not await store.ais_stop_requested("t")
    await store.arequest_stop("t")
    assert await store.ais_stop_requested("t")
    assert not await store.ais_stop_requested("other")
    await store.arequest_stop("t")  # idempotent
    await store.aclear_stop_request("t")
    assert not await store.ais_stop_requested("t")
    await store.aclear_stop_request("t")  # clearing nothing is fine


async def test_lifecycle_hooks_are_harmless() -> None:
    store = InMemoryCheckpointer()
    await store.asetup()
    await store.asetup()
    await save(store, "t", state_with("a"), None)
    await store.aclose()
