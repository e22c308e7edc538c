"""Threads keyed by a small integer (schema 6): tx_messages and tx_checkpoints name a thread by
its `tx_threads.thread_key`, not by its text id, which is kept once, in the thread's row.

A schema-5 database upgrades and every thread reads back as it was stored; the text id is in
no column or index of those tables, and each thread's rows carry its own key; a thread
deleted and made anew under the same id starts clean; two threads never see each other's
rows."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.core.exceptions import ResourceNotFoundError
from tenxgraph.core.state import AgentState, ExecutionStatus, Message
from tenxgraph.storage.checkpointer._sql import SCHEMA_VERSION, encode_tool_result
from tenxgraph.storage.checkpointer.base import checkpoint_fields, encode_header, encode_message
from tenxgraph.storage.checkpointer.postgres import MIGRATIONS as PG_MIGRATIONS
from tenxgraph.storage.checkpointer.postgres import pg_id_text
from tenxgraph.storage.checkpointer.sqlite import MIGRATIONS as SQLITE_MIGRATIONS
from tenxgraph.storage.checkpointer.sqlite import id_key
from tests.storage._support import Counted, msg, save, state_with, texts_of
from tests.storage.conftest import Backend

# the columns of the two tables a thread fills, by its key
MESSAGE_COLUMNS = {"thread_key", "seq", "message_id", "body"}
CHECKPOINT_COLUMNS = {
    "thread_key", "version", "header", "message_count", "generation", "log_start", "step",
    "status", "node", "created_at",
}  # fmt: skip


def dumped(messages: list[Message]) -> list[dict[str, Any]]:
    return [m.model_dump() for m in messages]


async def key_of(backend: Backend, thread_id: str) -> int | None:
    rows = await backend.sql("SELECT thread_key FROM tx_threads WHERE thread_id = ?", thread_id)
    return None if not rows else int(rows[0][0])


async def rows_of_key(backend: Backend, key: int) -> tuple[list[str], int]:
    """The message ids (in log order) and the number of checkpoints stored under `key`."""
    rows = await backend.sql(
        "SELECT message_id FROM tx_messages WHERE thread_key = ? ORDER BY seq", key
    )
    if backend.name == "postgres":
        ids = [pg_id_text(r[0].hex()) for r in rows]
    else:  # a hex id as its bytes, any other as text
        ids = [r[0].hex() if isinstance(r[0], bytes) else str(r[0]) for r in rows]
    checkpoints = await backend.sql("SELECT COUNT(*) FROM tx_checkpoints WHERE thread_key = ?", key)
    return ids, int(checkpoints[0][0])


async def table_columns(backend: Backend, table: str) -> set[str]:
    if backend.name == "sqlite":
        rows = await backend.sql("SELECT name FROM pragma_table_info(?)", table)
    else:
        rows = await backend.sql(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = ?",
            table,
        )
    return {str(r[0]) for r in rows}


async def table_definitions(backend: Backend, table: str) -> list[str]:
    """The SQL that defines `table` and its indexes."""
    if backend.name == "sqlite":
        rows = await backend.sql(
            "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL", table
        )
    else:
        rows = await backend.sql(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = ?",
            table,
        )
    return [str(r[0]) for r in rows]


async def assert_keyed_by_thread_key(backend: Backend) -> None:
    """The text thread id is in no column or index of the tables a thread fills, and every
    row there belongs to a thread that exists."""
    assert await table_columns(backend, "tx_messages") == MESSAGE_COLUMNS
    assert await table_columns(backend, "tx_checkpoints") == CHECKPOINT_COLUMNS
    for table in ("tx_messages", "tx_checkpoints"):
        definitions = await table_definitions(backend, table)
        assert definitions, table
        assert not [d for d in definitions if "thread_id" in d], definitions
        strays = await backend.sql(
            f"SELECT COUNT(*) FROM {table} WHERE thread_key NOT IN "
            "(SELECT thread_key FROM tx_threads)"
        )
        assert strays == [(0,)], table
    keys = await backend.sql("SELECT COUNT(DISTINCT thread_key), COUNT(*) FROM tx_threads")
    assert keys[0][0] == keys[0][1]  # one key per thread
    if backend.name == "postgres":  # keys that only grow within a thread fill their pages
        options = await backend.sql(
            "SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relname IN "
            "('tx_messages_pkey', 'tx_checkpoints_pkey') ORDER BY c.relname"
        )
        assert options == [
            ("tx_checkpoints_pkey", ["fillfactor=100"]),
            ("tx_messages_pkey", ["fillfactor=100"]),
        ]


# -- a schema-5 database, written row by row as schema 5 wrote it -----------------------------


async def schema_5(backend: Backend) -> None:
    """An empty schema-5 database, made by the statements of versions 1 to 5."""
    if backend.name == "sqlite":
        statements = [s for version in range(1, 6) for s in SQLITE_MIGRATIONS[version]]
    else:
        await backend.sql(f'CREATE SCHEMA IF NOT EXISTS "{backend.schema}"')
        quoted = f'"{backend.schema}"'
        statements = [s for version in range(1, 6) for s in PG_MIGRATIONS[version](quoted)]
    for statement in statements:
        await backend.sql(statement)
    await backend.sql("CREATE TABLE tx_schema_version (version INTEGER)")
    await backend.sql("INSERT INTO tx_schema_version VALUES (5)")


async def v5_messages(backend: Backend, thread_id: str, seq: int, *messages: Message) -> None:
    for message in messages:
        message_id = str(message.message_id)
        stored = id_key(message_id) if backend.name == "sqlite" else message_id
        await backend.sql(
            "INSERT INTO tx_messages (thread_id, seq, message_id, body) VALUES (?, ?, ?, ?)",
            thread_id, seq, stored, encode_message(message, id_column=True),
        )  # fmt: skip
        seq += 1


async def v5_checkpoint(
    backend: Backend,
    thread_id: str,
    version: int,
    state: AgentState,
    count: int,
    *,
    log_start: int = 0,
    generation: int = 0,
) -> None:
    step, status, node = checkpoint_fields(state)
    await backend.sql(
        "INSERT INTO tx_checkpoints (thread_id, version, header, message_count, generation, "
        "log_start, step, status, node, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        thread_id, version, encode_header(state, thread_id, listed=True), count, generation,
        log_start, step, status, node, 100.0 + version,
    )  # fmt: skip


async def v5_thread(
    backend: Backend,
    thread_id: str,
    version: int,
    created: float,
    *,
    generation: int = 0,
    log_start: int = 0,
) -> None:
    await backend.sql(
        "INSERT INTO tx_threads (thread_id, version, generation, created_at, updated_at, "
        "log_start, oldest_generation) VALUES (?, ?, ?, ?, ?, ?, 0)",
        thread_id, version, generation, created, created, log_start,
    )  # fmt: skip


def counted(thread_id: str, count: int, *, node: str | None = None) -> Counted:
    state = Counted(count=count)
    state.execution_meta.thread_id = thread_id
    if node is not None:
        state.execution_meta.set_current_node(node)
        state.execution_meta.advance_step()
        state.execution_meta.status = ExecutionStatus.COMPLETED
    return state


ALPHA, UUID_THREAD, RESTORED = "alpha", str(uuid.UUID(int=7)), "restored"


async def test_a_schema_5_database_upgrades_and_every_thread_reads_back_the_same(
    sql_backend: Backend,
) -> None:
    backend = sql_backend
    await schema_5(backend)
    # alpha: two versions, a system message and a message whose id is a number
    rules, a1, a2 = msg("rules", "system"), msg("a1"), Message.text_message("a2", message_id=5)
    alpha = {
        1: (counted(ALPHA, 1), [rules, a1]),
        2: (counted(ALPHA, 2, node="answer"), [rules, a1, a2]),
    }
    await v5_messages(backend, ALPHA, 0, rules, a1, a2)
    await v5_checkpoint(backend, ALPHA, 1, alpha[1][0], 2)
    await v5_checkpoint(backend, ALPHA, 2, alpha[2][0], 3)
    await v5_thread(backend, ALPHA, 2, 1.0)
    # a thread named by a UUID, as a service names them
    u1, u2 = msg("u1"), msg("u2", "assistant")
    uuids = {1: (counted(UUID_THREAD, 7), [u1, u2])}
    await v5_messages(backend, UUID_THREAD, 0, u1, u2)
    await v5_checkpoint(backend, UUID_THREAD, 1, uuids[1][0], 2)
    await v5_thread(backend, UUID_THREAD, 1, 2.0)
    # restored: version 3 restores version 1, its messages copied at the end of the log
    r1, r2, r3 = msg("r1"), msg("r2"), msg("r3", "system")
    restored = {
        1: (counted(RESTORED, 1), [r1, r2]),
        2: (counted(RESTORED, 2, node="answer"), [r1, r2, r3]),
        3: (counted(RESTORED, 1), [r1, r2]),
    }
    await v5_messages(backend, RESTORED, 0, r1, r2, r3, r1, r2)
    await v5_checkpoint(backend, RESTORED, 1, restored[1][0], 2)
    await v5_checkpoint(backend, RESTORED, 2, restored[2][0], 3)
    await v5_checkpoint(backend, RESTORED, 3, restored[3][0], 2, log_start=3, generation=1)
    await v5_thread(backend, RESTORED, 3, 3.0, generation=1, log_start=3)
    # rows of a thread without a thread row (nothing reads them) and the thread-id tables
    await v5_messages(backend, "ghost", 0, msg("boo"))
    await v5_checkpoint(backend, "ghost", 1, counted("ghost", 0), 1)
    await backend.sql(
        "INSERT INTO tx_tool_results (thread_id, message_id, call_id, result, created_at) "
        "VALUES (?, ?, ?, ?, 1.0)",
        ALPHA, "m1", "c1", encode_tool_result({"ok": True}),
    )  # fmt: skip
    await backend.sql("INSERT INTO tx_stop_requests VALUES (?, 1.0)", UUID_THREAD)

    store = backend.open()
    threads = {ALPHA: alpha, UUID_THREAD: uuids, RESTORED: restored}
    for thread_id, versions in threads.items():
        assert await store.aversion(thread_id) == max(versions)
        for version, (state, messages) in versions.items():
            loaded = await store.aload(thread_id, Counted, version)
            assert loaded is not None
            assert loaded.version == version
            assert loaded.state.model_dump(exclude={"context"}) == state.model_dump(
                exclude={"context"}
            )
            assert dumped(loaded.state.context) == dumped(messages)
        history = await store.ahistory(thread_id)
        assert [(i.version, i.message_count, i.created_at) for i in history] == [
            (v, len(versions[v][1]), 100.0 + v) for v in sorted(versions, reverse=True)
        ]
        assert [(i.step, i.status, i.node) for i in history] == [
            checkpoint_fields(versions[v][0]) for v in sorted(versions, reverse=True)
        ]
        # a lazy load: the latest messages, the others read from the log when wanted
        _, latest = versions[max(versions)]
        recent = await store.aload_recent(thread_id, Counted, 1, [m.message_id for m in latest])
        assert recent is not None
        assert dumped(list(recent.state.context)) == dumped(latest)
    assert (await backend.sql("SELECT version FROM tx_schema_version")) == [(SCHEMA_VERSION,)]
    assert (await backend.sql("SELECT COUNT(*) FROM tx_messages")) == [(3 + 2 + 5,)]  # no ghost
    assert (await backend.sql("SELECT COUNT(*) FROM tx_checkpoints")) == [(2 + 1 + 3,)]
    await assert_keyed_by_thread_key(backend)
    assert await store.alist_threads() == [ALPHA, UUID_THREAD, RESTORED]
    page = await store.alist_thread_page()
    assert [(t.thread_id, t.version, t.message_count, t.node) for t in page.threads] == [
        (ALPHA, 2, 3, "answer"), (UUID_THREAD, 1, 2, "__start__"), (RESTORED, 3, 2, "__start__"),
    ]  # fmt: skip
    # the lazy-history queries: the log read, ids found, system messages, in each log's bounds
    assert dumped(await store.aread_log(RESTORED, Counted, 1, 0, 2)) == dumped([r1, r2])
    assert dumped(await store.aread_log(ALPHA, Counted, 0, 1, 3)) == dumped([a1, a2])
    assert await store.afind_ids(ALPHA, 0, [5, a1.message_id, "nope"], 3) == {"5", a1.message_id}
    assert await store.afind_ids(RESTORED, 1, [r1.message_id, r3.message_id], 2) == {r1.message_id}
    system = await store.asystem_messages(ALPHA, Counted, 0, 0, 3)
    assert [(i, m.message_id) for i, m in system] == [(0, rules.message_id)]
    assert await store.asystem_messages(RESTORED, Counted, 1, 0, 2) == []
    assert await store.aget_tool_result(ALPHA, "m1", "c1") == {"ok": True}
    assert await store.ais_stop_requested(UUID_THREAD)
    # new saves append after the old rows; a restore copies them
    a3, r4 = msg("a3"), msg("r4")
    assert await save(store, ALPHA, counted(ALPHA, 3), 2, new=[a3]) == 3
    assert await save(store, RESTORED, counted(RESTORED, 4), 3, new=[r4]) == 4
    alpha_key, restored_key = await key_of(backend, ALPHA), await key_of(backend, RESTORED)
    assert alpha_key is not None
    assert restored_key is not None
    assert await rows_of_key(backend, alpha_key) == (
        [str(m.message_id) for m in (rules, a1, a2, a3)], 3,
    )  # fmt: skip
    assert await rows_of_key(backend, restored_key) == (
        [str(m.message_id) for m in (r1, r2, r3, r1, r2, r4)], 4,
    )  # fmt: skip
    assert await texts_of(store, ALPHA) == ["rules", "a1", "a2", "a3"]
    assert await texts_of(store, RESTORED) == ["r1", "r2", "r4"]
    assert await store.arestore(ALPHA, 1, expected_version=3) == 4
    assert await texts_of(store, ALPHA) == ["rules", "a1"]
    assert await texts_of(store, ALPHA, 3) == ["rules", "a1", "a2", "a3"]
    # a thread made after the upgrade gets a key of its own, never one a deleted thread had
    assert await store.adelete_thread(RESTORED)
    assert await save(store, "later", state_with("l1"), None) == 1
    later_key = await key_of(backend, "later")
    assert later_key is not None
    assert later_key > max(alpha_key, restored_key)
    assert await texts_of(store, "later") == ["l1"]
    assert await store.alist_threads() == [ALPHA, UUID_THREAD, "later"]
    await assert_keyed_by_thread_key(backend)


# -- keys -----------------------------------------------------------------------------------


async def test_the_text_id_is_kept_once_and_each_threads_rows_carry_its_key(
    sql_backend: Backend,
) -> None:
    store = sql_backend.store
    threads = [str(uuid.UUID(int=n)) for n in (1, 2, 3)]
    stored: dict[str, list[Message]] = {}
    for n, thread_id in enumerate(threads, start=1):
        messages = [msg(f"{thread_id}-{i}") for i in range(n)]
        version = await save(store, thread_id, state_with(), None, new=messages[:1])
        for message in messages[1:]:
            version = await save(store, thread_id, state_with(), version, new=[message])
        stored[thread_id] = messages
    await assert_keyed_by_thread_key(sql_backend)
    keys = [await key_of(sql_backend, t) for t in threads]
    assert len(set(keys)) == len(threads)
    for thread_id, key in zip(threads, keys, strict=True):
        assert key is not None
        ids = [str(m.message_id) for m in stored[thread_id]]
        assert await rows_of_key(sql_backend, key) == (ids, len(ids))  # one version a message


# -- deleted, and made again ------------------------------------------------------------------


async def test_a_thread_deleted_and_made_again_under_its_id_starts_clean(
    sql_backend: Backend,
) -> None:
    store, other = sql_backend.store, sql_backend.open()  # `other`: another process
    rules, a, b = msg("old rules", "system"), msg("a"), msg("b")
    await save(store, "t", Counted(context=[rules, a], count=1), None)
    await save(store, "t", state_with(count=2), 1, new=[b])
    await store.aput_tool_result("t", "m", "c", {"ok": 1})
    await store.arequest_stop("t")
    assert await texts_of(other, "t") == ["old rules", "a", "b"]  # the other one read it
    old_key = await key_of(sql_backend, "t")
    assert old_key is not None

    assert await store.adelete_thread("t")
    assert not await store.adelete_thread("t")
    assert await rows_of_key(sql_backend, old_key) == ([], 0)
    assert await other.aload("t", Counted) is None
    assert await other.ahistory("t") == []
    assert await other.alist_threads() == []
    assert await other.aget_tool_result("t", "m", "c") is None
    assert not await other.ais_stop_requested("t")

    fresh = msg("fresh")
    assert await save(other, "t", Counted(context=[fresh], count=9), None) == 1
    new_key = await key_of(sql_backend, "t")
    assert new_key is not None
    # never the old key, though it was the highest: a lazy history of the old thread tells
    # the new one by it (test_lazy_threads)
    assert new_key > old_key
    for reader in (store, other):
        snapshot = await reader.aload("t", Counted)
        assert snapshot is not None
        assert snapshot.version == 1
        assert snapshot.state.count == 9
        assert dumped(snapshot.state.context) == dumped([fresh])
        assert [(i.version, i.message_count) for i in await reader.ahistory("t")] == [(1, 1)]
        with pytest.raises(ResourceNotFoundError, match="has no version 2"):
            await reader.aload("t", Counted, 2)
        recent = await reader.aload_recent("t", Counted, 5, [a.message_id, fresh.message_id])
        assert recent is not None
        assert dumped(list(recent.state.context)) == dumped([fresh])
        assert await reader.afind_ids("t", 0, [rules.message_id, a.message_id], 5) == set()
        assert await reader.asystem_messages("t", Counted, 0, 0, 5) == []
        page = await reader.alist_thread_page()
        assert [(t.thread_id, t.version, t.message_count) for t in page.threads] == [("t", 1, 1)]
    # the first instance, which knew the old thread, writes to the new one
    following = msg("next")
    assert await save(store, "t", state_with(count=10), 1, new=[following]) == 2
    assert await texts_of(other, "t") == ["fresh", "next"]
    ids = [str(fresh.message_id), str(following.message_id)]
    assert await rows_of_key(sql_backend, new_key) == (ids, 2)


async def test_an_app_holding_a_thread_made_again_elsewhere_never_answers_from_the_old_one(
    backend: Backend,
) -> None:
    """App A keeps thread t's state for its next turn. Meanwhile app B (another process, or
    another app on the same store) deletes t and makes it again, up to the very version A
    kept. A's next turn must run on the new thread, not on what was deleted."""
    from tenxgraph.core.graph import StateGraph

    def graph_on(store: Any) -> Any:
        def answer(state: AgentState) -> Message:
            return Message.text_message(" | ".join(m.text() for m in state.context), "assistant")

        graph = StateGraph(AgentState)
        graph.add_node("answer", answer)
        graph.set_entry_point("answer")
        graph.add_edge("answer", "__end__")
        return graph.compile(checkpointer=store)

    a_store = backend.store
    b_store = backend.open() if backend.is_sql else a_store
    a, b = graph_on(a_store), graph_on(b_store)
    config = {"thread_id": "t"}
    await a.ainvoke({"messages": [Message.text_message("secret")]}, config)
    kept = await a_store.aversion("t")
    assert await b_store.adelete_thread("t")
    await b.ainvoke({"messages": [Message.text_message("fresh start")]}, config)
    assert await b_store.aversion("t") == kept  # the same version number, another thread
    result = await a.ainvoke({"messages": [Message.text_message("next")]}, config)
    assert result["messages"][-1].text() == "fresh start | fresh start | next"
    stored = await b_store.aload("t", AgentState)
    assert stored is not None
    assert "secret" not in stored.state.model_dump_json()


