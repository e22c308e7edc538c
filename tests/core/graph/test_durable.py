"""Durable threads at the graph level: interrupt() and resume, breakpoints, retry after an
error, continuing a stopped or unfinished run, state history and forks, the tool ledger and
two apps racing on one thread. Every test runs on each checkpointer (memory, SQLite, and
PostgreSQL when TENXGRAPH_TEST_PG_DSN is set)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from tenxgraph.core.exceptions import NodeError, ThreadBusyError
from tenxgraph.core.graph import CompiledGraph, StateGraph
from tenxgraph.core.state import AgentState, Message, StreamChunk, StreamEvent
from tenxgraph.core.state.reducers import append_items
from tenxgraph.storage.checkpointer import BaseCheckpointer
from tenxgraph.utils import interrupt
from tenxgraph.utils.constants import END, START
from tests.core.graph._support import ai, chain, inp, texts, user

PG_DSN_VAR = "TENXGRAPH_TEST_PG_DSN"
REPO = Path(__file__).resolve().parents[3]


# -- one checkpointer per backend ------------------------------------------------------------


@pytest.fixture
def config() -> dict[str, Any]:
    """A config with a thread id of its own (the PostgreSQL tables are shared)."""
    return {"thread_id": f"t-{uuid.uuid4().hex}"}


class Notes(AgentState):
    note: str = ""
    items: Annotated[list[str], append_items] = Field(default_factory=list)


class Calls(Counter[str]):
    """How often each node ran."""

    def node(self, name: str, reply: str | None = None) -> tuple[str, Callable[..., Any]]:
        async def run(state: AgentState) -> str:
            self[name] += 1
            return reply or name

        return name, run


async def stored(app: CompiledGraph, config: dict[str, Any]) -> AgentState:
    state = await app.aget_state(config)
    assert state is not None
    return state


def ids(messages: list[Message]) -> list[str]:
    return [str(m.message_id) for m in messages]


def assert_no_duplicates(messages: list[Message]) -> None:
    assert len(set(ids(messages))) == len(messages), texts(messages)


# -- drivers: the same run through ainvoke, invoke, astream and stream ------------------------


async def run_ainvoke(app: CompiledGraph, data: Any, config: dict[str, Any]) -> dict[str, Any]:
    return await app.ainvoke(data, config)


async def run_invoke(app: CompiledGraph, data: Any, config: dict[str, Any]) -> dict[str, Any]:
    return app.invoke(data, config)


def _from_chunks(chunks: list[StreamChunk]) -> dict[str, Any]:
    """The parts of a result a stream tells: its messages and the interrupt, if any."""
    result: dict[str, Any] = {"chunks": chunks}
    paused = [
        c for c in chunks if c.event == StreamEvent.UPDATES and c.data["status"] == "interrupted"
    ]
    assert len(paused) <= 1
    if paused:
        data = paused[0].data
        assert data is not None
        result["interrupted"] = {"node": data["node"], "reason": data["reason"]}
        if data.get("interrupt"):
            result["interrupt"] = data["interrupt"]
    return result


async def run_astream(app: CompiledGraph, data: Any, config: dict[str, Any]) -> dict[str, Any]:
    return _from_chunks([c async for c in app.astream(data, config)])


async def run_stream(app: CompiledGraph, data: Any, config: dict[str, Any]) -> dict[str, Any]:
    return _from_chunks(list(app.stream(data, config)))


DRIVERS = {
    "ainvoke": run_ainvoke,
    "invoke": run_invoke,
    "astream": run_astream,
    "stream": run_stream,
}


# -- interrupt() ------------------------------------------------------------------------------


def asking_app(store: BaseCheckpointer, calls: Calls) -> CompiledGraph:
    async def ask(state: AgentState) -> str:
        calls["ask"] += 1
        name = interrupt({"field": "name"}, message="What is your name?", reason="need_name")
        return f"hello {name}"

    return chain(calls.node("first"), ("ask", ask), calls.node("last")).compile(checkpointer=store)


@pytest.mark.parametrize("how", list(DRIVERS))
async def test_interrupt_pauses_and_resume_answers_it(
    store: BaseCheckpointer, config: dict[str, Any], how: str
) -> None:
    drive = DRIVERS[how]
    calls = Calls()
    app = asking_app(store, calls)

    result = await drive(app, inp("hi"), config)
    assert result["interrupted"]["node"] == "ask"
    assert result["interrupted"]["reason"] == "need_name"
    if "status" in result["interrupted"]:  # the stream's update has no status
        assert result["interrupted"]["status"] == "interrupted_before"
    asked = result["interrupt"]
    assert asked["value"] == {"field": "name"}
    assert asked["message"] == "What is your name?"
    assert asked["reason"] == "need_name"
    assert asked["key"] == "node:ask:0"
    assert asked["node"] == "ask"

    state = await stored(app, config)
    meta = state.execution_meta
    assert meta.status == "interrupted_before"
    assert meta.interrupted_node == "ask"
    assert meta.interrupt_data is not None
    assert meta.interrupt_data["key"] == "node:ask:0"
    assert meta.interrupt_data["value"] == {"field": "name"}
    assert texts(state.context) == ["hi", "first"]

    resumed = await drive(app, {"resume": "Ann"}, config)
    assert "interrupt" not in resumed
    state = await stored(app, config)
    assert state.execution_meta.status == "completed"
    assert state.execution_meta.interrupt_data is None
    assert texts(state.context) == ["hi", "first", "hello Ann", "last"]
    assert_no_duplicates(state.context)
    assert calls == {"first": 1, "ask": 2, "last": 1}
    if how in ("invoke", "stream"):
        app.close()  # closes the store's connections of the app's loop thread too


async def test_stream_reports_the_interrupt_even_at_low_granularity(
    store: BaseCheckpointer, config: dict[str, Any]
) -> None:
    app = asking_app(store, Calls())
    chunks = [c async for c in app.astream(inp("hi"), config, response_granularity="low")]
    updates = [c for c in chunks if c.event == StreamEvent.UPDATES]
    assert len(updates) == 1
    data = updates[0].data
    assert data is not None
    assert data["status"] == "interrupted"
    assert data["node"] == "ask"
    assert data["interrupt"]["key"] == "node:ask:0"
    assert data["interrupt"]["message"] == "What is your name?"


async def test_two_interrupts_in_one_node_are_answered_in_order(
    store: BaseCheckpointer, config: dict[str, Any]
) -> None:
    calls = Calls()

    async def form(state: AgentState) -> str:
        calls["before first interrupt"] += 1
        name = interrupt("name?")
        calls["between"] += 1
        city = interrupt("city?")
        return f"{name} from {city}"

    app = chain(form).compile(checkpointer=store)
    first = await app.ainvoke(inp("hi"), config)
    assert first["interrupt"]["value"] == "name?"
    assert first["interrupt"]["key"] == "node:form:0"
    second = await app.ainvoke({"resume": "Ann"}, config)
    assert second["interrupt"]["value"] == "city?"
    assert second["interrupt"]["key"] == "node:form:1"
    state = await stored(app, config)
    assert state.execution_meta.status == "interrupted_before"
    assert texts(state.context) == ["hi"]
    done = await app.ainvoke({"resume": "Oslo"}, config)
    assert "interrupt" not in done
    assert texts(done["messages"]) == ["Ann from Oslo"]
    state = await stored(app, config)
    assert texts(state.context) == ["hi", "Ann from Oslo"]
    assert calls == {"before first interrupt": 3, "between": 2}


async def test_answers_of_a_finished_node_are_not_reused_by_the_next_turn(
    store: BaseCheckpointer, config: dict[str, Any]
) -> None:
    app = asking_app(store, Calls())
    await app.ainvoke(inp("hi"), config)
    await app.ainvoke({"resume": "Ann"}, config)
    again = await app.ainvoke(inp("again"), config)
    assert again["interrupt"]["key"] == "node:ask:0"  # asks afresh
    await app.ainvoke({"resume": "Bob"}, config)
    state = await stored(app, config)
    assert texts(state.context) == [
        *["hi", "first", "hello Ann", "last"],
        *["again", "first", "hello Bob", "last"],
    ]


class Person(BaseModel):
    name: str
    age: int


async def test_response_schema_validates_the_answer_into_the_model(
    store: BaseCheckpointer, config: dict[str, Any]
) -> None:
    got: list[Any] = []

    async def who(state: AgentState) -> str:
        person = interrupt("who?", response_schema=Person)
        got.append(person)
        return f"{person.name} is {person.age}"

    app = chain(who).compile(checkpointer=store)
    result = await app.ainvoke(inp("hi"), config)
    schema = result["interrupt"]["response_schema"]
    assert schema == Person.model_json_schema()
    await app.ainvoke({"resume": {"name": "Ann", "age": "41"}}, config)
    assert got == [Person(name="Ann", age=41)]
    assert isinstance(got[0], Person)
    assert texts((await stored(app, config)).context) == ["hi", "Ann is 41"]


async def test_input_without_resume_on_a_thread_paused_at_interrupt_is_refused(
    store: BaseCheckpointer, config: dict[str, Any]
) -> None:
    calls = Calls()
    app = asking_app(store, calls)
    await app.ainvoke(inp("hi"), config)
    head = await store.aversion(config["thread_id"])
    with pytest.raises(ValueError, match="resume"):
        await app.ainvoke(inp("something else"), config)
    with pytest.raises(ValueError, match="resume"):
        await app.ainvoke(None, config)
    assert await store.aversion(config["thread_id"]) == head  # nothing written
    state = await stored(app, config)
    assert state.execution_meta.status == "interrupted_before"
    assert texts(state.context) == ["hi", "first"]
    # still resumable afterwards
    await app.ainvoke({"resume": "Ann"}, config)
    assert texts((await stored(app, config)).context) == ["hi", "first", "hello Ann", "last"]
    assert calls == {"first": 1, "ask": 2, "last": 1}


async def test_resume_on_a_completed_thread_is_refused(
    store: BaseCheckpointer, config: dict[str, Any]
) -> None:
    app = chain(Calls().node("echo")).compile(checkpointer=store)
    await app.ainvoke(inp("hi"), config)
    with pytest.raises(ValueError, match="Nothing to resume"):
        await app.ainvoke({"resume": "x"}, config)
    state = await stored(app, config)
    assert state.execution_meta.status == "completed"
    assert texts(state.context) == ["hi", "echo"]


async def test_resume_with_messages_on_a_new_thread_is_refused(
    store: BaseCheckpointer, config: dict[str, Any]
) -> None:
    app = chain(Calls().node("echo")).compile(checkpointer=store)
    with pytest.raises(ValueError, match="Nothing to resume"):
        await app.ainvoke({"resume": "x", "messages": [user("hi")]}, config)
    assert await app.aget_state(config) is None


async def test_resume_on_a_new_thread_is_refused_as_nothing_to_resume(
    store: BaseCheckpointer, config: dict[str, Any]
) -> None:
    app = chain(Calls().node("echo")).compile(checkpointer=store)
    with pytest.raises(ValueError, match="Nothing to resume"):
        await app.ainvoke({"resume": "x"}, config)


def test_interrupt_outside_a_run_is_a_runtime_error() -> None:
    with pytest.raises(RuntimeError, match="inside a node"):
        interrupt("anyone?")


async def test_interrupt_in_a_sync_node(store: BaseCheckpointer, config: dict[str, Any]) -> None:
    calls = Calls()

    def confirm(state: AgentState) -> str:  # runs in a worker thread
        calls["confirm"] += 1
        answer = interrupt("sure?")
        return f"confirmed: {answer}"

    app = chain(calls.node("first"), confirm).compile(checkpointer=store)
    result = await app.ainvoke(inp("hi"), config)
    assert result["interrupted"]["node"] == "confirm"
    assert result["interrupt"]["key"] == "node:confirm:0"
    assert texts((await stored(app, config)).context) == ["hi", "first"]
    await app.ainvoke({"resume": "yes"}, config)
    assert texts((await stored(app, config)).context) == ["hi", "first", "confirmed: yes"]
    assert calls == {"first": 1, "confirm": 2}


async def test_interrupt_in_a_parallel_branch(
    store: BaseCheckpointer, config: dict[str, Any]
) -> None:
    calls = Calls()
    left_done = asyncio.Event()

    async def left(state: Notes) -> dict[str, Any]:
        calls["left"] += 1
        left_done.set()
        return {"context": [ai("left")], "items": ["left"], "note": "left ran"}

    async def right(state: Notes) -> str:
        calls["right"] += 1
        await left_done.wait()  # left has finished its work before the pause
        answer = interrupt("go right?")
        return f"right: {answer}"

    async def join(state: Notes) -> str:
        calls["join"] += 1
        return "joined"

    graph = StateGraph(Notes)
    graph.add_node(left)
    graph.add_node(right)
    graph.add_node(join)
    graph.add_edge(START, "left")
    graph.add_edge(START, "right")
    graph.add_edge("left", "join")
    graph.add_edge("right", "join")
    graph.add_edge("join", END)
    app = graph.compile(checkpointer=store)

    result = await app.ainvoke(inp("hi"), config)
    assert result["interrupted"]["node"] == "right"
    state = await stored(app, config)
    assert isinstance(state, Notes)
    assert state.execution_meta.status == "interrupted_before"
    # the paused step's outputs (left's too) are not applied
    assert texts(state.context) == ["hi"]
    assert state.items == []
    assert state.note == ""

    left_done.clear()
    await app.ainvoke({"resume": "yes"}, config)
    state = await stored(app, config)
    assert isinstance(state, Notes)
    assert state.execution_meta.status == "completed"
    assert texts(state.context) == ["hi", "left", "right: yes", "joined"]
    assert state.items == ["left"]
    assert state.note == "left ran"
    assert calls == {"left": 2, "right": 2, "join": 1}


# -- interrupt_before / interrupt_after -------------------------------------------------------


async def test_interrupt_before_pauses_and_none_continues(
    store: BaseCheckpointer, config: dict[str, Any]
) -> None:
    calls = Calls()
    app = chain(calls.node("a"), calls.node("b"), calls.node("c")).compile(
        checkpointer=store, interrupt_before=["b"]
    )
    result = await app.ainvoke(inp("hi"), config)
    assert result["interrupted"] == {
        "node": "b",
        "reason": "interrupt_before",
        "status": "interrupted_before",
    }
    state = await stored(app, config)
    assert state.execution_meta.status == "interrupted_before"
    assert state.execution_meta.interrupt_reason == "interrupt_before"
    assert texts(state.context) == ["hi", "a"]
    assert calls == {"a": 1}

    result = await app.ainvoke(None, config)
    assert "interrupted" not in result
    assert texts(result["messages"]) == ["b", "c"]
    state = await stored(app, config)
    assert state.execution_meta.status == "completed"
    assert texts(state.context) == ["hi", "a", "b", "c"]
    assert calls == {"a": 1, "b": 1, "c": 1}


async def test_interrupt_after_pauses_once_saved_and_none_goes_on(
    store: BaseCheckpointer, config: dict[str, Any]
) -> None:
    calls = Calls()
    app = chain(calls.node("a"), calls.node("b"), calls.node("c")).compile(
        checkpointer=store, interrupt_after=["a"]
    )
    result = await app.ainvoke(inp("hi"), config)
    assert result["interrupted"] == {
        "node": "a",
        "reason": "interrupt_after",
        "status": "interrupted_after",
    }
    state = await stored(app, config)
    assert state.execution_meta.status == "interrupted_after"
    assert texts(state.context) == ["hi", "a"]  # a's update is saved
    assert calls == {"a": 1}

    await app.ainvoke(None, config)
    state = await stored(app, config)
    assert state.execution_meta.status == "completed"
    assert texts(state.context) == ["hi", "a", "b", "c"]
    assert calls == {"a": 1, "b": 1, "c": 1}


async def test_breakpoint_is_honoured_again_on_the_next_turn(
    store: BaseCheckpointer, config: dict[str, Any]
) -> None:
    calls = Calls()
    app = chain(calls.node("a"), calls.node("b")).compile(
        checkpointer=store, interrupt_before=["b"]
    )
    await app.ainvoke(inp("one"), config)
    await app.ainvoke(None, config)
    result = await app.ainvoke(inp("two"), config)
    assert result["interrupted"]["node"] == "b"
    await app.ainvoke(None, config)
    assert texts((await stored(app, config)).context) == ["one", "a", "b", "two", "a", "b"]
    assert calls == {"a": 2, "b": 2}


# -- retry after an error ---------------------------------------------------------------------


@pytest.mark.parametrize("retry_input", ["none", "messages"])
async def test_after_an_error_none_retries_the_failed_step_and_a_message_starts_a_new_turn(
    store: BaseCheckpointer, config: dict[str, Any], retry_input: str
) -> None:
    calls = Calls()
    failing = [True]

    async def b(state: Notes) -> str:
        calls["b"] += 1
        # partial changes of the failed step must not be stored
        state.context.append(ai("partial"))
        state.note = "half done"
        if failing[0]:
            raise RuntimeError("boom")
        return "b"

    app = chain(calls.node("a"), b, calls.node("c"), state=Notes).compile(checkpointer=store)
    with pytest.raises(NodeError, match="boom"):
        await app.ainvoke(inp("hi"), config)
    state = await stored(app, config)
    meta = state.execution_meta
    assert meta.status == "error"
    assert "boom" in meta.internal_data["error"]
    assert texts(state.context) == ["hi", "a"]
    assert isinstance(state, Notes)
    assert state.note == ""

    failing[0] = False
    if retry_input == "none":  # no new input: the failed step is retried
        await app.ainvoke(None, config)
        expected = ["hi", "a", "partial", "b", "c"]
        expected_calls = {"a": 1, "b": 2, "c": 1}
    else:  # a new message starts a new turn from the start; the failure stays in history
        await app.ainvoke(inp("next question"), config)
        expected = ["hi", "a", "next question", "a", "partial", "b", "c"]
        expected_calls = {"a": 2, "b": 2, "c": 1}
    state = await stored(app, config)
    assert state.execution_meta.status == "completed"
    assert "error" not in state.execution_meta.internal_data
    assert texts(state.context) == expected
    assert_no_duplicates(state.context)
    assert calls == expected_calls
    statuses = [info.status for info in await app.aget_state_history(config)]
    assert "error" in statuses  # the failed run is a version of the thread


# -- stop, and runs that never finished ------------------------------------------------------


class Blocker:
    """A node that, the first time, says it started and waits until cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.calls = 0

    async def __call__(self, state: AgentState) -> str:
        self.calls += 1
        if self.calls == 1:
            self.started.set()
            await asyncio.Event().wait()
        return "b"


