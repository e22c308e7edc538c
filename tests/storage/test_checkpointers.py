"""The behaviour every checkpointer shares, run against memory, SQLite and PostgreSQL.

Tests that reach into stored rows (corrupt data, row counts, schema version) run on the SQL
backends only, through `sql_backend`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tenxgraph.core.exceptions import (
    ResourceNotFoundError,
    SchemaVersionError,
    SerializationError,
    StaleStateError,
    StorageError,
)
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import BaseCheckpointer, CheckpointInfo, ThreadSnapshot
from tenxgraph.storage.checkpointer._sql import SCHEMA_VERSION
from tenxgraph.utils.constants import START
from tests.storage._support import Counted, msg, save, state_with, texts_of
from tests.storage.conftest import Backend


def test_is_a_base_checkpointer(checkpointer: BaseCheckpointer) -> None:
    assert isinstance(checkpointer, BaseCheckpointer)


# -- versions and compare-and-swap ----------------------------------------------------------


async def test_versions_start_at_one_and_increase_by_one_per_save(
    checkpointer: BaseCheckpointer,
) -> None:
    assert await checkpointer.aversion("t") is None
    state = state_with("a")
    assert await save(checkpointer, "t", state, None) == 1
    assert await save(checkpointer, "t", state, 1, new=[]) == 2
    assert await save(checkpointer, "t", state, 2, new=[]) == 3
    assert await checkpointer.aversion("t") == 3


async def test_stale_expected_version_raises_and_writes_nothing(
    checkpointer: BaseCheckpointer,
) -> None:
    await save(checkpointer, "t", state_with("a", count=1), None)
    await save(checkpointer, "t", state_with(count=2), 1, new=[msg("b")])
    with pytest.raises(StaleStateError) as info:
        await save(checkpointer, "t", state_with(count=99), 1, new=[msg("lost")], rewrite=False)
    assert isinstance(info.value, StorageError)
    assert "Thread 't' is at version 2, but this write was based on version 1" in str(info.value)
    assert info.value.context == {"thread_id": "t", "expected": 1, "found": 2}
    assert await checkpointer.aversion("t") == 2
    snapshot = await checkpointer.aload("t", Counted)
    assert snapshot is not None
    assert snapshot.state.count == 2
    assert [m.text() for m in snapshot.state.context] == ["a", "b"]
    assert [info.version for info in await checkpointer.ahistory("t")] == [2, 1]


async def test_stale_rewrite_writes_nothing(checkpointer: BaseCheckpointer) -> None:
    await save(checkpointer, "t", state_with("a", "b"), None)
    await save(checkpointer, "t", state_with(), 1, new=[msg("c")])
    with pytest.raises(StaleStateError):
        await save(checkpointer, "t", state_with("summary"), 1, rewrite=True)
    assert await texts_of(checkpointer, "t") == ["a", "b", "c"]
    assert await texts_of(checkpointer, "t", 1) == ["a", "b"]  # no rewrite happened


async def test_creating_an_existing_thread_is_stale(checkpointer: BaseCheckpointer) -> None:
    await save(checkpointer, "t", state_with("a"), None)
    with pytest.raises(StaleStateError) as info:
        await save(checkpointer, "t", state_with("other"), None)
    assert info.value.context == {"thread_id": "t", "expected": None, "found": 1}
    assert await texts_of(checkpointer, "t") == ["a"]


async def test_saving_a_version_of_a_missing_thread_is_stale(
    checkpointer: BaseCheckpointer,
) -> None:
    with pytest.raises(StaleStateError) as info:
        await save(checkpointer, "t", state_with("a"), 3)
    assert info.value.context["found"] is None
    assert await checkpointer.aversion("t") is None
    assert await checkpointer.alist_threads() == []
    assert await checkpointer.ahistory("t") == []


async def test_two_tasks_racing_on_one_version_exactly_one_wins(
    checkpointer: BaseCheckpointer,
) -> None:
    await save(checkpointer, "t", state_with("start"), None)
    results = await asyncio.gather(
        *(save(checkpointer, "t", state_with(), 1, new=[msg(f"from {n}")]) for n in range(2)),
        return_exceptions=True,
    )
    assert sorted(type(r).__name__ for r in results) == ["StaleStateError", "Version"]
    assert 2 in results
    assert await checkpointer.aversion("t") == 2
    texts = await texts_of(checkpointer, "t")
    assert len(texts) == 2
    assert texts[0] == "start"
    assert texts[1] in {"from 0", "from 1"}


async def test_two_tasks_racing_to_create_a_thread_exactly_one_wins(
    checkpointer: BaseCheckpointer,
) -> None:
    results = await asyncio.gather(
        *(save(checkpointer, "t", state_with(f"from {n}"), None) for n in range(2)),
        return_exceptions=True,
    )
    assert sorted(type(r).__name__ for r in results) == ["StaleStateError", "Version"]
    assert len(await texts_of(checkpointer, "t")) == 1
    assert await checkpointer.alist_threads() == ["t"]


async def test_writers_that_reload_and_retry_lose_no_message(
    checkpointer: BaseCheckpointer,
) -> None:
    await save(checkpointer, "t", state_with(), None, new=[])

    async def append(text: str) -> int:
        conflicts = 0
        while True:
            snapshot = await checkpointer.aload("t", Counted)
            assert snapshot is not None
            try:
                await save(checkpointer, "t", snapshot.state, snapshot.version, new=[msg(text)])
                return conflicts
            except StaleStateError:
                conflicts += 1

    names = [f"m{n}" for n in range(8)]
    await asyncio.gather(*(append(name) for name in names))
    texts = await texts_of(checkpointer, "t")
    assert sorted(texts) == names  # every message exactly once
    assert await checkpointer.aversion("t") == 1 + len(names)


# -- loading --------------------------------------------------------------------------------


async def test_aload_round_trips_the_state(checkpointer: BaseCheckpointer) -> None:
    state = state_with("hello", count=3, tags=["x"], data={"nested": {"n": [1, 2.5, None]}})
    state.context.append(msg("reply", "assistant"))
    state.context.append(msg('nul \x00, quote ", emoji \U0001f600, \u2028 separator'))
    state.context_summary = "summary"
    state.execution_meta.step = 4
    state.execution_meta.internal_data["k"] = "v"
    await save(checkpointer, "t", state, None)
    snapshot = await checkpointer.aload("t", Counted)
    assert isinstance(snapshot, ThreadSnapshot)
    assert (snapshot.thread_id, snapshot.version) == ("t", 1)
    assert isinstance(snapshot.state, Counted)
    assert snapshot.state == state


async def test_aload_of_an_unknown_thread_is_none(checkpointer: BaseCheckpointer) -> None:
    assert await checkpointer.aload("nobody", Counted) is None
    assert await checkpointer.aload("nobody", Counted, version=1) is None


async def test_messages_are_appended_per_save(checkpointer: BaseCheckpointer) -> None:
    state = state_with("one")
    version = await save(checkpointer, "t", state, None)
    state.context.append(msg("two"))
    await save(checkpointer, "t", state, version, new=[state.context[-1]])
    assert await texts_of(checkpointer, "t") == ["one", "two"]


async def test_header_is_replaced_on_every_save(checkpointer: BaseCheckpointer) -> None:
    version = await save(checkpointer, "t", state_with("a", count=1, data={"x": 1}), None)
    await save(checkpointer, "t", state_with(count=2), version, new=[])
    snapshot = await checkpointer.aload("t", Counted)
    assert snapshot is not None
    assert (snapshot.state.count, snapshot.state.data) == (2, {})
    assert [m.text() for m in snapshot.state.context] == ["a"]


async def test_aget_state_uses_the_bound_state_type(checkpointer: BaseCheckpointer) -> None:
    await save(checkpointer, "t", AgentState(context=[msg("a")]), None)
    plain = await checkpointer.aget_state({"thread_id": "t"})
    assert type(plain) is AgentState
    await save(checkpointer, "t", state_with("a", count=5), 1, new=[])
    # a header holding fields the class does not have is refused, never read without them
    with pytest.raises(SerializationError, match="'count'"):
        await checkpointer.aget_state({"thread_id": "t"})
    checkpointer.bind_state_type(Counted)
    bound = await checkpointer.aget_state({"thread_id": "t"})
    assert isinstance(bound, Counted)
    assert bound.count == 5
    assert await checkpointer.aget_state({"thread_id": "other"}) is None
    with pytest.raises(ValueError, match="thread_id"):
        await checkpointer.aget_state({})


async def test_changing_a_saved_state_afterwards_does_not_change_the_store(
    checkpointer: BaseCheckpointer,
) -> None:
    state = state_with("a", data={"k": 1}, tags=["x"])
    await save(checkpointer, "t", state, None)
    state.data["k"] = 2
    state.tags.append("y")
    state.count = 7
    state.context[0].metadata["changed"] = True
    state.context.append(msg("b"))
    snapshot = await checkpointer.aload("t", Counted)
    assert snapshot is not None
    got = snapshot.state
    assert (got.data, got.tags, got.count) == ({"k": 1}, ["x"], 0)
    assert [m.text() for m in got.context] == ["a"]
    assert got.context[0].metadata == {}


async def test_each_load_is_a_fresh_copy(checkpointer: BaseCheckpointer) -> None:
    await save(checkpointer, "t", state_with("a", data={"k": 1}), None)
    first = await checkpointer.aload("t", Counted)
    assert first is not None
    first.state.data["k"] = 2
    first.state.context.clear()
    second = await checkpointer.aload("t", Counted)
    assert second is not None
    assert second.state.data == {"k": 1}
    assert [m.text() for m in second.state.context] == ["a"]


# -- versions and history -------------------------------------------------------------------


def stepped(count: int, step: int, node: str, *texts: str) -> Counted:
    state = state_with(*texts, count=count)
    state.execution_meta.step = step
    state.execution_meta.current_node = node
    return state


async def test_history_is_newest_first_with_step_status_node_and_message_count(
    checkpointer: BaseCheckpointer,
) -> None:
    await save(checkpointer, "t", stepped(1, 0, START, "a"), None)
    await save(checkpointer, "t", stepped(2, 1, "agent"), 1, new=[msg("b"), msg("c")])
    done = stepped(3, 2, "tools")
    done.execution_meta.complete()
    await save(checkpointer, "t", done, 2, new=[])
    history = await checkpointer.ahistory("t")
    assert all(isinstance(item, CheckpointInfo) for item in history)
    assert [(h.version, h.step, h.node, h.message_count) for h in history] == [
        (3, 2, "tools", 3),
        (2, 1, "agent", 3),
        (1, 0, START, 1),
    ]
    assert [h.status for h in history] == ["completed", "running", "running"]
    assert {h.thread_id for h in history} == {"t"}
    assert history[0].created_at >= history[1].created_at >= history[2].created_at > 0
    assert [h.version for h in await checkpointer.ahistory("t", limit=2)] == [3, 2]
    assert await checkpointer.ahistory("t", limit=0) == []
    assert await checkpointer.ahistory("unknown") == []


async def test_load_at_an_older_version_gives_its_header_and_message_prefix(
    checkpointer: BaseCheckpointer,
) -> None:
    await save(checkpointer, "t", state_with("a", count=1), None)
    await save(checkpointer, "t", state_with(count=2), 1, new=[msg("b"), msg("c")])
    await save(checkpointer, "t", state_with(count=3), 2, new=[msg("d")])
    for version, count, texts in [
        (1, 1, ["a"]),
        (2, 2, ["a", "b", "c"]),
        (3, 3, ["a", "b", "c", "d"]),
    ]:
        snapshot = await checkpointer.aload("t", Counted, version)
        assert snapshot is not None
        assert snapshot.version == version
        assert snapshot.state.count == count
        assert [m.text() for m in snapshot.state.context] == texts


async def test_load_of_an_unknown_version_is_not_found(checkpointer: BaseCheckpointer) -> None:
    await save(checkpointer, "t", state_with("a"), None)
    for version in (0, 2, -1):
        with pytest.raises(ResourceNotFoundError) as info:
            await checkpointer.aload("t", Counted, version)
        assert f"Thread 't' has no version {version} (latest is 1)" in str(info.value)


async def test_rewrite_replaces_the_log_and_retires_older_versions(
    checkpointer: BaseCheckpointer,
) -> None:
    version = await save(checkpointer, "t", state_with("one", "two", "three"), None)
    version = await save(
        checkpointer, "t", state_with("summary of one to three"), version, rewrite=True
    )
    assert version == 2
    assert await texts_of(checkpointer, "t") == ["summary of one to three"]
    assert await texts_of(checkpointer, "t", 2) == ["summary of one to three"]
    with pytest.raises(StorageError, match="version 1 predates a rewrite") as info:
        await checkpointer.aload("t", Counted, 1)
    assert not isinstance(info.value, ResourceNotFoundError)
    # appending after a rewrite continues the new log
    await save(checkpointer, "t", state_with(), 2, new=[msg("four")])
    assert await texts_of(checkpointer, "t") == ["summary of one to three", "four"]
    assert await texts_of(checkpointer, "t", 2) == ["summary of one to three"]
    assert [h.message_count for h in await checkpointer.ahistory("t")] == [2, 1, 3]


async def test_rewrite_when_creating_a_thread(checkpointer: BaseCheckpointer) -> None:
    assert await save(checkpointer, "t", state_with("a", "b"), None, rewrite=True) == 1
    assert await texts_of(checkpointer, "t") == ["a", "b"]
    await save(checkpointer, "t", state_with(), 1, new=[msg("c")])
    assert await texts_of(checkpointer, "t", 1) == ["a", "b"]


# -- threads --------------------------------------------------------------------------------


async def test_list_threads_oldest_first_with_offset_and_limit(
    checkpointer: BaseCheckpointer,
) -> None:
    for name in ["c", "a", "b"]:
        await save(checkpointer, name, state_with(name), None)
    await save(checkpointer, "c", state_with(), 1, new=[msg("later")])  # updates keep the order
    assert await checkpointer.alist_threads() == ["c", "a", "b"]
    assert await checkpointer.alist_threads(offset=1) == ["a", "b"]
    assert await checkpointer.alist_threads(limit=2) == ["c", "a"]
    assert await checkpointer.alist_threads(offset=1, limit=1) == ["a"]
    assert await checkpointer.alist_threads(offset=5) == []


async def test_delete_thread_removes_everything_of_it(checkpointer: BaseCheckpointer) -> None:
    await save(checkpointer, "a", state_with("a"), None)
    await save(checkpointer, "a", state_with(), 1, new=[msg("a2")])
    await save(checkpointer, "b", state_with("b"), None)
    await checkpointer.arequest_stop("a")
    await checkpointer.arequest_stop("b")
    await checkpointer.aput_tool_result("a", "m1", "c1", {"out": 1})
    await checkpointer.aput_tool_result("b", "m1", "c1", {"out": 2})
    assert await checkpointer.adelete_thread("a") is True
    assert await checkpointer.adelete_thread("a") is False
    assert await checkpointer.aload("a", Counted) is None
    assert await checkpointer.aversion("a") is None
    assert await checkpointer.ahistory("a") == []
    assert not await checkpointer.ais_stop_requested("a")
    assert await checkpointer.aget_tool_result("a", "m1", "c1") is None
    assert await checkpointer.alist_threads() == ["b"]
    # the other thread is untouched
    assert await checkpointer.ais_stop_requested("b")
    assert await checkpointer.aget_tool_result("b", "m1", "c1") == {"out": 2}
    # a deleted thread can be created again from scratch
    assert await save(checkpointer, "a", state_with("new"), None) == 1
    assert await texts_of(checkpointer, "a") == ["new"]
    assert [h.version for h in await checkpointer.ahistory("a")] == [1]


async def test_delete_of_an_unknown_thread_is_false(checkpointer: BaseCheckpointer) -> None:
    assert await checkpointer.adelete_thread("nobody") is False


# -- tool ledger ----------------------------------------------------------------------------


async def test_tool_ledger_first_write_wins(checkpointer: BaseCheckpointer) -> None:
    assert await checkpointer.aget_tool_result("t", "m1", "c1") is None
    result: dict[str, Any] = {"content": "42", "nested": {"ok": True, "n": [1, None]}}
    assert await checkpointer.aput_tool_result("t", "m1", "c1", result) is True
    assert await checkpointer.aput_tool_result("t", "m1", "c1", {"content": "other"}) is False
    assert await checkpointer.aget_tool_result("t", "m1", "c1") == result
    # the key is (thread, message, call)
    assert await checkpointer.aput_tool_result("t", "m1", "c2", {"n": 2}) is True
    assert await checkpointer.aput_tool_result("t", "m2", "c1", {"n": 3}) is True
    assert await checkpointer.aput_tool_result("u", "m1", "c1", {"n": 4}) is True
    assert await checkpointer.aget_tool_result("t", "m1", "c2") == {"n": 2}
    assert await checkpointer.aget_tool_result("t", "m2", "c1") == {"n": 3}
    assert await checkpointer.aget_tool_result("u", "m1", "c1") == {"n": 4}
    assert await checkpointer.aget_tool_result("t", "m1", "c1") == result


async def test_tool_ledger_returns_copies(checkpointer: BaseCheckpointer) -> None:
    result: dict[str, Any] = {"items": [1]}
    await checkpointer.aput_tool_result("t", "m", "c", result)
    result["items"].append(2)
    got = await checkpointer.aget_tool_result("t", "m", "c")
    assert got == {"items": [1]}
    assert got is not None
    got["items"].append(3)
    assert await checkpointer.aget_tool_result("t", "m", "c") == {"items": [1]}


async def test_concurrent_ledger_writes_have_one_winner(checkpointer: BaseCheckpointer) -> None:
    wins = await asyncio.gather(
        *(checkpointer.aput_tool_result("t", "m", "c", {"by": n}) for n in range(5))
    )
    assert sorted(wins) == [False] * 4 + [True]
    winner = wins.index(True)
    assert await checkpointer.aget_tool_result("t", "m", "c") == {"by": winner}


# -- stop requests and lifecycle ------------------------------------------------------------


async def test_stop_request_flags(checkpointer: BaseCheckpointer) -> None:
    assert not await checkpointer.ais_stop_requested("t")
    await checkpointer.arequest_stop("t")
    assert await checkpointer.ais_stop_requested("t")
    assert not await checkpointer.ais_stop_requested("other")
    await checkpointer.arequest_stop("t")  # idempotent
    await checkpointer.aclear_stop_request("t")
    assert not await checkpointer.ais_stop_requested("t")
    await checkpointer.aclear_stop_request("t")  # clearing nothing is fine


async def test_lifecycle_hooks_are_harmless(checkpointer: BaseCheckpointer) -> None:
    await checkpointer.asetup()
    await checkpointer.asetup()
    await save(checkpointer, "t", state_with("a"), None)
    await checkpointer.aclose()
    await checkpointer.aclose()


# -- SQL backends: stored rows --------------------------------------------------------------


# a thread's key (its messages and checkpoints name it by that), from its id
_KEY = "thread_key = (SELECT thread_key FROM tx_threads WHERE thread_id = ?)"


async def message_rows(backend: Backend, thread_id: str = "t") -> int:
    rows = await backend.sql(f"SELECT COUNT(*) FROM tx_messages WHERE {_KEY}", thread_id)
    return int(rows[0][0])


async def test_reopening_the_storage_keeps_every_thread(sql_backend: Backend) -> None:
    store = sql_backend.store
    await save(store, "t", state_with("a", count=1), None)
    await save(store, "t", state_with(count=2), 1, new=[msg("b")])
    await store.aput_tool_result("t", "m", "c", {"ok": True})
    await store.arequest_stop("t")
    await store.aclose()
    reopened = sql_backend.open()
    assert await reopened.aversion("t") == 2
    assert await texts_of(reopened, "t") == ["a", "b"]
    assert await texts_of(reopened, "t", 1) == ["a"]
    assert await reopened.aget_tool_result("t", "m", "c") == {"ok": True}
    assert await reopened.ais_stop_requested("t")
    assert await save(reopened, "t", state_with(), 2, new=[msg("c")]) == 3


async def test_a_save_writes_only_the_new_messages(sql_backend: Backend) -> None:
    store = sql_backend.store
    state = state_with(*[f"m{n}" for n in range(50)])
    version = await save(store, "t", state, None)
    assert await message_rows(sql_backend) == 50
    before = await sql_backend.sql(
        f"SELECT seq, message_id, body FROM tx_messages WHERE {_KEY} ORDER BY seq", "t"
    )
    for step in range(3):
        version = await save(store, "t", state_with(), version, new=[msg(f"s{step}"), msg("x")])
        assert await message_rows(sql_backend) == 50 + 2 * (step + 1)
    version = await save(store, "t", state_with(count=9), version, new=[])
    assert await message_rows(sql_backend) == 56
    after = await sql_backend.sql(
        f"SELECT seq, message_id, body FROM tx_messages WHERE {_KEY} AND seq < 50 ORDER BY seq",
        "t",
    )
    assert after == before  # earlier rows are never rewritten
    checkpoints = await sql_backend.sql(f"SELECT COUNT(*) FROM tx_checkpoints WHERE {_KEY}", "t")
    assert checkpoints[0][0] == 5


async def test_a_rewrite_replaces_the_rows_and_bumps_the_generation(sql_backend: Backend) -> None:
    store = sql_backend.store
    version = await save(store, "t", state_with("a", "b", "c"), None)
    version = await save(store, "t", state_with("summary"), version, rewrite=True)
    assert await message_rows(sql_backend) == 1
    rows = await sql_backend.sql(
        "SELECT version, generation FROM tx_threads WHERE thread_id = ?", "t"
    )
    assert [tuple(r) for r in rows] == [(2, 1)]
    generations = await sql_backend.sql(
        f"SELECT version, generation FROM tx_checkpoints WHERE {_KEY} ORDER BY version", "t"
    )
    assert [tuple(r) for r in generations] == [(1, 0), (2, 1)]


async def test_a_stale_save_leaves_no_rows(sql_backend: Backend) -> None:
    store = sql_backend.store
    await save(store, "t", state_with("a"), None)
    await save(store, "t", state_with(), 1, new=[msg("b")])
    with pytest.raises(StaleStateError):
        await save(store, "t", state_with(), 1, new=[msg("c"), msg("d")])
    assert await message_rows(sql_backend) == 2
    assert (await sql_backend.sql("SELECT COUNT(*) FROM tx_checkpoints"))[0][0] == 2


async def test_a_newer_schema_version_is_refused(sql_backend: Backend) -> None:
    await save(sql_backend.store, "t", state_with("a"), None)
    await sql_backend.store.aclose()
    await sql_backend.sql("UPDATE tx_schema_version SET version = 999")
    newer = sql_backend.open()
    with pytest.raises(SchemaVersionError) as info:
        await newer.asetup()
    assert "999" in str(info.value)
    assert "Upgrade tenxgraph" in str(info.value)
    with pytest.raises(SchemaVersionError):
        await newer.aload("t", Counted)
    with pytest.raises(SchemaVersionError):
        await newer.aversion("t")


async def test_the_schema_is_created_by_any_first_call(sql_backend: Backend) -> None:
    assert not await sql_backend.store.ais_stop_requested("t")
    rows = await sql_backend.sql("SELECT version FROM tx_schema_version")
    assert [tuple(r) for r in rows] == [(SCHEMA_VERSION,)]
    await sql_backend.store.asetup()  # twice is fine
    assert [tuple(r) for r in await sql_backend.sql("SELECT version FROM tx_schema_version")] == [
        (SCHEMA_VERSION,)
    ]


# -- SQL backends: corrupt and hostile rows -------------------------------------------------


async def stored(backend: Backend, thread_id: str = "t") -> BaseCheckpointer:
    await save(backend.store, thread_id, state_with("a", count=1), None)
    return backend.store


async def set_header(backend: Backend, header: str, thread_id: str = "t") -> None:
    await backend.sql(f"UPDATE tx_checkpoints SET header = ? WHERE {_KEY}", header, thread_id)


async def set_message(backend: Backend, body: str, thread_id: str = "t") -> None:
    await backend.sql(f"UPDATE tx_messages SET body = ? WHERE {_KEY}", body, thread_id)


async def test_corrupt_header_field_names_the_thread_and_field(sql_backend: Backend) -> None:
    store = await stored(sql_backend, "thread-7")
    await set_header(sql_backend, '{"count": "x"}', "thread-7")
    with pytest.raises(SerializationError) as info:
        await store.aload("thread-7", Counted)
    assert "thread-7" in str(info.value)
    assert "count" in str(info.value)
    assert info.value.context == {"thread_id": "thread-7", "field": "count"}


async def test_corrupt_nested_header_field_is_named(sql_backend: Backend) -> None:
    store = await stored(sql_backend)
    await set_header(sql_backend, '{"execution_meta": {"current_node": "a", "step": "many"}}')
    with pytest.raises(SerializationError) as info:
        await store.aload("t", Counted)
    assert "execution_meta.step" in str(info.value)


async def test_corrupt_message_role_names_the_thread_and_field(sql_backend: Backend) -> None:
    store = await stored(sql_backend)
    await set_message(sql_backend, '{"role": "robot", "content": []}')
    with pytest.raises(SerializationError) as info:
        await store.aload("t", Counted)
    assert "'t'" in str(info.value)
    assert "context.0.role" in str(info.value)


@pytest.mark.parametrize("header", ["not json", "[1, 2]", '{"count": ', " ", "null", "42"])
async def test_header_that_is_not_a_json_object_is_a_serialization_error(
    sql_backend: Backend, header: str
) -> None:
    store = await stored(sql_backend)
    await set_header(sql_backend, header)
    with pytest.raises(SerializationError, match="'t'"):
        await store.aload("t", Counted)


@pytest.mark.parametrize("body", ["{broken", "", "not json", "]", '"just a string"'])
async def test_message_that_is_not_json_is_a_serialization_error(
    sql_backend: Backend, body: str
) -> None:
    store = await stored(sql_backend)
    await set_message(sql_backend, body)
    with pytest.raises(SerializationError, match="'t'"):
        await store.aload("t", Counted)


HOSTILE = {
    "deeply nested": '{"data": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}}",
    "huge integer": '{"count": ' + "9" * 100_000 + "}",
    "huge float": '{"count": 1e999999}',
    "nan": '{"count": NaN}',
    "python object": '{"count": {"__class__": "os.system", "py/object": "subprocess.Popen"}}',
    "pickle string": '{"count": "cos\\nsystem\\n(S\'echo pwned\'\\ntR."}',
    "wrong type": '{"data": [1, 2, 3]}',
    "message list smuggled into header": '{"context": "x", "count": []}',
}


@pytest.mark.parametrize("name", list(HOSTILE))
async def test_hostile_header_is_a_serialization_error(sql_backend: Backend, name: str) -> None:
    store = await stored(sql_backend)
    await set_header(sql_backend, HOSTILE[name])
    with pytest.raises(SerializationError, match="'t'"):
        await store.aload("t", Counted)


@pytest.mark.parametrize(
    "body",
    [
        '{"role": "user", "content": [], "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"role": "user", "content": [], "timestamp": ' + "9" * 100_000 + "}",
        '{"role": "user", "content": [{"type": "os.system", "text": "rm -rf /"}]}',
        '{"role": "user", "content": 42}',
        '{"role": {"__import__": "os"}, "content": []}',
        "[1, 2]",
    ],
    ids=["deep", "huge-number", "unknown-block", "content-type", "object-role", "list"],
)
async def test_hostile_message_is_a_serialization_error(sql_backend: Backend, body: str) -> None:
    store = await stored(sql_backend)
    await set_message(sql_backend, body)
    with pytest.raises(SerializationError, match="'t'"):
        await store.aload("t", Counted)


async def test_missing_message_rows_are_a_serialization_error(sql_backend: Backend) -> None:
    store = await stored(sql_backend)
    await save(store, "t", state_with(), 1, new=[msg("b")])
    await sql_backend.sql(f"DELETE FROM tx_messages WHERE {_KEY} AND seq = 1", "t")
    with pytest.raises(SerializationError, match="lists 2 messages but only 1"):
        await store.aload("t", Counted)
    assert await texts_of(store, "t", 1) == ["a"]  # the older version is still whole


@pytest.mark.parametrize(
    "raw",
    ["{broken", "[1]", '"x"', "[" * 100_000 + "]" * 100_000, "9" * 100_000, "NaN-ish"],
    ids=["broken", "list", "string", "deep", "huge-number", "garbage"],
)
async def test_corrupt_tool_result_is_a_serialization_error(sql_backend: Backend, raw: str) -> None:
    store = sql_backend.store
    await store.aput_tool_result("t", "m", "c", {"ok": True})
    await sql_backend.sql("UPDATE tx_tool_results SET result = ? WHERE thread_id = ?", raw, "t")
    with pytest.raises(SerializationError) as info:
        await store.aget_tool_result("t", "m", "c")
    assert info.value.context["thread_id"] == "t"
    assert "tool_result" in info.value.context["field"]


async def test_stored_message_is_validated_as_a_message(sql_backend: Backend) -> None:
    # a valid JSON message of another shape must not load as something else
    store = await stored(sql_backend)
    body = Message.text_message("fine", "user").model_dump_json()
    await set_message(sql_backend, body.replace('"user"', '"system"'))
    snapshot = await store.aload("t", Counted)
    assert snapshot is not None
    assert snapshot.state.context[0].role == "system"
