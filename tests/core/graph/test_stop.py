"""app.stop / app.astop: a running thread is interrupted promptly, its node cancelled."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from tenxgraph.core.graph import CompiledGraph, StateGraph
from tenxgraph.core.state import AgentState, StreamChunk
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import Command
from tenxgraph.utils.constants import START
from tests.core.graph._support import inp, linear, texts

INTERRUPTED = {"node": "sleeper", "reason": "stop_requested", "status": "interrupted_after"}


class Sleeper:
    """A node that says when it started, then sleeps 10 s unless cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False
        self.finished = False

    async def __call__(self, state: AgentState) -> str:
        self.started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.finished = True
        return "slept"


def sleeper_app(sleeper: Sleeper) -> CompiledGraph:
    return linear(
        ("before", lambda s: "before"),
        ("sleeper", sleeper),
        ("after", lambda s: "after"),
        checkpointer=InMemoryCheckpointer(),
    )


async def assert_stopped_state(app: CompiledGraph, config: dict[str, Any]) -> None:
    stored = await app.aget_state(config)
    assert stored is not None
    meta = stored.execution_meta
    assert meta.status == "interrupted_after"
    assert meta.interrupt_reason == "stop_requested"
    assert meta.interrupted_node == "sleeper"
    assert texts(stored.context) == ["hi", "before"]  # the stopped step added nothing


async def test_astop_interrupts_the_running_node_promptly() -> None:
    sleeper = Sleeper()
    app = sleeper_app(sleeper)
    config = {"thread_id": "t"}
    run = asyncio.create_task(app.ainvoke(inp("hi"), config))
    await sleeper.started.wait()
    stopped_at = time.perf_counter()
    answer = await app.astop(config)
    result = await run
    assert time.perf_counter() - stopped_at < 0.1
    assert answer["ok"] is True
    assert answer["running"] is True
    assert sleeper.cancelled
    assert not sleeper.finished
    assert result["interrupted"] == INTERRUPTED
    assert texts(result["messages"]) == ["hi", "before"]
    await assert_stopped_state(app, config)


async def test_stop_from_another_thread_interrupts_an_async_run() -> None:
    sleeper = Sleeper()
    app = sleeper_app(sleeper)
    config = {"thread_id": "t"}
    run = asyncio.create_task(app.ainvoke(inp("hi"), config))
    await sleeper.started.wait()
    stopped_at = time.perf_counter()
    answer = await asyncio.to_thread(app.stop, config)
    result = await run
    assert time.perf_counter() - stopped_at < 0.1
    assert answer["ok"] is True
    assert sleeper.cancelled
    assert result["interrupted"] == INTERRUPTED
    await assert_stopped_state(app, config)