async def test_a_stopped_run_is_continued_by_none(
    store: BaseCheckpointer, config: dict[str, Any]
) -> None:
    calls = Calls()
    blocker = Blocker()
    app = chain(calls.node("a"), ("b", blocker), calls.node("c")).compile(checkpointer=store)
    run = asyncio.create_task(app.ainvoke(inp("hi"), config))
    await blocker.started.wait()
    await app.astop(config)
    result = await run
    assert result["interrupted"] == {
        "node": "b",
        "reason": "stop_requested",
        "status": "interrupted_after",
    }
    state = await stored(app, config)
    assert state.execution_meta.status == "interrupted_after"
    assert state.execution_meta.interrupt_reason == "stop_requested"
    assert texts(state.context) == ["hi", "a"]

    await app.ainvoke(None, config)
    state = await stored(app, config)
    assert state.execution_meta.status == "completed"
    assert texts(state.context) == ["hi", "a", "b", "c"]
    assert calls == {"a": 1, "c": 1}
    assert blocker.calls == 2


async def test_new_messages_after_a_stop_start_a_new_run_from_the_entry(
    store: BaseCheckpointer, config: dict[str, Any]
) -> None:
    calls = Calls()
    blocker = Blocker()
    app = chain(calls.node("a"), ("b", blocker), calls.node("c")).compile(checkpointer=store)
    run = asyncio.create_task(app.ainvoke(inp("hi"), config))
    await blocker.started.wait()
    await app.astop(config)
    await run
    await app.ainvoke(inp("again"), config)
    state = await stored(app, config)
    assert state.execution_meta.status == "completed"
    assert texts(state.context) == ["hi", "a", "again", "a", "b", "c"]
    assert calls == {"a": 2, "c": 1}


