"""`rollback` in the server's worker, on SQLite and PostgreSQL (the server's tables and the
graph's checkpointer in the same database): the thread gets back the state it had when the
cancelled run started, and a revert that fails ends the run in error with nothing lost."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.core.exceptions import StorageError
from tenxgraph.core.graph.compiled_graph import CompiledGraph
from tenxgraph.core.state import Message
from tenxgraph.serve.bus import Bus
from tenxgraph.serve.db.base import ServeDB
from tenxgraph.serve.db.postgres import PostgresServeDB
from tenxgraph.serve.records import ThreadRecord
from tenxgraph.serve.schemas import RunCreate
from tenxgraph.serve.server import Server
from tenxgraph.storage.checkpointer import BaseCheckpointer, SqliteCheckpointer
from tests.serve.graphs import Gate, steps_graph

Rolled = tuple[Server, Gate, CompiledGraph[Any]]


@pytest.fixture
async def rolled(serve_db: ServeDB, tmp_path: Path) -> AsyncIterator[Rolled]:
    gate = Gate()
    graph = steps_graph(gate)
    checkpointer: BaseCheckpointer
    bus: Bus
    if isinstance(serve_db, PostgresServeDB):  # the checkpointer in the db's own schema
        from tenxgraph.storage.checkpointer.postgres import PgCheckpointer

        checkpointer = PgCheckpointer(serve_db.dsn, schema=serve_db.schema)
        bus = serve_db.bus()
    else:
        checkpointer, bus = SqliteCheckpointer(tmp_path / "threads.db"), Bus()
    graph.adopt_checkpointer(checkpointer)
    server = Server({"steps": graph}, serve_db, bus)
    await server.start()
    await serve_db.create_thread(ThreadRecord("t", "alice"))
    try:
        yield server, gate, graph
    finally:
        gate.release.set()
        await server.stop()
        await checkpointer.aclose()


def ask(text: str, **fields: Any) -> RunCreate:
    return RunCreate(assistant_id="steps", input={"messages": [text]}, **fields)


async def texts(graph: CompiledGraph[Any]) -> list[str]:
    state = await graph.aget_state({"thread_id": "t"})
    return [] if state is None else [m.text() for m in state.context]


async def _held_after_one_turn(rolled: Rolled) -> tuple[str, list[str]]:
    """A finished turn, then a run that saved its `note` step and waits at the gate."""
    server, gate, graph = rolled
    await server.result(await server.create_run("alice", "t", ask("hi")))
    before = await texts(graph)
    assert before == ["hi", "noted hi", "answer 2"]
    held = await server.create_run("alice", "t", ask("hold"))
    await gate.wait_entered()
    assert await texts(graph) == [*before, "hold", "noted hold"]  # its first step is saved
    return held.run_id, before


async def test_a_rollback_run_starts_from_the_state_before_the_cancelled_one(
    rolled: Rolled,
) -> None:
    server, _gate, graph = rolled
    held, before = await _held_after_one_turn(rolled)
    third = await server.create_run("alice", "t", ask("third", multitask_strategy="rollback"))
    await server.result(third)

    assert await texts(graph) == [*before, "third", "noted third", "answer 5"]
    assert await server.db.get_run(held, "alice") is None
    thread = await server.db.get_thread("t", "alice")
    assert thread is not None
    assert thread.status == "idle"
    versions = [info.version for info in await graph.aget_state_history({"thread_id": "t"})]
    assert versions == list(range(len(versions), 0, -1))  # nothing rewritten or dropped
    for version in versions:  # and each still loads
        assert await graph.aget_state({"thread_id": "t", "checkpoint_version": version})


async def test_a_rollback_that_fails_ends_the_run_in_error_and_loses_nothing(
    rolled: Rolled, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _gate, graph = rolled
    held, before = await _held_after_one_turn(rolled)

    async def broken(config: dict[str, Any], version: int | None) -> int:
        raise StorageError("the disk is gone")

    monkeypatch.setattr(graph, "arestore", broken)
    run = await server.db.get_run(held, "alice")
    assert run is not None
    await server.cancel([held], "rollback")
    ended = await server.ended(run)

    assert ended is not None  # kept, with what happened
    assert ended.status == "error"
    assert ended.result is not None
    message = ended.result["__error__"]["message"]
    assert message.startswith(f"the rollback of run {held} on thread 't' failed: ")
    assert "the disk is gone. Nothing was written: the thread keeps the state the run left" in (
        message
    )
    assert await texts(graph) == [*before, "hold", "noted hold"]  # as the run left it


async def test_rolling_back_a_queued_run_an_earlier_attempt_started_reverts_it(
    serve_db: ServeDB, tmp_path: Path
) -> None:
    """A run back in the queue after its worker died may have written to the thread: a
    rollback that ends it before any worker takes it reverts what that attempt wrote."""
    gate = Gate()
    graph = steps_graph(gate)
    graph.adopt_checkpointer(SqliteCheckpointer(tmp_path / "threads.db"))
    server = Server({"steps": graph}, serve_db, Bus(), run_worker=False)
    await server.start()
    try:
        await serve_db.create_thread(ThreadRecord("t", "alice"))
        await graph.ainvoke({"messages": [Message.text_message("hi")]}, {"thread_id": "t"})
        start = await graph.checkpointer.aversion("t")  # type: ignore[union-attr]
        queued = await server.create_run("alice", "t", ask("again"))
        await serve_db.set_start_version(queued.run_id, start)
        again = {"messages": [Message.text_message("again")]}
        await graph.ainvoke(again, {"thread_id": "t"})  # what that attempt wrote
        assert len(await texts(graph)) == 6

        await server.cancel([queued.run_id], "rollback")

        assert await texts(graph) == ["hi", "noted hi", "answer 2"]
        assert await serve_db.get_run(queued.run_id, "alice") is None
    finally:
        await server.stop()
