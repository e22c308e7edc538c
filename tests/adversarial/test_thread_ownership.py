"""Two runs on one thread: a run owns its thread from its first write to its last (a lease),
so a second run is refused, waits or interrupts, as its caller chose, before writing anything.
On memory, SQLite and PostgreSQL; across OS processes on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.core import exceptions
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.graph import engine as engine_module
from tenxgraph.core.graph.compiled_graph import CompiledGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import BaseCheckpointer
from tenxgraph.utils.constants import END, START
from tests.adversarial._turns_worker import answer_to, turn_message
from tests.core.graph._support import inp, texts
from tests.storage.conftest import Backend

REPO = Path(__file__).resolve().parents[2]


async def until(condition: Any, seconds: float = 10) -> None:
    """Poll an async or plain condition (bounded): for what only storage can tell."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {seconds}s")
        await asyncio.sleep(0.001)


class Gate:
    """A node that says when it started and waits until released."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.calls: list[str] = []

    async def __call__(self, state: AgentState) -> str:
        question = state.context[-1].text()
        self.calls.append(question)
        self.started.set()
        await self.release.wait()
        return answer_to(question)


def graph_of(*nodes: Any) -> StateGraph:
    graph = StateGraph()
    names = []
    for i, node in enumerate(nodes):
        names.append(f"n{i}")
        graph.add_node(names[-1], node)
    for a, b in zip([START, *names], [*names, END], strict=True):
        graph.add_edge(a, b)
    return graph


def app_of(store: BaseCheckpointer, *nodes: Any) -> CompiledGraph:
    return graph_of(*nodes).compile(checkpointer=store)


async def quick(state: AgentState) -> str:
    return answer_to(state.context[-1].text())


async def stored_texts(store: BaseCheckpointer, thread_id: str = "t") -> list[str]:
    snapshot = await store.aload(thread_id, AgentState)
    assert snapshot is not None
    return texts(snapshot.state.context)


# -- reject (the default) ---------------------------------------------------------------------


async def test_a_second_run_is_refused_before_writing_anything(
    checkpointer: BaseCheckpointer,
) -> None:
    gate = Gate()
    holder = app_of(checkpointer, gate)
    other = app_of(checkpointer, quick)  # another app: as another process would be
    config = {"thread_id": "t"}
    await other.ainvoke(inp("setup"), config)
    first = asyncio.create_task(holder.ainvoke(inp("one"), config))
    await gate.started.wait()
    version = await checkpointer.aversion("t")

    with pytest.raises(exceptions.ThreadBusyError) as refused:
        await other.ainvoke(inp("two"), config)
    assert "multitask_strategy" in str(refused.value)  # says what to do
    assert await checkpointer.aversion("t") == version  # nothing was written
    assert "two" not in await stored_texts(checkpointer)

    gate.release.set()
    await first
    assert await stored_texts(checkpointer) == [
        "setup",
        answer_to("setup"),
        "one",
        answer_to("one"),
    ]


async def test_the_same_app_refuses_a_second_run_too(checkpointer: BaseCheckpointer) -> None:
    gate = Gate()
    app = app_of(checkpointer, gate)
    config = {"thread_id": "t"}
    first = asyncio.create_task(app.ainvoke(inp("one"), config))
    await gate.started.wait()
    with pytest.raises(exceptions.ThreadBusyError):
        await app.ainvoke(inp("two"), config)
    gate.release.set()
    await first
    assert await stored_texts(checkpointer) == ["one", answer_to("one")]


async def test_update_state_while_a_run_holds_the_thread_is_refused(
    checkpointer: BaseCheckpointer,
) -> None:
    gate = Gate()
    app = app_of(checkpointer, gate)
    other = app_of(checkpointer, quick)
    config = {"thread_id": "t"}
    first = asyncio.create_task(app.ainvoke(inp("one"), config))
    await gate.started.wait()
    for editor in (app, other):
        with pytest.raises(exceptions.ThreadBusyError):
            await editor.aupdate_state(config, {"context_summary": "edited"})
    gate.release.set()
    await first
    state = await app.aget_state(config)
    assert state is not None
    assert state.context_summary is None


async def test_retrying_a_refused_turn_gives_one_turn_and_its_own_answer(
    checkpointer: BaseCheckpointer,
) -> None:
    gate = Gate()
    holder = app_of(checkpointer, gate)
    other = app_of(checkpointer, quick)
    config = {"thread_id": "t"}
    first = asyncio.create_task(holder.ainvoke(inp("one"), config))
    await gate.started.wait()
    retried = turn_message("b", 0)
    with pytest.raises(exceptions.ThreadBusyError):
        await other.ainvoke({"messages": [retried]}, config)
    gate.release.set()
    await first
    result = await other.ainvoke({"messages": [retried]}, config)  # the same input again
    assert texts(result["messages"]) == ["b-0", answer_to("b-0")]
    assert await stored_texts(checkpointer) == ["one", answer_to("one"), "b-0", answer_to("b-0")]


async def test_a_turn_sent_again_is_answered_from_the_thread_not_run_again(
    checkpointer: BaseCheckpointer,
) -> None:
    calls: list[str] = []

    async def counted(state: AgentState) -> str:
        calls.append(state.context[-1].text())
        return answer_to(state.context[-1].text())

    app = app_of(checkpointer, counted)
    config = {"thread_id": "t"}
    first, second = turn_message("a", 0), turn_message("a", 1)
    await app.ainvoke({"messages": [first]}, config)
    await app.ainvoke({"messages": [second]}, config)
    # the answer to the first was lost on its way to the client, which sends it again
    again = await app.ainvoke({"messages": [turn_message("a", 0)]}, config)
    assert texts(again["messages"]) == ["a-0", answer_to("a-0")]
    again = await app.ainvoke({"messages": [turn_message("a", 1)]}, config)
    assert texts(again["messages"]) == ["a-1", answer_to("a-1")]
    assert calls == ["a-0", "a-1"]
    assert await stored_texts(checkpointer) == ["a-0", answer_to("a-0"), "a-1", answer_to("a-1")]


# -- enqueue and interrupt --------------------------------------------------------------------


async def test_enqueue_waits_for_the_running_turn_then_runs_on_top_of_it(
    checkpointer: BaseCheckpointer,
) -> None:
    gate = Gate()
    holder = app_of(checkpointer, gate)
    other = app_of(checkpointer, quick)
    config = {"thread_id": "t"}
    first = asyncio.create_task(holder.ainvoke(inp("one"), config))
    await gate.started.wait()
    second = asyncio.create_task(
        other.ainvoke(inp("two"), {**config, "multitask_strategy": "enqueue"})
    )
    done, _ = await asyncio.wait({second}, timeout=0.05)
    assert not done  # it waits while the first run holds the thread
    gate.release.set()
    await asyncio.gather(first, second)
    assert await stored_texts(checkpointer) == ["one", answer_to("one"), "two", answer_to("two")]


async def test_enqueue_gives_up_after_its_timeout_without_writing(
    checkpointer: BaseCheckpointer,
) -> None:
    gate = Gate()
    holder = app_of(checkpointer, gate)
    other = app_of(checkpointer, quick)
    config = {"thread_id": "t"}
    first = asyncio.create_task(holder.ainvoke(inp("one"), config))
    await gate.started.wait()
    waiting = {**config, "multitask_strategy": "enqueue", "enqueue_timeout": 0.05}
    for app in (holder, other):  # in this app, and from another
        with pytest.raises(exceptions.ThreadBusyError, match="busy"):
            await app.ainvoke(inp("two"), waiting)
    gate.release.set()
    await first
    assert await stored_texts(checkpointer) == ["one", answer_to("one")]


async def test_interrupt_stops_the_running_turn_at_its_next_step_then_runs(
    checkpointer: BaseCheckpointer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "_STOP_POLL_SECONDS", 0.0)  # look at every step
    gate = Gate()
    later: list[str] = []

    async def second_step(state: AgentState) -> str:
        later.append(state.context[-1].text())
        return "second step"

    holder = app_of(checkpointer, gate, second_step)
    other = app_of(checkpointer, quick)  # another app: it can only ask through storage
    config = {"thread_id": "t"}
    first = asyncio.create_task(holder.ainvoke(inp("one"), config))
    await gate.started.wait()
    second = asyncio.create_task(
        other.ainvoke(inp("two"), {**config, "multitask_strategy": "interrupt"})
    )
    await until(lambda: checkpointer.ais_stop_requested("t"))  # its stop request is stored
    gate.release.set()
    paused = await first
    assert paused["interrupted"]["reason"] == "stop_requested"
    await second
    assert later == []  # the first run stopped before its second step
    assert await stored_texts(checkpointer) == ["one", answer_to("one"), "two", answer_to("two")]


async def test_interrupt_in_the_same_app_cancels_the_running_node(
    checkpointer: BaseCheckpointer,
) -> None:
    gate = Gate()
    app = app_of(checkpointer, gate)
    config = {"thread_id": "t"}
    first = asyncio.create_task(app.ainvoke(inp("one"), config))
    await gate.started.wait()
    gate_for_two = asyncio.create_task(
        app.ainvoke(inp("two"), {**config, "multitask_strategy": "interrupt"})
    )
    paused = await first  # stopped without releasing its gate
    assert paused["interrupted"]["reason"] == "stop_requested"
    await until(lambda: len(gate.calls) == 2)  # the new turn reached the node
    gate.release.set()
    await gate_for_two
    assert await stored_texts(checkpointer) == ["one", "two", answer_to("two")]


async def test_a_stop_asked_while_no_run_held_the_thread_does_not_stop_the_next_one(
    checkpointer: BaseCheckpointer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "_STOP_POLL_SECONDS", 0.0)  # look at every step
    app = app_of(checkpointer, quick, quick)
    config = {"thread_id": "t"}
    await app.ainvoke(inp("one"), config)
    await checkpointer.arequest_stop("t")  # nobody runs: meant for no run
    result = await app.ainvoke(inp("two"), config)
    assert "interrupted" not in result
    assert texts(result["messages"]) == ["two", answer_to("two"), answer_to(answer_to("two"))]
    assert not await checkpointer.ais_stop_requested("t")  # cleared as the run took the thread


def test_an_unknown_strategy_is_refused() -> None:
    app = app_of(
        __import__("tenxgraph.storage.checkpointer", fromlist=["x"]).InMemoryCheckpointer(), quick
    )
    with pytest.raises(ValueError, match="multitask_strategy"):
        app.invoke(inp("x"), {"thread_id": "t", "multitask_strategy": "rollback"})


# -- crashed owners, heartbeats, lost leases --------------------------------------------------


async def take_lease(store: BaseCheckpointer, owner: str, ttl: float) -> None:
    """Hold thread "t" as a run elsewhere would (another host: it cannot be seen dead)."""
    from tenxgraph.storage.checkpointer.lease import Lease

    snapshot = await store.aload("t", AgentState)
    assert snapshot is not None
    await store.asave(
        "t",
        expected_version=snapshot.version,
        state=snapshot.state,
        new_messages=[],
        lease=Lease(owner, ttl),
    )


async def test_a_dead_owners_lease_expires_and_the_thread_continues(
    checkpointer: BaseCheckpointer,
) -> None:
    app = app_of(checkpointer, quick)
    config = {"thread_id": "t"}
    await app.ainvoke(inp("one"), config)
    await take_lease(checkpointer, "crashed-run@elsewhere:1:1", ttl=0.2)
    with pytest.raises(exceptions.ThreadBusyError):
        await app.ainvoke(inp("two"), config)
    # waiting (bounded) outlives the dead run's lease
    await app.ainvoke(inp("two"), {**config, "multitask_strategy": "enqueue"})
    assert await stored_texts(checkpointer) == ["one", answer_to("one"), "two", answer_to("two")]


async def test_after_a_crashed_owners_lease_expires_none_continues_its_unfinished_run(
    checkpointer: BaseCheckpointer,
) -> None:
    gate = Gate()
    finished: list[str] = []

    async def second(state: AgentState) -> str:
        finished.append("second")
        return "second step"

    app = app_of(checkpointer, gate, second)
    config = {"thread_id": "t"}
    run = asyncio.create_task(app.ainvoke(inp("one"), config))
    await gate.started.wait()
    run.cancel()  # the run dies inside its first node: the thread is left unfinished
    with pytest.raises(asyncio.CancelledError):
        await run
    # as if its process had died on another host, still holding the thread
    await take_lease(checkpointer, "crashed-run@elsewhere:1:1", ttl=0.2)
    with pytest.raises(exceptions.ThreadBusyError):
        await app.ainvoke(None, config)
    gate.release.set()
    await app.ainvoke(None, {**config, "multitask_strategy": "enqueue"})  # once it expired
    assert finished == ["second"]
    assert await stored_texts(checkpointer) == ["one", answer_to("one"), "second step"]


async def test_a_lease_of_a_dead_process_on_this_machine_is_taken_at_once(
    checkpointer: BaseCheckpointer,
) -> None:
    from tenxgraph.storage.checkpointer.lease import new_owner

    app = app_of(checkpointer, quick)
    config = {"thread_id": "t"}
    await app.ainvoke(inp("one"), config)
    dead = subprocess.run(  # noqa: ASYNC221 - a process that has ended by the next line
        [sys.executable, "-c", "import os; print(os.getpid())"], check=True, capture_output=True,
        text=True,
    )  # fmt: skip
    owner = new_owner("crashed").replace(f":{os.getpid()}:", f":{int(dead.stdout)}:")
    await take_lease(checkpointer, owner, ttl=600)
    await app.ainvoke(inp("two"), config)  # no waiting for ten minutes
    assert await stored_texts(checkpointer) == ["one", answer_to("one"), "two", answer_to("two")]


async def test_a_long_step_keeps_its_lease_alive(checkpointer: BaseCheckpointer) -> None:
    # a beat every third of the lifetime: a loaded machine may delay one by 300 ms
    checkpointer.lease_ttl = 0.5
    refused: list[float] = []
    other = app_of(checkpointer, quick)
    config = {"thread_id": "t"}

    async def long_step(state: AgentState) -> str:
        started = time.monotonic()
        while time.monotonic() - started < 2.0:  # four lease lifetimes
            with pytest.raises(exceptions.ThreadBusyError):
                await other.ainvoke(inp("intruder"), config)
            refused.append(time.monotonic() - started)
            await asyncio.sleep(0.02)
        return "done"

    app = app_of(checkpointer, long_step)
    await app.ainvoke(inp("one"), config)
    assert refused[-1] > 1.5
    assert await stored_texts(checkpointer) == ["one", "done"]


async def test_a_node_timeout_shorter_than_the_heartbeat_still_fires_on_time(
    checkpointer: BaseCheckpointer,
) -> None:
    """The run's one timer serves both the lease heartbeat (every 10 s here) and the node's
    deadline: a node deadline before the next beat is not left waiting for it."""

    async def stuck(state: AgentState) -> str:
        await asyncio.Event().wait()
        return "never"

    app = app_of(checkpointer, stuck)
    with pytest.raises(exceptions.NodeTimeoutError):
        await asyncio.wait_for(app.ainvoke(inp("x"), {"thread_id": "t", "node_timeout": 0.05}), 5)


async def test_a_run_whose_lease_was_taken_over_writes_nothing(backend: Backend) -> None:
    store = backend.store
    gate = Gate()
    slow = app_of(store, gate)
    config = {"thread_id": "t"}
    first = asyncio.create_task(slow.ainvoke(inp("one"), config))
    await gate.started.wait()
    # its lease runs out (its process froze longer than the lease), and another run takes over
    await expire_lease(backend)
    await app_of(store, quick).ainvoke(inp("two"), config)
    gate.release.set()
    with pytest.raises(exceptions.LeaseLostError):
        await first
    assert await stored_texts(store) == ["one", "two", answer_to("two")]


async def expire_lease(backend: Backend) -> None:
    if backend.is_sql:
        await backend.sql("UPDATE tx_threads SET lease_expires = 0")
    else:
        backend.store._threads["t"].lease_expires = 0.0  # type: ignore[attr-defined]


async def test_a_heartbeat_renews_an_expired_lease_unless_another_run_took_it(
    backend: Backend,
) -> None:
    from tenxgraph.storage.checkpointer.lease import Lease

    store = backend.store
    await app_of(store, quick).ainvoke(inp("one"), {"thread_id": "t"})
    mine = Lease("mine@elsewhere:1:1", 30)
    await take_lease(store, mine.owner, mine.ttl)
    await expire_lease(backend)  # late (a blocked event loop), but nobody came meanwhile
    assert await store.arenew_lease("t", mine)
    holder = await store.alease_holder("t")
    assert holder is not None
    assert holder.owner == mine.owner
    await expire_lease(backend)
    await take_lease(store, "other@elsewhere:2:2", 30)  # this time another run took over
    assert not await store.arenew_lease("t", mine)


# -- schema: a database written before leases ---------------------------------------------------


async def test_a_version_1_sqlite_database_is_migrated_and_its_threads_kept(tmp_path: Path) -> None:
    import sqlite3

    from tenxgraph.storage.checkpointer import SqliteCheckpointer
    from tenxgraph.storage.checkpointer.sqlite import MIGRATIONS

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in MIGRATIONS[1]:
        conn.execute(statement)
    conn.execute("CREATE TABLE tx_schema_version (version INTEGER)")
    conn.execute("INSERT INTO tx_schema_version VALUES (1)")
    conn.close()
    old = SqliteCheckpointer(path)
    # write a thread the way version 1 did (no lease columns yet): through SQL
    conn = sqlite3.connect(path, isolation_level=None)
    body = Message.text_message("kept", "user")
    conn.execute("INSERT INTO tx_threads VALUES ('t', 1, 0, 0, 0)")
    meta = AgentState().execution_meta
    meta.thread_id, meta.status = "t", "completed"  # type: ignore[assignment]
    header = '{"execution_meta":' + meta.model_dump_json() + "}"
    conn.execute(
        "INSERT INTO tx_checkpoints VALUES ('t', 1, ?, 1, 0, 1, 'completed', NULL, 0)", (header,)
    )
    conn.execute("INSERT INTO tx_messages VALUES ('t', 0, ?, ?)",
                 (str(body.message_id), body.model_dump_json()))  # fmt: skip
    conn.close()
    app = app_of(old, quick)
    await app.ainvoke(inp("new"), {"thread_id": "t"})
    assert await stored_texts(old) == ["kept", "new", answer_to("new")]
    await old.aclose()


# -- config keys nobody reads -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("max_turns", "use max_model_calls"),
        ("stream_mode", "not supported"),
        ("recursion_limt", "did you mean 'recursion_limit'"),
        ("node_timout", "did you mean 'node_timeout'"),
    ],
)
def test_config_keys_that_would_be_ignored_are_refused(key: str, says: str) -> None:
    from tenxgraph.storage.checkpointer import InMemoryCheckpointer

    app = app_of(InMemoryCheckpointer(), quick)
    with pytest.raises(ValueError, match=says) as refused:
        app.invoke(inp("x"), {"thread_id": "t", key: 3})
    assert "'recursion_limit'" in str(refused.value)  # lists the keys it reads
    assert app.get_state({"thread_id": "t"}) is None  # nothing ran


def test_the_callers_own_config_keys_reach_the_nodes() -> None:
    seen: list[Any] = []

    def node(state: AgentState, config: dict[str, Any]) -> str:
        seen.append((config["tenant"], config["configurable"]["user"]))
        return "ok"

    from tenxgraph.storage.checkpointer import InMemoryCheckpointer

    app = app_of(InMemoryCheckpointer(), node)
    app.invoke(inp("x"), {"thread_id": "t", "tenant": "acme", "configurable": {"user": "u1"}})
    assert seen == [("acme", "u1")]


# -- a failed run does not brick its thread ------------------------------------------------------


async def test_new_input_after_a_failed_run_starts_a_new_turn(
    checkpointer: BaseCheckpointer,
) -> None:
    """A step that always fails on what the thread holds must not make every later message
    retry it: a new message starts a new turn from the first node."""
    turns: list[str] = []

    def listen(state: AgentState) -> None:
        turns.append(state.context[-1].text())

    def picky(state: AgentState) -> str:
        question = state.context[-1].text()
        if question == "poison":
            raise ValueError("cannot answer that")
        return answer_to(question)

    app = app_of(checkpointer, listen, picky)
    config = {"thread_id": "t"}
    with pytest.raises(exceptions.NodeError):
        await app.ainvoke(inp("poison"), config)
    with pytest.raises(exceptions.NodeError):  # None retries the failed step: it fails again
        await app.ainvoke(None, config)
    assert turns == ["poison"]
    for _ in range(2):
        result = await app.ainvoke(inp("hello"), config)
        assert texts(result["messages"]) == ["hello", answer_to("hello")]
    assert turns == ["poison", "hello", "hello"]  # each message was a turn from the start
    assert await stored_texts(checkpointer) == ["poison", *["hello", answer_to("hello")] * 2]


# -- two OS processes x 30 turns -----------------------------------------------------------------


def worker(
    backend: Backend, name: str, count: int, strategy: str, go: Path
) -> subprocess.Popen[str]:
    if backend.name == "sqlite":
        target, schema = str(backend.db_path), "-"
    else:
        target, schema = backend.dsn, backend.schema
    # this checkout's code first, whatever tenxgraph the interpreter has installed
    paths = (str(REPO / "src"), os.environ.get("PYTHONPATH"), str(REPO))
    path = os.pathsep.join(p for p in paths if p)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.adversarial._turns_worker", backend.name, target, schema,
         "t", name, str(count), strategy, str(go)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": path},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.parametrize("strategy", ["reject", "enqueue"])
async def test_two_processes_30_turns_each_lose_nothing_and_answer_each_turn(
    sql_backend: Backend, tmp_path: Path, strategy: str
) -> None:
    await sql_backend.store.asetup()  # the schema exists before both start
    go = tmp_path / "go"
    procs = [worker(sql_backend, name, 30, strategy, go) for name in ("a", "b")]
    go.touch()
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))

    history = await sql_backend.store.aload("t", AgentState)
    assert history is not None
    context = history.state.context
    assert len(context) == 120
    users = [m.text() for m in context if m.role == "user"]
    assert Counter(users) == Counter(f"{n}-{i}" for n in "ab" for i in range(30))
    for question, answer in zip(context[0::2], context[1::2], strict=True):
        assert question.role == "user"
        assert answer.role == "assistant"
        assert answer.text() == answer_to(question.text())
    for name in "ab":  # each worker's turns in its own order
        assert [u for u in users if u.startswith(name)] == [f"{name}-{i}" for i in range(30)]
    print(f"{sql_backend.name}/{strategy}: refused and retried: {[r['rejected'] for r in reports]}")
