"""Failures: node errors, recursion and timeout errors on every path, and what is stored."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tenxgraph.core.exceptions import GraphRecursionError, NodeError, NodeTimeoutError
from tenxgraph.core.graph import CompiledGraph, StateGraph
from tenxgraph.core.state import AgentState, Message, StreamChunk
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import Command
from tenxgraph.utils.constants import START
from tests.core.graph._support import ai, inp, linear, texts

PATHS = ["ainvoke", "invoke", "astream", "stream"]


class Counter(AgentState):
    count: int = 0


async def run(
    app: CompiledGraph, path: str, chunks: list[StreamChunk], config: dict[str, Any] | None = None
) -> Any:
    """Run `app` one of four ways; streamed chunks land in `chunks` even if the run fails."""
    data = inp("hi")
    if path == "ainvoke":
        return await app.ainvoke(data, config)
    if path == "invoke":
        return app.invoke(data, config)  # from inside a running loop, on purpose
    if path == "astream":
        async for chunk in app.astream(data, config):
            chunks.append(chunk)
        return None
    for chunk in app.stream(data, config):
        chunks.append(chunk)
    return None


def check_error_chunk(path: str, chunks: list[StreamChunk], code: str) -> None:
    if path in ("astream", "stream"):
        assert chunks, "a stream yields chunks before failing"
        last = chunks[-1]
        assert last.event == "error"
        assert last.data is not None
        assert last.data["error_code"] == code
        assert [c.event for c in chunks[:-1]] == ["message"] * (len(chunks) - 1)
    else:
        assert chunks == []


# -- errors in nodes ------------------------------------------------------------------------


def sync_fail(state: AgentState) -> None:
    raise ValueError("sync boom")


async def async_fail(state: AgentState) -> None:
    raise ValueError("async boom")


async def generator_fail(state: AgentState) -> AsyncIterator[Message]:
    yield ai("partial")
    raise ValueError("generator boom")


@pytest.mark.parametrize("node", [sync_fail, async_fail, generator_fail])
async def test_exception_in_a_node_becomes_a_node_error(node: Any) -> None:
    app = linear(("failing", node))
    with pytest.raises(NodeError) as info:
        await app.ainvoke(inp("hi"))
    err = info.value
    assert str(err).startswith("[NODE_001] Error in node 'failing': ")
    assert "boom" in str(err)
    assert err.error_code == "NODE_001"
    assert isinstance(err.__cause__, ValueError)
    assert "boom" in str(err.__cause__)


async def test_exception_in_a_parallel_node_becomes_a_node_error() -> None:
    graph = StateGraph()
    graph.add_node("ok", lambda s: "fine")
    graph.add_node("failing", async_fail)
    graph.add_edge(START, "ok")
    graph.add_edge(START, "failing")
    with pytest.raises(NodeError) as info:
        await graph.compile().ainvoke(inp("hi"))
    assert str(info.value).startswith("[NODE_001] Error in node 'failing': ")
    assert isinstance(info.value.__cause__, ValueError)


async def test_failing_parallel_node_cancels_its_siblings_promptly() -> None:
    cancelled: list[str] = []

    async def sibling(state: AgentState) -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append("sibling")
            raise
        return "never"

    graph = StateGraph()
    graph.add_node(sibling)
    graph.add_node("failing", async_fail)
    graph.add_edge(START, "sibling")
    graph.add_edge(START, "failing")
    app = graph.compile(checkpointer=InMemoryCheckpointer())
    started = time.perf_counter()
    with pytest.raises(NodeError, match="failing"):
        await app.ainvoke(inp("hi"), {"thread_id": "t"})
    assert time.perf_counter() - started < 2
    assert cancelled == ["sibling"]
    stored = await app.aget_state({"thread_id": "t"})
    assert stored is not None
    assert stored.execution_meta.status == "error"
    assert texts(stored.context) == ["hi"]


@pytest.mark.parametrize("path", PATHS)
async def test_node_error_is_raised_on_every_path(path: str) -> None:
    chunks: list[StreamChunk] = []
    with pytest.raises(NodeError) as info:
        await run(linear(("failing", sync_fail)), path, chunks)
    assert info.value.error_code == "NODE_001"
    assert isinstance(info.value.__cause__, ValueError)
    check_error_chunk(path, chunks, "NODE_001")


async def test_error_chunk_describes_the_failure() -> None:
    app = linear(("failing", sync_fail))
    chunks: list[StreamChunk] = []
    with pytest.raises(NodeError):
        await run(app, "astream", chunks, {"thread_id": "t", "run_id": "r"})
    error = chunks[-1]
    assert error.data is not None
    assert error.data["error_code"] == "NODE_001"
    assert "sync boom" in error.data["error"]
    assert error.data.get("node") == "failing"
    assert (error.thread_id, error.run_id) == ("t", "r")


async def test_failed_run_is_stored_with_error_status_and_message() -> None:
    app = linear(
        ("fine", lambda s: "step one"), ("failing", sync_fail), checkpointer=InMemoryCheckpointer()
    )
    config = {"thread_id": "t"}
    with pytest.raises(NodeError) as info:
        await app.ainvoke(inp("hi"), config)
    stored = await app.aget_state(config)
    assert stored is not None
    assert stored.execution_meta.status == "error"
    assert "sync boom" in stored.execution_meta.internal_data["error"]
    assert stored.execution_meta.internal_data["error"] == str(info.value)
    assert texts(stored.context) == ["hi", "step one"]  # the steps before the failure are kept


async def test_failing_steps_in_place_changes_are_not_kept() -> None:
    def half_done(state: Counter) -> None:
        state.count = 99
        state.context.append(ai("half"))
        raise RuntimeError("gave up")

    app = linear(
        ("first", lambda s: {"count": 1}),
        half_done,
        state=Counter,
        checkpointer=InMemoryCheckpointer(),
    )
    config = {"thread_id": "t"}
    with pytest.raises(NodeError):
        await app.ainvoke(inp("hi"), config)
    stored = await app.aget_state(config)
    assert isinstance(stored, Counter)
    assert stored.count == 1
    assert texts(stored.context) == ["hi"]
    # the next run on the thread starts from that state too
    seen: list[tuple[int, list[str]]] = []
    app.override_node("half_done", lambda s: seen.append((s.count, texts(s.context))))
    await app.ainvoke(inp("again"), config)
    assert seen == [(1, ["hi", "again"])]


async def test_generators_messages_before_the_failure_are_not_kept() -> None:
    app = linear(("failing", generator_fail), checkpointer=InMemoryCheckpointer())
    with pytest.raises(NodeError):
        await app.ainvoke(inp("hi"), {"thread_id": "t"})
    stored = await app.aget_state({"thread_id": "t"})
    assert stored is not None
    assert texts(stored.context) == ["hi"]


async def test_a_later_successful_run_clears_the_error() -> None:
    outcomes = iter([ValueError("first time"), None])

    def flaky(state: AgentState) -> str:
        error = next(outcomes)
        if error is not None:
            raise error
        return "worked"

    app = linear(flaky, checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    with pytest.raises(NodeError):
        await app.ainvoke(inp("hi"), config)
    result = await app.ainvoke(inp("retry"), config)
    assert texts(result["messages"]) == ["retry", "worked"]
    stored = await app.aget_state(config)
    assert stored is not None
    assert stored.execution_meta.status == "completed"
    assert "error" not in stored.execution_meta.internal_data


# -- recursion ------------------------------------------------------------------------------


def looping_app() -> CompiledGraph:
    def spin(state: AgentState) -> Command:
        return Command(goto="spin")

    graph = StateGraph()
    graph.add_node(spin)
    graph.add_edge(START, "spin")
    return graph.compile()


@pytest.mark.parametrize("path", PATHS)
async def test_recursion_error_is_raised_on_every_path(path: str) -> None:
    chunks: list[StreamChunk] = []
    with pytest.raises(GraphRecursionError) as info:
        await run(looping_app(), path, chunks, {"recursion_limit": 3})
    assert info.value.error_code == "RECURSION_001"
    assert "recursion_limit" in str(info.value)
    check_error_chunk(path, chunks, "RECURSION_001")


async def test_recursion_error_is_stored_as_error() -> None:
    graph = StateGraph()
    graph.add_node("spin", lambda s: "again")
    graph.add_edge(START, "spin")
    graph.add_edge("spin", "spin")
    app = graph.compile(checkpointer=InMemoryCheckpointer())
    with pytest.raises(GraphRecursionError):
        await app.ainvoke(inp("hi"), {"thread_id": "t", "recursion_limit": 2})
    stored = await app.aget_state({"thread_id": "t"})
    assert stored is not None
    assert stored.execution_meta.status == "error"
    assert "recursion_limit" in stored.execution_meta.internal_data["error"]
    assert texts(stored.context) == ["hi", "again", "again"]


# -- timeouts -------------------------------------------------------------------------------


async def nap(state: AgentState) -> str:
    await asyncio.sleep(0.3)
    return "woke up"


@pytest.mark.parametrize("path", PATHS)
async def test_timeout_error_is_raised_on_every_path(path: str) -> None:
    chunks: list[StreamChunk] = []
    with pytest.raises(NodeTimeoutError) as info:
        await run(linear(("napper", nap)), path, chunks, {"node_timeout": 0.05})
    err = info.value
    assert err.error_code == "NODE_TIMEOUT_001"
    assert "napper" in str(err)
    assert "node_timeout" in str(err)
    check_error_chunk(path, chunks, "NODE_TIMEOUT_001")


async def sleeps_long(state: AgentState) -> str:
    await asyncio.sleep(10)
    return "never"


async def generator_sleeps_long(state: AgentState) -> AsyncIterator[Message]:
    yield Message.text_message("thinking", "assistant", "g-1", delta=True)
    await asyncio.sleep(10)
    yield ai("never")


@pytest.mark.parametrize("node", [sleeps_long, generator_sleeps_long])
@pytest.mark.parametrize("path", ["ainvoke", "invoke", "astream"])
async def test_timeout_stops_async_and_generator_nodes_promptly(node: Any, path: str) -> None:
    started = time.perf_counter()
    with pytest.raises(NodeTimeoutError, match="slow"):
        await run(linear(("slow", node)), path, [], {"node_timeout": 0.05})
    assert time.perf_counter() - started < 2


def napping(name: str, seconds: float) -> tuple[str, Any]:
    async def node(state: AgentState) -> str:
        await asyncio.sleep(seconds)
        return f"{name} done"

    return name, node


@pytest.mark.parametrize("path", ["ainvoke", "astream"])
async def test_every_node_of_a_run_gets_the_whole_timeout(path: str) -> None:
    # one timer serves the run: when it fires for the first node's deadline during the
    # second node, it must wait for the second node's own deadline, not expire
    nodes = [napping(f"n{i}", 0.3) for i in range(3)]
    result = await run(linear(*nodes), path, [], {"node_timeout": 0.5})
    if path == "ainvoke":
        assert texts(result["messages"]) == ["hi", "n0 done", "n1 done", "n2 done"]


async def test_a_later_node_that_overruns_times_out_promptly() -> None:
    started = time.perf_counter()
    with pytest.raises(NodeTimeoutError, match="slow"):
        await run(
            linear(napping("quick", 0), napping("slow", 10)), "ainvoke", [], {"node_timeout": 0.1}
        )
    assert time.perf_counter() - started < 2


async def test_a_run_of_many_steps_sets_one_timer_and_cancels_it() -> None:
    loop = asyncio.get_running_loop()
    timers: list[asyncio.TimerHandle] = []
    call_at = loop.call_at

    def counting(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        handle = call_at(when, callback, *args, **kwargs)
        timers.append(handle)
        return handle

    app = linear(*(napping(f"n{i}", 0) for i in range(10)))
    loop.call_at = counting  # type: ignore[method-assign]
    try:
        await app.ainvoke(inp("hi"), {"node_timeout": 30})
    finally:
        del loop.call_at
    assert len(timers) == 1
    assert timers[0].cancelled()  # nothing of the run is left on the loop


async def test_timeout_stops_a_node_promptly_under_sync_stream() -> None:
    async def long_nap(state: AgentState) -> str:
        await asyncio.sleep(1.0)
        return "woke up"

    started = time.perf_counter()
    with pytest.raises(NodeTimeoutError):
        await run(linear(("slow", long_nap)), "stream", [], {"node_timeout": 0.05})
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize("path", ["ainvoke", "invoke"])
async def test_timeout_applies_to_sync_nodes(path: str) -> None:
    release = threading.Event()

    def blocking(state: AgentState) -> str:
        release.wait(10)
        return "never"

    started = time.perf_counter()
    try:
        with pytest.raises(NodeTimeoutError, match="blocking"):
            await run(linear(blocking), path, [], {"node_timeout": 0.05})
        assert time.perf_counter() - started < 2
    finally:
        release.set()  # let the worker thread end, so no thread outlives the test


async def test_timeout_applies_to_parallel_nodes() -> None:
    release = threading.Event()

    def blocking(state: AgentState) -> str:
        release.wait(10)
        return "never"

    graph = StateGraph()
    graph.add_node("quick", lambda s: "quick")
    graph.add_node("slow_async", sleeps_long)
    graph.add_edge(START, "quick")
    graph.add_edge(START, "slow_async")
    started = time.perf_counter()
    # long enough for `quick` on a loaded machine, far shorter than the slow nodes' 10 s
    with pytest.raises(NodeTimeoutError, match="slow_async"):
        await graph.compile().ainvoke(inp("hi"), {"node_timeout": 0.5})
    assert time.perf_counter() - started < 5

    graph = StateGraph()
    graph.add_node("slow_gen", generator_sleeps_long)
    graph.add_node("slow_sync", blocking)
    graph.add_edge(START, "slow_gen")
    graph.add_edge(START, "slow_sync")
    started = time.perf_counter()
    try:
        with pytest.raises(NodeTimeoutError, match="slow_"):
            await graph.compile().ainvoke(inp("hi"), {"node_timeout": 0.5})
        assert time.perf_counter() - started < 5
    finally:
        release.set()


async def test_timeout_is_per_node_not_per_run() -> None:
    async def short(state: AgentState) -> str:
        await asyncio.sleep(0.03)
        return "short"

    app = linear(("a", short), ("b", short), ("c", short))
    result = await app.ainvoke(inp("hi"), {"node_timeout": 0.5})
    assert texts(result["messages"]) == ["hi", "short", "short", "short"]


async def test_timed_out_run_is_stored_as_error() -> None:
    app = linear(("slow", sleeps_long), checkpointer=InMemoryCheckpointer())
    with pytest.raises(NodeTimeoutError):
        await app.ainvoke(inp("hi"), {"thread_id": "t", "node_timeout": 0.05})
    stored = await app.aget_state({"thread_id": "t"})
    assert stored is not None
    assert stored.execution_meta.status == "error"
    assert "slow" in stored.execution_meta.internal_data["error"]


async def test_app_works_after_a_timeout() -> None:
    calls: list[int] = []

    async def sometimes_slow(state: AgentState) -> str:
        calls.append(1)
        if len(calls) == 1:
            await asyncio.sleep(10)
        return "fast now"

    app = linear(sometimes_slow, checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t", "node_timeout": 0.05}
    with pytest.raises(NodeTimeoutError):
        await app.ainvoke(inp("hi"), config)
    result = await app.ainvoke(inp("again"), config)
    assert texts(result["messages"]) == ["again", "fast now"]
