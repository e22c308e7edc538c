"""A consumer that stops reading a stream early, or a process that dies in the first step of a
run, leaves a thread that continues cleanly."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils.constants import END, START


def streaming_graph(closed: list[str]) -> Any:
    async def talk(state: AgentState) -> AsyncIterator[Message]:
        try:
            for piece in ("one ", "two ", "three"):
                yield Message.text_message(piece, "assistant", delta=True)
            yield Message.text_message("one two three", "assistant")
        finally:
            closed.append("talk")  # its cleanup ran

    graph = StateGraph()
    graph.add_node("talk", talk)
    graph.add_edge(START, "talk")
    graph.add_edge("talk", END)
    return graph.compile(checkpointer=InMemoryCheckpointer())


async def test_closing_a_stream_early_cleans_up_in_the_consumers_task() -> None:
    problems: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: problems.append(ctx))
    closed: list[str] = []
    app = streaming_graph(closed)
    config = {"thread_id": "early"}
    stream = app.astream({"messages": [Message.text_message("count")]}, config)
    async with contextlib.aclosing(stream):
        async for chunk in stream:
            if chunk.message is not None and chunk.message.delta:
                break  # the consumer goes away mid-answer
    assert closed == ["talk"]  # closed at once, not later by the garbage collector
    await asyncio.sleep(0)
    assert problems == []  # no "Task exception was never retrieved" from another context


async def test_a_run_stopped_in_its_first_step_continues_from_the_start() -> None:
    closed: list[str] = []
    app = streaming_graph(closed)
    config = {"thread_id": "first-step"}
    stream = app.astream({"messages": [Message.text_message("count")]}, config)
    async with contextlib.aclosing(stream):
        async for _ in stream:
            break  # as if the process had died during the first step
    result = await app.ainvoke(None, config)
    assert [m.text() for m in result["messages"]] == ["one two three"]
    state = await app.aget_state(config)
    assert state is not None
    assert state.execution_meta.status == "completed"