async def test_an_unfinished_run_shows_running_and_none_continues_it(
    store: BaseCheckpointer, config: dict[str, Any]
) -> None:
    """A run cancelled inside a node saves nothing more: like a process that died there, the
    thread's last checkpoint says running. A new app on the same store continues it."""
    calls = Calls()
    blocker = Blocker()

    def build() -> CompiledGraph:
        return chain(calls.node("a"), ("b", blocker), calls.node("c")).compile(checkpointer=store)

    run = asyncio.create_task(build().ainvoke(inp("hi"), config))
    await blocker.started.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run

    app = build()
    state = await stored(app, config)
    assert state.execution_meta.status == "running"
    assert texts(state.context) == ["hi", "a"]
    before = ids(state.context)

    result = await app.ainvoke(None, config)
    assert texts(result["messages"]) == ["b", "c"]
    state = await stored(app, config)
    assert state.execution_meta.status == "completed"
    assert texts(state.context) == ["hi", "a", "b", "c"]
    assert ids(state.context)[:2] == before
    assert_no_duplicates(state.context)
    assert calls == {"a": 1, "c": 1}
    assert blocker.calls == 2


# -- history, versions, update_state, forks --------------------------------------------------


async def test_state_history_is_newest_first_with_versions_and_steps(
    store: BaseCheckpointer, config: dict[str, Any]
) -> None:
    calls = Calls()
    app = chain(calls.node("a"), calls.node("b")).compile(checkpointer=store)
    await app.ainvoke(inp("hi"), config)
    history = await app.aget_state_history(config)
    head = await store.aversion(config["thread_id"])
    assert [h.version for h in history] == list(range(head, 0, -1))
    assert all(h.thread_id == config["thread_id"] for h in history)
    newest, oldest = history[0], history[-1]
    assert newest.status == "completed"
    assert newest.step == 2
    assert newest.message_count == 3
    assert newest.node == "b"
    assert oldest.status == "running"
    assert oldest.step == 0
    assert oldest.message_count == 1
    steps = [h.step for h in history]
    assert steps == sorted(steps, reverse=True)
    counts = [h.message_count for h in history]
    assert counts == sorted(counts, reverse=True)
    assert app.get_state_history(config) == history
    assert await app.aget_state_history(config, limit=2) == history[:2]
    assert await app.aget_state_history({"thread_id": "nobody-" + uuid.uuid4().hex}) == []

    for entry in history:
        old = await app.aget_state({**config, "checkpoint_version": entry.version})
        assert old is not None
        assert len(old.context) == entry.message_count
        assert old.execution_meta.step == entry.step
        assert old.execution_meta.status == entry.status
    after_a = next(h for h in history if h.message_count == 2)
    old = await app.aget_state({**config, "checkpoint_version": after_a.version})
    assert old is not None
    assert texts(old.context) == ["hi", "a"]
    assert app.get_state({**config, "checkpoint_version": after_a.version}) == old
    app.close()  # closes the store's connections of the app's loop thread too