def test_a_version_is_an_int_that_names_its_thread() -> None:
    import copy
    import json
    import pickle

    from tenxgraph.storage.checkpointer.base import Version, same_version

    version = Version(3, 7)
    assert version == 3
    assert hash(version) == hash(3)
    assert version + 1 == 4
    assert repr(version) == "3"
    assert json.dumps({"v": version}) == '{"v": 3}'
    for made in (pickle.loads(pickle.dumps(version)), copy.deepcopy(version)):
        assert made == 3
        assert made.incarnation == 7
    assert same_version(Version(3, 7), Version(3, 7))
    assert not same_version(Version(3, 7), Version(3, 8))  # made again: another thread
    assert not same_version(Version(3, 7), Version(4, 7))
    assert same_version(3, Version(3, 8))
    assert same_version(Version(3, 7), 3)
    assert not same_version(3, None)
    assert same_version(None, None)


# -- two threads ------------------------------------------------------------------------------


async def test_two_threads_never_see_each_others_messages(sql_backend: Backend) -> None:
    store = sql_backend.store
    x_rules, y_rules = msg("x rules", "system"), msg("y rules", "system")
    x1 = Message.text_message("x1", message_id="same-id")
    y1 = Message.text_message("y1", message_id="same-id")  # one id in both threads
    x2, y2 = msg("x2"), msg("y2")
    await save(store, "x", Counted(context=[x_rules, x1]), None)
    await save(store, "y", Counted(context=[y1, y_rules]), None)
    await save(store, "x", state_with(), 1, new=[x2])
    await save(store, "y", state_with(), 1, new=[y2])
    assert await texts_of(store, "x") == ["x rules", "x1", "x2"]
    assert await texts_of(store, "y") == ["y1", "y rules", "y2"]
    assert await store.afind_ids("x", 0, ["same-id", y2.message_id, x2.message_id], 3) == {
        "same-id", x2.message_id,
    }  # fmt: skip
    assert await store.afind_ids("y", 0, [x2.message_id, x_rules.message_id], 3) == set()
    x_system = await store.asystem_messages("x", Counted, 0, 0, 3)
    y_system = await store.asystem_messages("y", Counted, 0, 0, 3)
    assert [(i, m.text()) for i, m in x_system] == [(0, "x rules")]
    assert [(i, m.text()) for i, m in y_system] == [(1, "y rules")]
    assert [m.text() for m in await store.aread_log("y", Counted, 0, 0, 3)] == [
        "y1",
        "y rules",
        "y2",
    ]
    recent = await store.aload_recent("x", Counted, 1, ["same-id"])
    assert recent is not None
    assert [m.text() for m in recent.state.context] == ["x rules", "x1", "x2"]
    # a rewrite, a restore and a delete of one thread leave the other as it was
    await save(store, "x", state_with("summary"), 2, rewrite=True)
    assert await texts_of(store, "y") == ["y1", "y rules", "y2"]
    assert await store.arestore("y", 1, expected_version=2) == 3
    assert await texts_of(store, "x") == ["summary"]
    assert await texts_of(store, "y") == ["y1", "y rules"]
    assert await store.adelete_thread("x")
    assert await texts_of(store, "y") == ["y1", "y rules"]
    assert [i.version for i in await store.ahistory("y")] == [3, 2, 1]
    assert await store.afind_ids("y", 1, ["same-id"], 2) == {"same-id"}


