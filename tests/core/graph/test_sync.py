"""The sync API (invoke, stream, get_state, stop) runs on the app's private loop thread."""

from __future__ import annotations

import asyncio
import gc
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tenxgraph.core.exceptions import NodeError
from tenxgraph.core.graph import CompiledGraph
from tenxgraph.core.state import AgentState
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tests.core.graph._support import inp, linear, texts


async def awaiting(state: AgentState) -> str:
    await asyncio.sleep(0)
    return f"reply to {state.context[-1].text()}"


def test_invoke_from_plain_code() -> None:
    result = linear(awaiting).invoke(inp("hi"))
    assert texts(result["messages"]) == ["hi", "reply to hi"]


async def test_invoke_inside_a_running_event_loop() -> None:
    app = linear(awaiting, checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    result = app.invoke(inp("hi"), config)  # no deadlock, no "loop is running" error
    assert texts(result["messages"]) == ["hi", "reply to hi"]
    stored = app.get_state(config)
    assert stored is not None
    assert texts(stored.context) == ["hi", "reply to hi"]
    # async and sync calls on the same app agree
    result = await app.ainvoke(inp("again"), config, response_granularity="partial")
    assert texts(result["context"]) == ["hi", "reply to hi", "again", "reply to again"]


async def test_stream_inside_a_running_event_loop() -> None:
    app = linear(awaiting)
    chunks = list(app.stream(inp("hi")))
    assert [c.message.text() for c in chunks if c.message] == ["hi", "reply to hi"]


def test_stream_of_an_app_held_by_nothing_else_finishes() -> None:
    for attempt in range(3):  # the hang does not depend on luck, but make sure of it
        outcome: list[int] = []

        def consume(outcome: list[int]) -> None:
            # the app is only referenced by the stream itself
            outcome.append(len(list(linear(awaiting).stream(inp("hi")))))

        # a daemon thread, so that a hang does not block the interpreter's exit
        worker = threading.Thread(target=consume, args=(outcome,), daemon=True)
        worker.start()
        worker.join(timeout=1)  # returns as soon as the stream ends; bounds a hang
        assert not worker.is_alive(), f"stream() never returned (attempt {attempt + 1})"
        assert outcome == [2]


async def test_async_nodes_of_invoke_run_on_the_private_loop_thread() -> None:
    threads: list[threading.Thread] = []

    async def where(state: AgentState) -> None:
        threads.append(threading.current_thread())

    linear(where).invoke(inp("hi"))
    assert threads[0] is not threading.current_thread()


def test_invoke_from_several_threads_at_once() -> None:
    app = linear(awaiting, checkpointer=InMemoryCheckpointer())

    def call(i: int) -> list[str]:
        return texts(app.invoke(inp(f"m{i}"), {"thread_id": f"t{i}"})["messages"])

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(call, range(8)))
    assert results == [[f"m{i}", f"reply to m{i}"] for i in range(8)]


def inner_call_app(call: str) -> tuple[CompiledGraph, list[str]]:
    """An app whose async node calls one of the app's own sync methods."""
    errors: list[str] = []
    holder: dict[str, CompiledGraph] = {}

    async def reenter(state: AgentState, config: dict[str, Any]) -> str:
        app = holder["app"]
        try:
            if call == "invoke":
                app.invoke(inp("nested"))
            elif call == "stream":
                list(app.stream(inp("nested")))
            else:
                app.get_state({"thread_id": config["thread_id"]})
        except RuntimeError as exc:
            errors.append(str(exc))
            return "refused"
        return "nested call ran"

    holder["app"] = linear(reenter, checkpointer=InMemoryCheckpointer())
    return holder["app"], errors


# the refused call leaves its coroutine un-awaited; that warning is not what is tested here
never_awaited = pytest.mark.filterwarnings("ignore:coroutine .* was never awaited")


@never_awaited
@pytest.mark.parametrize("call", ["invoke", "stream", "get_state"])
def test_sync_call_from_inside_the_same_app_is_a_clear_runtime_error(call: str) -> None:
    app, errors = inner_call_app(call)
    result = app.invoke(inp("hi"), {"thread_id": "t"})
    assert texts(result["messages"]) == ["hi", "refused"]
    (error,) = errors
    assert "ainvoke" in error
    assert "inside the same graph" in error


@never_awaited
def test_uncaught_inner_sync_call_fails_the_run_with_the_runtime_error_as_cause() -> None:
    holder: dict[str, CompiledGraph] = {}

    async def reenter(state: AgentState) -> None:
        holder["app"].invoke(inp("nested"))

    app = holder["app"] = linear(("reenter", reenter))
    with pytest.raises(NodeError, match="reenter") as info:
        app.invoke(inp("hi"))
    assert isinstance(info.value.__cause__, RuntimeError)
    del info
    gc.collect()  # release the refused coroutine while its warning is filtered


def test_sync_call_of_another_app_from_inside_a_node_works() -> None:
    other = linear(awaiting)

    async def delegate(state: AgentState) -> str:
        result = other.invoke(inp("inner"))
        return f"other said: {result['messages'][-1].text()}"

    result = linear(delegate).invoke(inp("hi"))
    assert texts(result["messages"]) == ["hi", "other said: reply to inner"]


def test_breaking_out_of_a_sync_stream_releases_the_thread() -> None:
    app = linear(("a", awaiting), ("b", awaiting), checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    for chunk in app.stream(inp("hi"), config):
        assert chunk.event == "message"
        break
    # the abandoned run neither holds the thread nor counts as running
    assert app.stop(config)["running"] is False
    result = app.invoke(inp("again"), config)
    assert texts(result["messages"]) == ["again", "reply to again", "reply to reply to again"]