async def test_update_state_writes_through_reducers_as_a_new_version(
    store: BaseCheckpointer, config: dict[str, Any]
) -> None:
    app = chain(Calls().node("echo"), state=Notes).compile(checkpointer=store)
    await app.ainvoke(inp("hi", items=["x"]), config)
    head = await store.aversion(config["thread_id"])
    assert head is not None

    version = await app.aupdate_state(config, {"items": ["y"], "note": "set"})
    assert version == head + 1
    assert await store.aversion(config["thread_id"]) == head + 1
    state = await stored(app, config)
    assert isinstance(state, Notes)
    assert state.items == ["x", "y"]  # append_items applied
    assert state.note == "set"

    note = ai("added from outside")
    version = await app.aupdate_state(config, {"context": [note]})
    assert version == head + 2
    state = await stored(app, config)
    assert texts(state.context) == ["hi", "echo", "added from outside"]
    assert ids(state.context)[-1] == note.message_id

    version = app.update_state(config, {"items": ["z"]})
    assert version == head + 3
    history = await app.aget_state_history(config)
    assert [h.version for h in history[:4]] == [head + 3, head + 2, head + 1, head]
    # the old version is still readable as it was
    old = await app.aget_state({**config, "checkpoint_version": head})
    assert isinstance(old, Notes)
    assert old.items == ["x"]
    assert texts(old.context) == ["hi", "echo"]

    # the next run sees the update
    await app.ainvoke(inp("more"), config)
    state = await stored(app, config)
    assert isinstance(state, Notes)
    assert state.items == ["x", "y", "z"]
    assert texts(state.context) == ["hi", "echo", "added from outside", "more", "echo"]
    app.close()  # closes the store's connections of the app's loop thread too


