"""The server's run operations without HTTP (SQLite): `rollback` forgets the run it stops, a
run sees the caller auth identified as `config["user_id"]` whatever the client sends, and an
interrupt reaches clients with its value, id and message."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState
from tenxgraph.serve.bus import Bus
from tenxgraph.serve.db.sqlite import SqliteServeDB
from tenxgraph.serve.records import ThreadRecord
from tenxgraph.serve.schemas import RunCreate
from tenxgraph.serve.server import Server
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tenxgraph.utils import interrupt


class Seen(AgentState):
    user: str = ""


def graph(path: Path, gate: asyncio.Event) -> Any:
    async def node(state: Seen, config: dict[str, Any]) -> dict[str, Any]:
        if state.user == "" and not gate.is_set():
            await gate.wait()
        return {"user": config.get("user_id", "")}

    builder = StateGraph(Seen())
    builder.add_node("node", node)
    builder.set_entry_point("node")
    builder.add_edge("node", "__end__")
    return builder.compile(checkpointer=SqliteCheckpointer(path))


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[Server, asyncio.Event]]:
    gate = asyncio.Event()
    served = Server({"g": graph(tmp_path / "t.db", gate)}, SqliteServeDB(tmp_path / "s.db"), Bus())
    await served.start()
    await served.db.create_thread(ThreadRecord("t", "alice"))
    try:
        yield served, gate
    finally:
        gate.set()
        await served.stop()


def ask_(**fields: Any) -> RunCreate:
    return RunCreate(assistant_id="g", input={"messages": ["hi"]}, **fields)


async def started(server: Server, run_id: str) -> None:
    """Until the run is running (its worker claimed it): followed through its events."""
    run = await server.db.get_run(run_id, None)
    assert run is not None
    async for event in server.events(run):
        if event.event == "metadata":
            return


async def test_rollback_stops_the_running_run_and_forgets_it(
    server: tuple[Server, asyncio.Event],
) -> None:
    served, gate = server
    first = await served.create_run("alice", "t", ask_())
    await started(served, first.run_id)
    second = await served.create_run("alice", "t", ask_(multitask_strategy="rollback"))
    gate.set()
    result = await served.result(second)

    assert result["user"] == "alice"
    assert await served.db.get_run(first.run_id, "alice") is None  # forgotten
    done = await served.db.get_run(second.run_id, "alice")
    assert done is not None
    assert done.status == "success"


async def test_a_run_sees_the_authenticated_caller_not_the_claimed_one(
    server: tuple[Server, asyncio.Event],
) -> None:
    served, gate = server
    gate.set()
    body = ask_(config={"configurable": {"user_id": "mallory"}})
    run = await served.create_run("alice", "t", body)

    assert (await served.result(run))["user"] == "alice"


async def test_an_interrupt_reaches_clients_with_its_value_id_and_message(tmp_path: Path) -> None:
    def ask(state: Seen) -> dict[str, Any]:
        answer = interrupt({"amount": 40}, message="Send 40 EUR?")
        return {"user": str(answer)}

    builder = StateGraph(Seen())
    builder.add_node("ask", ask)
    builder.set_entry_point("ask")
    builder.add_edge("ask", "__end__")
    app = builder.compile(checkpointer=SqliteCheckpointer(tmp_path / "t.db"))
    served = Server({"g": app}, SqliteServeDB(tmp_path / "s.db"), Bus())
    await served.start()
    try:
        await served.db.create_thread(ThreadRecord("t", ""))
        run = await served.create_run("", "t", ask_(stream_mode=["updates"]))
        result = await served.result(run)
        updates = [json.loads(e.data) async for e in served.events(run) if e.event == "updates"]
    finally:
        await served.stop()

    (pending,) = result["__interrupt__"]
    assert pending["value"] == {"amount": 40}
    assert pending["message"] == "Send 40 EUR?"
    assert pending["id"]
    assert updates[-1] == {"__interrupt__": [pending]}
