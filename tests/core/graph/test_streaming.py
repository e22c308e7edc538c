"""astream / stream: which events each granularity yields, deltas, and the chunks themselves."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tenxgraph.core.graph import CompiledGraph, StateGraph
from tenxgraph.core.state import AgentState, CustomEvent, Message, StreamChunk
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils.constants import START, ResponseGranularity
from tests.core.graph._support import ai, inp, linear, texts


def delta(text: str, message_id: str) -> Message:
    return Message.text_message(text, "assistant", message_id, delta=True)


async def writer(state: AgentState) -> AsyncIterator[Message]:
    """Streams a reply in two deltas, then yields the complete message."""
    yield delta("Hel", "reply-1")
    yield delta("lo", "reply-1")
    yield Message.text_message("Hello", "assistant", "reply-1")


def closer(state: AgentState) -> str:
    return "bye"


def app_with_writer(checkpointer: InMemoryCheckpointer | None = None) -> CompiledGraph:
    return linear(writer, closer, checkpointer=checkpointer)


async def collect(
    app: CompiledGraph, granularity: Any = "low", config: dict[str, Any] | None = None
) -> list[StreamChunk]:
    return [c async for c in app.astream(inp("hi"), config, response_granularity=granularity)]


def describe(chunk: StreamChunk) -> tuple[Any, ...]:
    """What a chunk says, without its timestamp or ids."""
    if chunk.event == "message":
        assert chunk.message is not None
        return ("message", chunk.message.text(), chunk.message.delta)
    if chunk.event == "updates":
        assert chunk.data is not None
        return ("updates", chunk.data["status"], chunk.data.get("node"))
    if chunk.event == "state":
        assert chunk.state is not None
        return ("state", len(chunk.state.context))
    assert chunk.data is not None
    return ("error", chunk.data.get("error_code"))


# -- events by granularity ------------------------------------------------------------------


async def test_low_streams_input_deltas_and_complete_messages_only() -> None:
    chunks = await collect(app_with_writer(), ResponseGranularity.LOW)
    assert [describe(c) for c in chunks] == [
        ("message", "hi", False),
        ("message", "Hel", True),
        ("message", "lo", True),
        ("message", "Hello", False),
        ("message", "bye", False),
    ]
    assert chunks[0].message is not None
    assert chunks[0].message.role == "user"


async def reporter(state: AgentState) -> AsyncIterator[Any]:
    yield CustomEvent({"done": 1})
    yield CustomEvent("half")
    yield "reported"


@pytest.mark.parametrize("granularity", list(ResponseGranularity))
async def test_a_nodes_custom_events_stream_at_every_granularity(granularity: Any) -> None:
    chunks = await collect(linear(reporter), granularity)
    custom = [c.data for c in chunks if c.event == "custom"]
    assert custom == [{"data": {"done": 1}}, {"data": "half"}]


async def test_custom_events_of_parallel_nodes_stream_and_invoke_drops_them() -> None:
    async def other(state: AgentState) -> AsyncIterator[Any]:
        yield CustomEvent("other")
        yield "also"

    builder = StateGraph(AgentState())
    builder.add_node("a", reporter)
    builder.add_node("b", other)
    builder.add_edge(START, "a")
    builder.add_edge(START, "b")
    app = builder.compile()
    chunks = await collect(app)
    custom = sorted(str(c.data) for c in chunks if c.event == "custom")
    assert custom == sorted(str({"data": d}) for d in ({"done": 1}, "half", "other"))
    result = await app.ainvoke(inp("hi"))
    assert sorted(texts(result["messages"])[1:]) == ["also", "reported"]


async def test_partial_adds_a_state_event_after_each_step() -> None:
    chunks = await collect(app_with_writer(), "partial")
    assert {c.event for c in chunks} == {"message", "state"}
    assert [describe(c) for c in chunks] == [
        ("message", "hi", False),
        ("message", "Hel", True),
        ("message", "lo", True),
        ("message", "Hello", False),
        ("state", 2),
        ("message", "bye", False),
        ("state", 3),
    ]


async def test_full_adds_progress_updates() -> None:
    chunks = await collect(app_with_writer(), "full")
    assert [describe(c) for c in chunks] == [
        ("message", "hi", False),
        ("updates", "invoking_graph", None),
        ("updates", "invoking_node", "writer"),
        ("message", "Hel", True),
        ("message", "lo", True),
        ("message", "Hello", False),
        ("updates", "node_invoked", "writer"),
        ("state", 2),
        ("updates", "invoking_node", "closer"),
        ("message", "bye", False),
        ("updates", "node_invoked", "closer"),
        ("state", 3),
        ("updates", "graph_invoked", None),
    ]


async def test_state_events_carry_the_graphs_state_type() -> None:
    class Custom(AgentState):
        extra: int = 0

    app = linear(("n", lambda s: {"extra": 5}), state=Custom)
    states = [c.state for c in await collect(app, "partial") if c.event == "state"]
    assert len(states) == 1
    assert isinstance(states[0], Custom)
    assert states[0].extra == 5


async def test_state_events_are_snapshots_of_their_step() -> None:
    app = linear(("a", closer), ("b", closer), ("c", closer))
    chunks = await collect(app, "partial")
    states = [c.state for c in chunks if c.state is not None]
    assert [s.execution_meta.step for s in states] == [1, 2, 3]
    assert [len(s.context) for s in states] == [2, 3, 4]
    # the last step's snapshot is the finished state (its save records the completion)
    assert [s.execution_meta.status for s in states] == ["running", "running", "completed"]


async def test_parallel_nodes_stream_their_deltas() -> None:
    async def left(state: AgentState) -> AsyncIterator[Message]:
        yield delta("l", "left-1")
        yield Message.text_message("left", "assistant", "left-1")

    async def right(state: AgentState) -> AsyncIterator[Message]:
        yield delta("r", "right-1")
        yield Message.text_message("right", "assistant", "right-1")

    graph = StateGraph()
    graph.add_node(left)
    graph.add_node(right)
    graph.add_edge(START, "left")
    graph.add_edge(START, "right")
    chunks = await collect(graph.compile())
    described = [describe(c) for c in chunks]
    assert sorted(d for d in described if d[2]) == [("message", "l", True), ("message", "r", True)]
    assert [d for d in described if not d[2]] == [
        ("message", "hi", False),
        ("message", "left", False),
        ("message", "right", False),
    ]


# -- the chunks themselves ------------------------------------------------------------------


async def test_every_chunk_is_a_new_object() -> None:
    chunks = await collect(app_with_writer(), "full")
    assert len({id(c) for c in chunks}) == len(chunks)
    assert all(isinstance(c, StreamChunk) for c in chunks)


async def test_chunk_timestamps_are_taken_per_chunk() -> None:
    marks: list[float] = []

    async def slow_start(state: AgentState) -> str:
        await asyncio.sleep(0.01)  # make the clock move between the chunks around this node
        marks.append(time.time())
        await asyncio.sleep(0.01)
        return "late"

    chunks = await collect(linear(slow_start), "full")
    stamps = [c.timestamp for c in chunks]
    assert stamps == sorted(stamps)
    (mark,) = marks
    before = [c for c in chunks if c.timestamp < mark]
    after = [c for c in chunks if c.timestamp > mark]
    assert [describe(c) for c in before] == [
        ("message", "hi", False),
        ("updates", "invoking_graph", None),
        ("updates", "invoking_node", "slow_start"),
    ]
    assert len(before) + len(after) == len(chunks)


async def test_chunks_carry_thread_and_run_ids() -> None:
    config = {"thread_id": "th-1", "run_id": "run-1"}
    chunks = await collect(app_with_writer(), "full", config)
    assert {(c.thread_id, c.run_id) for c in chunks} == {("th-1", "run-1")}


async def test_generated_ids_are_the_same_on_every_chunk() -> None:
    chunks = await collect(app_with_writer(), "full")
    ids = {(c.thread_id, c.run_id) for c in chunks}
    assert len(ids) == 1
    ((thread_id, run_id),) = ids
    assert thread_id
    assert run_id


# -- async-generator nodes ------------------------------------------------------------------


async def test_deltas_are_streamed_but_never_stored() -> None:
    checkpointer = InMemoryCheckpointer()
    chunks = await collect(app_with_writer(checkpointer), "full", {"thread_id": "t"})
    assert any(c.message is not None and c.message.delta for c in chunks)
    stored = await checkpointer.aget_state({"thread_id": "t"})
    assert stored is not None
    assert texts(stored.context) == ["hi", "Hello", "bye"]
    assert not any(m.delta for m in stored.context)
    final = [c.state for c in chunks if c.state is not None][-1]
    assert texts(final.context) == ["hi", "Hello", "bye"]


async def test_ainvoke_stores_the_same_complete_messages_and_no_deltas() -> None:
    checkpointer = InMemoryCheckpointer()
    app = app_with_writer(checkpointer)
    result = await app.ainvoke(inp("hi"), {"thread_id": "t"})
    assert texts(result["messages"]) == ["hi", "Hello", "bye"]
    assert not any(m.delta for m in result["messages"])
    stored = await app.aget_state({"thread_id": "t"})
    assert stored is not None
    assert texts(stored.context) == ["hi", "Hello", "bye"]
    assert stored.context[1].message_id == "reply-1"


async def test_generator_may_yield_updates_and_several_messages() -> None:
    class WithNote(AgentState):
        note: str = ""

    async def node(state: WithNote) -> AsyncIterator[Any]:
        yield delta("...", "d")
        yield ai("one")
        yield {"note": "from generator"}
        yield "two"

    result = await linear(node, state=WithNote).ainvoke(inp("hi"), response_granularity="full")
    assert texts(result["state"].context) == ["hi", "one", "two"]
    assert result["state"].note == "from generator"


# -- sync stream ----------------------------------------------------------------------------


@pytest.mark.parametrize("granularity", ["low", "partial", "full"])
async def test_sync_stream_gives_the_same_sequence(granularity: str) -> None:
    app = app_with_writer()
    expected = [describe(c) for c in await collect(app, granularity)]
    chunks = await asyncio.to_thread(
        lambda: list(app.stream(inp("hi"), response_granularity=granularity))
    )
    assert [describe(c) for c in chunks] == expected
    assert len({id(c) for c in chunks}) == len(chunks)


def test_sync_stream_from_plain_code() -> None:
    app = linear(("n", closer))
    chunks = list(app.stream(inp("hi"), {"thread_id": "sync"}))
    assert [describe(c) for c in chunks] == [("message", "hi", False), ("message", "bye", False)]
    assert {c.thread_id for c in chunks} == {"sync"}


async def test_abandoning_a_stream_releases_the_thread() -> None:
    app = linear(("a", closer), ("b", closer), checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    stream = app.astream(inp("hi"), config)
    first = await stream.__anext__()
    assert first.event == "message"
    await stream.aclose()
    # the thread is not left locked or marked as running
    result = await asyncio.wait_for(app.ainvoke(inp("again"), config), 5)
    assert texts(result["messages"]) == ["again", "bye", "bye"]
    assert (await app.astop(config))["running"] is False