async def test_invoking_from_an_earlier_version_forks(
    store: BaseCheckpointer, config: dict[str, Any]
) -> None:
    app = chain(Calls().node("echo")).compile(checkpointer=store)
    await app.ainvoke(inp("one"), config)
    after_one = await store.aversion(config["thread_id"])
    assert after_one is not None
    kept = ids((await stored(app, config)).context)
    await app.ainvoke(inp("two"), config)
    head = await store.aversion(config["thread_id"])
    assert head is not None

    result = await app.ainvoke(
        inp("two, again"), {**config, "checkpoint_version": after_one}, "partial"
    )
    assert texts(result["context"]) == ["one", "echo", "two, again", "echo"]
    state = await stored(app, config)
    assert texts(state.context) == ["one", "echo", "two, again", "echo"]
    assert ids(state.context)[:2] == kept
    assert_no_duplicates(state.context)
    new_head = await store.aversion(config["thread_id"])
    assert new_head is not None
    assert new_head > head
    assert (await app.aget_state_history(config))[0].version == new_head

    # and the thread goes on from the fork
    await app.ainvoke(inp("three"), config)
    state = await stored(app, config)
    assert texts(state.context) == ["one", "echo", "two, again", "echo", "three", "echo"]


async def test_checkpoint_version_must_be_a_version_number(
    store: BaseCheckpointer, config: dict[str, Any]
) -> None:
    app = chain(Calls().node("echo")).compile(checkpointer=store)
    await app.ainvoke(inp("one"), config)
    with pytest.raises(ValueError, match="checkpoint_version"):
        await app.ainvoke(inp("x"), {**config, "checkpoint_version": 0})


