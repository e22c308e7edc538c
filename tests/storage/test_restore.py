"""`arestore`: a thread's earlier state made its state again, as a new version, on every
checkpointer. Nothing is rewritten: every version still loads, the restored-over ones too."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tenxgraph import END, START, StateGraph
from tenxgraph.core.exceptions import (
    ResourceNotFoundError,
    StaleStateError,
    StorageError,
    ThreadBusyError,
)
from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.state import AgentState, Message, ToolCallBlock
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.storage.checkpointer import BaseCheckpointer, SqliteCheckpointer
from tenxgraph.storage.checkpointer.base import encode_header, encode_message
from tenxgraph.storage.checkpointer.lease import Lease
from tenxgraph.storage.checkpointer.sqlite import MIGRATIONS
from tenxgraph.utils import interrupt
from tests.storage._support import Counted, msg, save, state_with, texts_of
from tests.storage.conftest import Backend
from tests.storage.test_lazy_threads import LONG, app_on, reply, seed, text


async def _three_versions(store: BaseCheckpointer) -> None:
    await save(store, "t", state_with("a", count=1), None)
    await save(store, "t", state_with(count=2), 1, new=[msg("b")])
    await save(store, "t", state_with(count=3), 2, new=[msg("c")])


async def test_a_restore_is_a_new_version_with_the_old_state(
    checkpointer: BaseCheckpointer,
) -> None:
    await _three_versions(checkpointer)
    assert await checkpointer.arestore("t", 1, expected_version=3) == 4
    head = await checkpointer.aload("t", Counted)
    assert head is not None
    assert head.version == 4
    assert head.state.count == 1
    assert [m.text() for m in head.state.context] == ["a"]
    history = await checkpointer.ahistory("t")
    assert [(i.version, i.message_count) for i in history] == [(4, 1), (3, 3), (2, 2), (1, 1)]
    # append-only: the versions restored over still load as they were
    assert await texts_of(checkpointer, "t", 3) == ["a", "b", "c"]
    assert await texts_of(checkpointer, "t", 2) == ["a", "b"]
    # the next save goes on from the restored state, not from the log's end
    await save(checkpointer, "t", state_with(count=5), 4, new=[msg("d")])
    assert await texts_of(checkpointer, "t") == ["a", "d"]
    assert await texts_of(checkpointer, "t", 3) == ["a", "b", "c"]
    assert await checkpointer.arestore("t", 3, expected_version=5) == 6
    assert await texts_of(checkpointer, "t") == ["a", "b", "c"]
    assert await texts_of(checkpointer, "t", 5) == ["a", "d"]


async def test_restoring_before_the_first_version_leaves_no_message(
    checkpointer: BaseCheckpointer,
) -> None:
    await _three_versions(checkpointer)
    assert await checkpointer.arestore("t", None, expected_version=3, empty=Counted()) == 4
    assert await texts_of(checkpointer, "t") == []
    head = await checkpointer.aload("t", Counted)
    assert head is not None
    assert head.state.count == 0
    assert await texts_of(checkpointer, "t", 3) == ["a", "b", "c"]
    with pytest.raises(ValueError, match="empty="):
        await checkpointer.arestore("t", None, expected_version=4)


async def test_a_refused_restore_writes_nothing(checkpointer: BaseCheckpointer) -> None:
    await _three_versions(checkpointer)
    with pytest.raises(StaleStateError):
        await checkpointer.arestore("t", 1, expected_version=2)
    with pytest.raises(ResourceNotFoundError):
        await checkpointer.arestore("t", 9, expected_version=3)
    with pytest.raises(ResourceNotFoundError):
        await checkpointer.arestore("nobody", 1, expected_version=1)
    lease = Lease("another-run", 30.0)
    await checkpointer.asave(
        "t", expected_version=3, state=state_with(count=4), new_messages=[], lease=lease
    )
    with pytest.raises(ThreadBusyError):
        await checkpointer.arestore("t", 1, expected_version=4)
    assert [i.version for i in await checkpointer.ahistory("t")] == [4, 3, 2, 1]
    assert await texts_of(checkpointer, "t") == ["a", "b", "c"]


async def test_a_rewrite_retires_what_came_before_it_restores_included(
    checkpointer: BaseCheckpointer,
) -> None:
    await _three_versions(checkpointer)
    await checkpointer.arestore("t", 1, expected_version=3)
    await save(checkpointer, "t", state_with("summary"), 4, rewrite=True)
    for old in (1, 3, 4):
        with pytest.raises(StorageError, match="predates a rewrite"):
            await checkpointer.aload("t", Counted, old)
    with pytest.raises(StorageError, match="predates a rewrite"):
        await checkpointer.arestore("t", 1, expected_version=5)
    assert await texts_of(checkpointer, "t") == ["summary"]


async def test_a_restored_thread_pages_its_older_messages(sql_backend: Backend) -> None:
    await seed(sql_backend.store, LONG)  # version 1
    store = sql_backend.store
    later = [text(i) for i in range(LONG, LONG + 5)]
    await store.asave("t", expected_version=1, state=AgentState(), new_messages=later)
    await store.arestore("t", 1, expected_version=2)
    seen: list[list[str]] = []

    def look(state: AgentState) -> Message:
        seen.append([m.text() for m in state.context])
        return reply(state)

    cold = app_on(sql_backend.open(), look)  # reads the head's recent messages only
    await cold.ainvoke({"messages": [Message.text_message("new")]}, {"thread_id": "t"})
    assert seen == [[*(f"m{i}" for i in range(LONG)), "new"]]
    assert await texts_of(store, "t", 2) == [f"m{i}" for i in range(LONG + 5)]


async def test_a_restored_thread_finds_its_system_messages(sql_backend: Backend) -> None:
    store = sql_backend.store
    first = [Message.text_message("rules", "system"), msg("a")]
    await store.asave("t", expected_version=None, state=AgentState(), new_messages=first)
    await store.asave("t", expected_version=1, state=AgentState(), new_messages=[msg("b")])
    await store.arestore("t", 1, expected_version=2)  # generation 1, its log after the rows
    found = await store.asystem_messages("t", AgentState, 1, 0, 2)
    assert [(at, m.text()) for at, m in found] == [(0, "rules")]
    assert await store.afind_ids("t", 1, [first[1].message_id, "nope"], 2) == {
        str(first[1].message_id)
    }
    with pytest.raises(StorageError):  # a lazy history of the head before the restore
        await store.aread_log("t", AgentState, 0, 0, 2)


async def test_a_version_3_sqlite_database_keeps_refusing_versions_before_a_rewrite(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v3.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for version in (1, 2, 3):
        for statement in MIGRATIONS[version]:
            conn.execute(statement)
    conn.execute("CREATE TABLE tx_schema_version (version INTEGER)")
    conn.execute("INSERT INTO tx_schema_version VALUES (3)")
    # a thread rewritten once, as schema 3 stored it: version 1 predates the rewrite
    header = encode_header(Counted(count=2), "t")
    body = msg("summary")
    conn.execute("INSERT INTO tx_threads (thread_id, version, generation, created_at, "
                 "updated_at) VALUES ('t', 2, 1, 0, 0)")  # fmt: skip
    for version, generation in ((1, 0), (2, 1)):
        conn.execute(
            "INSERT INTO tx_checkpoints VALUES ('t', ?, ?, 1, ?, 1, 'completed', NULL, 0)",
            (version, header, generation),
        )
    conn.execute("INSERT INTO tx_messages VALUES ('t', 0, ?, ?)",
                 (str(body.message_id), encode_message(body)))  # fmt: skip
    conn.close()
    store = SqliteCheckpointer(path)
    try:
        assert await texts_of(store, "t") == ["summary"]
        with pytest.raises(StorageError, match="predates a rewrite"):
            await store.aload("t", Counted, 1)
        assert await store.arestore("t", 2, expected_version=2) == 3
        assert await texts_of(store, "t") == ["summary"]
    finally:
        await store.aclose()


async def test_the_graph_refuses_to_restore_a_thread_a_run_holds(
    checkpointer: BaseCheckpointer,
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(state: AgentState) -> Message:
        entered.set()
        await release.wait()
        return reply(state)

    app = app_on(checkpointer, slow)
    config = {"thread_id": "t"}
    running = asyncio.create_task(app.ainvoke({"messages": [msg("hi")]}, config))
    await entered.wait()
    with pytest.raises(ThreadBusyError):
        await app.arestore(config, None)
    release.set()
    await running
    assert [m.text() for m in (await app.aget_state(config)).context] == ["hi", "reply to hi"]
    await app.arestore(config, None)
    assert (await app.aget_state(config)).context == []
    assert [i.message_count for i in await app.aget_state_history(config)][:1] == [0]


async def test_a_tool_call_finished_before_a_restore_is_replayed_not_run_again(
    checkpointer: BaseCheckpointer,
) -> None:
    calls: list[str] = []

    async def act(what: str) -> str:
        """Do something once."""
        calls.append(what)
        return f"did {what}"

    def decide(messages: list[Message], info: ModelInfo) -> str | ToolCallBlock:
        if messages[-1].role == "tool":
            return f"done: {messages[-1].text()}"
        return ToolCallBlock(id="c1", name="act", args={"what": "pay"})

    app = ReactAgent(FunctionModel(decide), [act], "Act.").compile(checkpointer=checkpointer)
    config = {"thread_id": "t"}
    await app.ainvoke({"messages": [msg("go")]}, config)
    assert calls == ["pay"]
    asked = None  # the version saved after the model asked for the tool, before it ran
    for info in reversed(await app.aget_state_history(config)):
        state = await app.aget_state({**config, "checkpoint_version": info.version})
        if state is not None and state.context and state.context[-1].has_tool_calls():
            asked = info.version
    assert asked is not None
    await app.arestore(config, asked)
    result = await app.ainvoke(None, config)  # the restored run goes on: the tool step again
    assert calls == ["pay"]  # its result comes from the ledger: what was done stays done
    assert result["messages"][-1].text() == "done: did pay"


def _nested(store: BaseCheckpointer, entered: asyncio.Event, release: asyncio.Event) -> Any:
    """A parent whose `kid` node is a graph: it answers "child says <input>", or for "ask"
    asks a question and says "child got <answer>", first waiting for `release` when the
    input or the answer is "hold"."""

    async def inner(state: AgentState) -> Message:
        said = state.context[-1].text()
        if said == "ask":
            said = interrupt("what?")
        if said == "hold":
            entered.set()
            await release.wait()
        return Message.text_message(f"child got {said}", "assistant")

    child = StateGraph()
    child.add_node("inner", inner)
    child.add_edge(START, "inner")
    child.add_edge("inner", END)
    parent = StateGraph()
    parent.add_node("kid", child.compile(name="kid"))
    parent.add_edge(START, "kid")
    parent.add_edge("kid", END)
    return parent.compile(checkpointer=store)


async def _texts_of_app(app: Any, config: dict[str, Any]) -> list[str]:
    state = await app.aget_state(config)
    return [m.text() for m in state.context]


async def test_a_step_rolled_back_inside_a_subgraph_runs_afresh(
    checkpointer: BaseCheckpointer,
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    app = _nested(checkpointer, entered, release)
    config = {"thread_id": "p"}
    await app.ainvoke({"messages": [msg("hi")]}, config)
    start = await checkpointer.aversion("p")
    held = asyncio.create_task(app.ainvoke({"messages": [msg("hold")]}, config))
    await entered.wait()
    held.cancel()
    with pytest.raises(asyncio.CancelledError):
        await held
    assert len(await checkpointer.alist_threads()) == 2  # the child's thread, left behind
    await app.arestore(config, start)
    assert await checkpointer.alist_threads() == ["p"]
    release.set()
    await app.ainvoke({"messages": [msg("third")]}, config)  # its child starts afresh
    assert await _texts_of_app(app, config) == ["hi", "child got hi", "third", "child got third"]


async def test_a_version_paused_inside_a_subgraph_keeps_its_child_unless_it_went_on(
    checkpointer: BaseCheckpointer,
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    app = _nested(checkpointer, entered, release)
    config = {"thread_id": "p"}
    await app.ainvoke({"messages": [msg("ask")]}, config)  # paused inside `kid`
    paused = await checkpointer.aversion("p")
    assert paused is not None
    await app.arestore(config, paused)  # the child still waits for its answer: kept
    answered = await app.ainvoke({"resume": "yes"}, config)
    assert answered["messages"][-1].text() == "child got yes"

    await app.ainvoke({"messages": [msg("ask")]}, config)
    paused = await checkpointer.aversion("p")
    held = asyncio.create_task(app.ainvoke({"resume": "hold"}, config))
    await entered.wait()
    held.cancel()
    with pytest.raises(asyncio.CancelledError):
        await held
    head = await checkpointer.aversion("p")
    with pytest.raises(ValueError, match="went on after it"):
        await app.arestore(config, paused)
    assert await checkpointer.aversion("p") == head  # refused before anything was written