async def test_a_delete_waiting_on_a_save_in_flight_removes_the_rows_that_save_adds(
    tmp_path: Path,
) -> None:
    """PostgreSQL: a save holds the thread's row until it commits; a delete that started
    meanwhile waits for it, then deletes the messages and checkpoint it added too (no rows
    left under the gone thread's key)."""
    import asyncpg

    backend = Backend("postgres", tmp_path)  # (skipped without a server)
    try:
        store = backend.store
        await save(store, "t", state_with("a"), None)
        key = await key_of(backend, "t")
        assert key is not None
        saving = await asyncpg.connect(backend.dsn, server_settings={"search_path": backend.schema})
        try:
            in_flight = saving.transaction()
            await in_flight.start()  # what a save writes, not yet committed
            await saving.execute("UPDATE tx_threads SET version = 2 WHERE thread_id = 't'")
            await saving.execute(
                "INSERT INTO tx_messages (thread_key, seq, message_id, body) "
                "VALUES ($1, 1, 'late', '{}')",
                key,
            )
            await saving.execute(
                "INSERT INTO tx_checkpoints (thread_key, version, header, message_count, "
                "generation, log_start, step, status, node, created_at) "
                "VALUES ($1, 2, '', 2, 0, 0, 0, 'running', NULL, 0)",
                key,
            )
            deleting = asyncio.create_task(store.adelete_thread("t"))
            for _ in range(200):  # until the delete waits on the row
                waiting = await saving.fetchval(
                    "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND query LIKE $1",
                    f'%"{backend.schema}".tx_threads%',
                )
                if waiting:
                    break
                await asyncio.sleep(0.01)
            assert waiting
            await in_flight.commit()
        finally:
            await saving.close()
        assert await deleting
        assert await rows_of_key(backend, key) == ([], 0)
        assert await store.aload("t", Counted) is None
    finally:
        await backend.close()