# -- tool ledger ------------------------------------------------------------------------------


async def test_tool_ledger_first_write_wins(store: BaseCheckpointer) -> None:
    thread = f"t-{uuid.uuid4().hex}"
    other = f"t-{uuid.uuid4().hex}"
    assert await store.aget_tool_result(thread, "msg-1", "call-1") is None
    assert await store.aput_tool_result(thread, "msg-1", "call-1", {"output": 1}) is True
    assert await store.aput_tool_result(thread, "msg-1", "call-1", {"output": 2}) is False
    assert await store.aget_tool_result(thread, "msg-1", "call-1") == {"output": 1}
    # keyed by all three parts
    assert await store.aget_tool_result(thread, "msg-1", "call-2") is None
    assert await store.aget_tool_result(thread, "msg-2", "call-1") is None
    assert await store.aget_tool_result(other, "msg-1", "call-1") is None
    assert await store.aput_tool_result(thread, "msg-1", "call-2", {"output": [3, "x"]}) is True
    assert await store.aput_tool_result(other, "msg-1", "call-1", {"output": None}) is True
    assert await store.aget_tool_result(thread, "msg-1", "call-2") == {"output": [3, "x"]}
    assert await store.aget_tool_result(other, "msg-1", "call-1") == {"output": None}
    assert await store.aget_tool_result(thread, "msg-1", "call-1") == {"output": 1}