class ThreadSleeper:
    """Like Sleeper, but signals through a threading.Event (the run is on another loop)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.cancelled = False

    async def __call__(self, state: AgentState) -> str:
        self.started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return "slept"


@pytest.mark.parametrize("how", ["astop", "stop"])
async def test_stop_interrupts_a_sync_invoke(how: str) -> None:
    sleeper = ThreadSleeper()
    app = linear(
        ("before", lambda s: "before"), ("sleeper", sleeper), checkpointer=InMemoryCheckpointer()
    )
    config = {"thread_id": "t"}
    run = asyncio.create_task(asyncio.to_thread(app.invoke, inp("hi"), config))
    assert await asyncio.to_thread(sleeper.started.wait, 5)
    stopped_at = time.perf_counter()
    answer = await app.astop(config) if how == "astop" else app.stop(config)
    result = await run
    assert time.perf_counter() - stopped_at < 0.1
    assert answer["ok"] is True
    assert sleeper.cancelled
    assert result["interrupted"] == INTERRUPTED
    await assert_stopped_state(app, config)


async def test_stop_interrupts_a_parallel_step() -> None:
    left, right = Sleeper(), Sleeper()
    graph = StateGraph()
    graph.add_node("before", lambda s: "before")
    graph.add_node("left", left)
    graph.add_node("right", right)
    graph.add_edge(START, "before")
    graph.add_edge("before", "left")
    graph.add_edge("before", "right")
    app = graph.compile(checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    run = asyncio.create_task(app.ainvoke(inp("hi"), config))
    await left.started.wait()
    await right.started.wait()
    stopped_at = time.perf_counter()
    await app.astop(config)
    result = await run
    assert time.perf_counter() - stopped_at < 0.1
    assert left.cancelled
    assert right.cancelled
    assert result["interrupted"]["reason"] == "stop_requested"
    stored = await app.aget_state(config)
    assert stored is not None
    assert stored.execution_meta.status == "interrupted_after"
    assert texts(stored.context) == ["hi", "before"]


async def test_stopped_stream_reports_interrupted() -> None:
    sleeper = Sleeper()
    app = sleeper_app(sleeper)
    config = {"thread_id": "t"}
    chunks: list[StreamChunk] = []

    async def consume() -> None:
        async for chunk in app.astream(inp("hi"), config, response_granularity="full"):
            chunks.append(chunk)

    run = asyncio.create_task(consume())
    await sleeper.started.wait()
    await app.astop(config)
    await run
    statuses = [c.data["status"] for c in chunks if c.event == "updates" and c.data]
    assert "interrupted" in statuses
    interrupted = next(c for c in chunks if c.data and c.data.get("status") == "interrupted")
    assert interrupted.data is not None
    assert interrupted.data["reason"] == "stop_requested"
    assert "error" not in {c.event for c in chunks}
    await assert_stopped_state(app, config)


async def test_stop_interrupts_a_sync_stream_promptly() -> None:
    started = threading.Event()

    async def napper(state: AgentState) -> str:
        started.set()
        await asyncio.sleep(1.0)
        return "slept"

    app = linear(napper, checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    run = asyncio.create_task(asyncio.to_thread(lambda: list(app.stream(inp("hi"), config))))
    assert await asyncio.to_thread(started.wait, 5)
    stopped_at = time.perf_counter()
    app.stop(config)
    await run
    assert time.perf_counter() - stopped_at < 0.5


async def test_thread_runs_normally_after_a_stop() -> None:
    sleeper = Sleeper()
    app = sleeper_app(sleeper)
    config = {"thread_id": "t"}
    run = asyncio.create_task(app.ainvoke(inp("hi"), config))
    await sleeper.started.wait()
    await app.astop(config)
    await run
    app.override_node("sleeper", lambda s: "quick")
    result = await app.ainvoke(inp("again"), config)
    assert "interrupted" not in result
    assert texts(result["messages"]) == ["again", "before", "quick", "after"]
    stored = await app.aget_state(config)
    assert stored is not None
    assert stored.execution_meta.status == "completed"
    assert stored.execution_meta.interrupt_reason is None


# -- nothing running ------------------------------------------------------------------------


async def test_astop_without_a_running_run_or_checkpointer_is_not_ok() -> None:
    app = linear(("n", lambda s: "x"))
    answer = await app.astop({"thread_id": "t"})
    assert answer["ok"] is False
    assert answer["running"] is False
    assert answer["reason"]
    assert app.stop({"thread_id": "t"})["ok"] is False


async def test_astop_on_an_unknown_thread_is_not_ok() -> None:
    app = linear(("n", lambda s: "x"), checkpointer=InMemoryCheckpointer())
    answer = await app.astop({"thread_id": "nobody"})
    assert answer["ok"] is False
    assert answer["reason"]


async def test_astop_after_the_run_ended_does_not_affect_the_next_run() -> None:
    app = linear(("n", lambda s: "x"), checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    await app.ainvoke(inp("hi"), config)
    answer = await app.astop(config)
    assert answer["running"] is False
    result = await app.ainvoke(inp("again"), config)
    assert "interrupted" not in result
    assert texts(result["messages"]) == ["again", "x"]


async def test_astop_needs_a_thread_id() -> None:
    with pytest.raises(ValueError, match="thread_id"):
        await linear(("n", lambda s: "x")).astop({})


# -- stop requested through the checkpointer ------------------------------------------------


async def test_stop_requested_through_the_checkpointer_stops_at_a_step_boundary() -> None:
    """Another process (here: another app on the same store) asks the run to stop."""
    checkpointer = InMemoryCheckpointer()
    in_node = 0
    entered = 0
    first_step = asyncio.Event()

    async def worker(state: AgentState) -> Command:
        nonlocal in_node, entered
        in_node += 1
        entered += 1
        first_step.set()
        await asyncio.sleep(0)  # a step that lets others run, but is never cut short
        in_node -= 1
        return Command(goto="worker")

    def build() -> CompiledGraph:
        graph = StateGraph()
        graph.add_node(worker)
        graph.add_edge(START, "worker")
        return graph.compile(checkpointer=checkpointer)

    running_app, other_app = build(), build()
    config = {"thread_id": "t", "recursion_limit": 10_000_000}
    run = asyncio.create_task(running_app.ainvoke(inp("hi"), config))
    await first_step.wait()
    answer = await other_app.astop(config)
    assert answer == {"ok": True, "running": False, "reason": "requested"}
    result = await asyncio.wait_for(run, 5)
    assert result["interrupted"]["reason"] == "stop_requested"
    assert in_node == 0  # no node was cancelled half-way
    assert entered >= 1
    stored = await checkpointer.aget_state({"thread_id": "t"})
    assert stored is not None
    assert stored.execution_meta.status == "interrupted_after"
    assert stored.execution_meta.step == entered
    assert not await checkpointer.ais_stop_requested("t")


async def test_stale_stop_request_does_not_stop_a_new_run() -> None:
    checkpointer = InMemoryCheckpointer()
    app = linear(("n", lambda s: "x"), checkpointer=checkpointer)
    config = {"thread_id": "t"}
    await app.ainvoke(inp("hi"), config)
    await checkpointer.arequest_stop("t")
    result = await app.ainvoke(inp("again"), config)
    assert "interrupted" not in result
    assert not await checkpointer.ais_stop_requested("t")
