"""A worker taking over the run of a worker that died: from where the thread is, never
running again what the dead worker finished (SQLite; the same code runs on PostgreSQL, where
tests/serve/test_workers.py SIGKILLs real processes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.state import Message
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.serve.bus import Bus
from tenxgraph.serve.db.sqlite import SqliteServeDB
from tenxgraph.serve.records import RunRecord, ThreadRecord
from tenxgraph.serve.runs import NO_STATE
from tenxgraph.serve.streaming import follow
from tenxgraph.serve.worker import Worker
from tenxgraph.storage.checkpointer import SqliteCheckpointer


def counting_graph(calls: list[str], path: Path) -> Any:
    def answer(messages: list[Message], info: ModelInfo) -> str:
        calls.append(messages[-1].text())
        return f"answer {len(calls)}"

    return ReactAgent(FunctionModel(answer), []).compile(checkpointer=SqliteCheckpointer(path))


async def dead_workers_run(db: SqliteServeDB, text: str) -> RunRecord:
    """A run claimed by a worker whose lease has already run out (it died)."""
    await db.create_thread(ThreadRecord("t", ""))
    kwargs = {"input": {"messages": [{"type": "human", "content": text}]}}
    await db.create_run(RunRecord("r", "t", "", "agent", kwargs))
    claimed = await db.claim_run("dead", -1.0)
    assert claimed is not None
    await db.set_start_version("r", NO_STATE)  # as the dead worker did before running
    return claimed


async def finish_with(db: SqliteServeDB, graph: Any) -> tuple[RunRecord, list[str]]:
    worker = Worker(db, Bus(), {"agent": graph}, lease_ttl=30.0)
    await worker.start()
    try:
        events = [e.event async for e in follow(db, worker.bus, "r", 0, None, worker.writer)]
    finally:
        await worker.stop()
    run = await db.get_run("r", None)
    assert run is not None
    return run, events


async def test_a_run_the_dead_worker_finished_is_not_run_again(tmp_path: Path) -> None:
    db = SqliteServeDB(tmp_path / "server.db")
    calls: list[str] = []
    graph = counting_graph(calls, tmp_path / "threads.db")
    await dead_workers_run(db, "hello")
    # the dead worker ran the whole graph, then died before recording the outcome
    await graph.ainvoke({"messages": [Message.text_message("hello")]}, {"thread_id": "t"})
    assert calls == ["hello"]

    run, events = await finish_with(db, graph)

    assert calls == ["hello"]  # not asked again
    assert (run.status, run.attempt) == ("success", 2)
    assert run.result == {}  # the values are the thread's, read when asked
    assert events[-1] == "end"
    state = await graph.aget_state({"thread_id": "t"})
    assert [m.text() for m in state.context] == ["hello", "answer 1"]


async def test_a_run_whose_input_was_never_saved_starts_from_its_input(tmp_path: Path) -> None:
    db = SqliteServeDB(tmp_path / "server.db")
    calls: list[str] = []
    graph = counting_graph(calls, tmp_path / "threads.db")
    await dead_workers_run(db, "hello")  # it died before its first save

    run, _ = await finish_with(db, graph)

    assert calls == ["hello"]
    assert run.status == "success"
    state = await graph.aget_state({"thread_id": "t"})
    assert [m.text() for m in state.context] == ["hello", "answer 1"]