async def test_concurrent_tool_ledger_writes_keep_exactly_one(store: BaseCheckpointer) -> None:
    thread = f"t-{uuid.uuid4().hex}"
    wins = await asyncio.gather(
        *(store.aput_tool_result(thread, "m", "c", {"writer": i}) for i in range(8))
    )
    assert wins.count(True) == 1
    winner = wins.index(True)
    assert await store.aget_tool_result(thread, "m", "c") == {"writer": winner}


# -- two apps on one thread -------------------------------------------------------------------


async def test_two_apps_racing_on_one_thread_never_lose_a_message(
    store: BaseCheckpointer, config: dict[str, Any]
) -> None:
    """App 1's run holds the thread while app 2 starts a turn on it: app 2 is refused with
    ThreadBusyError before writing anything, and app 1's turn is stored whole."""
    started = asyncio.Event()
    release = asyncio.Event()

    async def slow(state: AgentState) -> str:
        started.set()
        await release.wait()
        return f"slow reply to {state.context[-1].text()}"

    async def quick(state: AgentState) -> str:
        return f"quick reply to {state.context[-1].text()}"

    app1 = chain(("reply", slow)).compile(checkpointer=store)
    app2 = chain(("reply", quick)).compile(checkpointer=store)
    await app2.ainvoke(inp("setup"), config)

    run1 = asyncio.create_task(app1.ainvoke(inp("from one"), config))
    await started.wait()
    with pytest.raises(ThreadBusyError):
        await app2.ainvoke(inp("from two"), config)
    release.set()
    await run1
    state = await stored(app1, config)
    assert texts(state.context) == [
        "setup",
        "quick reply to setup",
        "from one",
        "slow reply to from one",
    ]


async def test_two_apps_both_midway_on_one_thread_never_lose_a_message(
    store: BaseCheckpointer, config: dict[str, Any]
) -> None:
    """App 1 asks to wait (`enqueue`) while app 0's run is inside its node: it runs its turn
    once app 0's is stored, on top of it."""
    started = [asyncio.Event(), asyncio.Event()]
    release = [asyncio.Event(), asyncio.Event()]

    def node(i: int) -> Callable[..., Any]:
        async def reply(state: AgentState) -> str:
            started[i].set()
            await release[i].wait()
            return f"reply {i} to {state.context[-1].text()}"

        return reply

    apps = [chain(("reply", node(i))).compile(checkpointer=store) for i in range(2)]
    run0 = asyncio.create_task(apps[0].ainvoke(inp("zero"), config))
    await started[0].wait()
    waiting = {**config, "multitask_strategy": "enqueue"}
    run1 = asyncio.create_task(apps[1].ainvoke(inp("one"), waiting))
    release[1].set()
    release[0].set()
    await asyncio.gather(run0, run1)
    state = await stored(apps[0], config)
    assert texts(state.context) == ["zero", "reply 0 to zero", "one", "reply 1 to one"]


# -- across processes -------------------------------------------------------------------------


def run_child(script: str, env: dict[str, str], timeout: float = 60) -> dict[str, Any]:
    """Run `script` in a new Python process at the repo root; its last stdout line is JSON."""
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]), **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


PAUSE_SCRIPT = """
import asyncio, json
from tenxgraph.core.state import Message
from tests.core.graph._durable_graph import ask_app

async def main():
    app = ask_app("sqlite", {db!r})
    result = await app.ainvoke({{"messages": [Message.text_message("hi", "user")]}},
                               {{"thread_id": "x"}})
    await app.aclose()
    print(json.dumps({{"interrupted": result["interrupted"], "interrupt": result["interrupt"]}}))

asyncio.run(main())
"""

RESUME_SCRIPT = """
import json
from tests.core.graph._durable_graph import ask_app

app = ask_app("sqlite", {db!r})
config = {{"thread_id": "x"}}
before = app.get_state(config).execution_meta.status
result = app.invoke({{"resume": "Ann"}}, config)
state = app.get_state(config)
app.close()
print(json.dumps({{
    "before": before,
    "produced": [m.text() for m in result["messages"]],
    "status": state.execution_meta.status,
    "texts": [m.text() for m in state.context],
    "ids": [m.message_id for m in state.context],
}}))
"""


async def test_pause_in_one_process_and_resume_in_another(tmp_path: Path) -> None:
    try:
        from tenxgraph.storage.checkpointer import SqliteCheckpointer  # noqa: F401
    except Exception as exc:
        pytest.skip(f"SqliteCheckpointer is not usable: {type(exc).__name__}: {exc}")
    db = str(tmp_path / "t.db")
    trace_file = tmp_path / "trace.txt"
    env = {"TX_TRACE": str(trace_file)}
    paused = await asyncio.to_thread(run_child, PAUSE_SCRIPT.format(db=db), env)
    assert paused["interrupted"] == {
        "node": "ask",
        "reason": "need_name",
        "status": "interrupted_before",
    }
    assert paused["interrupt"]["message"] == "What is your name?"
    assert paused["interrupt"]["value"] == {"field": "name"}

    resumed = await asyncio.to_thread(run_child, RESUME_SCRIPT.format(db=db), env)
    assert resumed["before"] == "interrupted_before"
    assert resumed["produced"] == ["hello Ann"]
    assert resumed["status"] == "completed"
    assert resumed["texts"] == ["hi", "first done", "hello Ann"]
    assert len(set(resumed["ids"])) == 3
    runs = [line.split() for line in trace_file.read_text().splitlines()]
    assert [name for name, _ in runs] == ["first", "ask", "ask"]
    assert runs[1][1] != runs[2][1]  # asked in one process, answered in another
