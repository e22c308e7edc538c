"""Threads: state kept between runs by a checkpointer, copies, turn-taking, app isolation."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import pytest
from pydantic import Field

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, TextBlock, replace_value
from tenxgraph.core.state.sealed import SealedError
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils.constants import START
from tests.core.graph._support import inp, linear, texts, user


class Memo(AgentState):
    data: dict[str, Any] = Field(default_factory=dict)
    items: list[str] = Field(default_factory=list)


def echo(state: AgentState) -> str:
    return f"echo {len(state.context)}: {state.context[-1].text()}"


def memo_app() -> Any:
    return linear(echo, state=Memo, checkpointer=InMemoryCheckpointer())


# -- keeping a thread -----------------------------------------------------------------------


async def test_second_invoke_continues_the_conversation() -> None:
    seen: list[list[str]] = []

    def look(state: AgentState) -> str:
        seen.append(texts(state.context))
        return f"reply to {state.context[-1].text()}"

    app = linear(look, checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    await app.ainvoke(inp("one"), config)
    result = await app.ainvoke(inp("two"), config, response_granularity="partial")
    assert seen == [["one"], ["one", "reply to one", "two"]]
    assert texts(result["context"]) == ["one", "reply to one", "two", "reply to two"]


async def test_get_state_returns_the_stored_state() -> None:
    app = memo_app()
    config = {"thread_id": "t"}
    await app.ainvoke(inp("one", data={"k": 1}), config)
    stored = await app.aget_state(config)
    assert isinstance(stored, Memo)
    assert texts(stored.context) == ["one", "echo 1: one"]
    assert stored.data == {"k": 1}
    assert stored.execution_meta.status == "completed"
    assert stored.execution_meta.thread_id == "t"
    assert stored.execution_meta.step == 1
    same = app.get_state(config)
    assert same == stored


async def test_get_state_is_none_for_an_unknown_thread() -> None:
    app = memo_app()
    await app.ainvoke(inp("one"), {"thread_id": "t"})
    assert await app.aget_state({"thread_id": "other"}) is None
    assert app.get_state({"thread_id": "other"}) is None


async def test_get_state_is_none_for_an_app_compiled_to_keep_nothing() -> None:
    app = linear(echo, checkpointer=False)  # without a checkpointer, threads stay in memory
    assert app.checkpointer is None
    await app.ainvoke(inp("one"), {"thread_id": "t"})
    assert await app.aget_state({"thread_id": "t"}) is None
    assert app.get_state({"thread_id": "t"}) is None


async def test_get_state_needs_a_thread_id() -> None:
    with pytest.raises(ValueError, match="thread_id"):
        await memo_app().aget_state({})


async def test_an_app_compiled_to_keep_nothing_starts_each_invoke_fresh() -> None:
    seen: list[list[str]] = []

    def look(state: AgentState) -> str:
        seen.append(texts(state.context))
        return "reply"

    app = linear(look, checkpointer=False)
    config = {"thread_id": "t"}
    await app.ainvoke(inp("one"), config)
    result = await app.ainvoke(inp("two"), config, response_granularity="partial")
    assert seen == [["one"], ["two"]]
    assert texts(result["context"]) == ["two", "reply"]


async def test_thread_changed_through_a_shared_checkpointer_is_reloaded() -> None:
    checkpointer = InMemoryCheckpointer()
    first = linear(echo, checkpointer=checkpointer)
    second = linear(echo, checkpointer=checkpointer)
    config = {"thread_id": "t"}
    await first.ainvoke(inp("a"), config)
    await second.ainvoke(inp("b"), config)
    result = await first.ainvoke(inp("c"), config, response_granularity="partial")
    assert texts(result["context"]) == ["a", "echo 1: a", "b", "echo 3: b", "c", "echo 5: c"]


# -- copies ---------------------------------------------------------------------------------


async def test_mutating_a_get_state_result_does_not_change_the_store() -> None:
    app = memo_app()
    config = {"thread_id": "t"}
    await app.ainvoke(inp("one", data={"k": 1}, items=["x"]), config)
    got = await app.aget_state(config)
    assert isinstance(got, Memo)
    got.data["k"] = 2
    got.items.append("y")
    got.context.append(user("sneaked in"))
    with pytest.raises(SealedError):  # the thread's messages are sealed
        got.context[0].content[0] = TextBlock(text="rewritten")
    got.execution_meta.step = 99
    again = await app.aget_state(config)
    assert isinstance(again, Memo)
    assert again.data == {"k": 1}
    assert again.items == ["x"]
    assert texts(again.context) == ["one", "echo 1: one"]
    assert again.execution_meta.step == 1


async def test_mutating_a_full_result_state_does_not_change_the_store() -> None:
    app = memo_app()
    config = {"thread_id": "t"}
    result = await app.ainvoke(inp("one", data={"k": 1}), config, response_granularity="full")
    state = result["state"]
    state.data["k"] = 2
    state.items.append("y")
    state.context.append(user("sneaked in"))
    with pytest.raises(SealedError):  # the kept messages themselves are sealed
        state.context[0].content[0] = TextBlock(text="rewritten")
    state.execution_meta.step = 99
    stored = await app.aget_state(config)
    assert isinstance(stored, Memo)
    assert stored.data == {"k": 1}
    assert stored.items == []
    assert texts(stored.context) == ["one", "echo 1: one"]
    assert stored.execution_meta.step == 1


async def test_mutating_an_input_message_after_the_run_does_not_change_the_store() -> None:
    app = memo_app()
    config = {"thread_id": "t"}
    message = user("original")
    await app.ainvoke({"messages": [message]}, config)
    message.content[0] = TextBlock(text="changed")
    message.metadata["late"] = True
    stored = await app.aget_state(config)
    assert stored is not None
    assert stored.context[0].text() == "original"
    assert stored.context[0].metadata == {}


async def test_mutating_a_full_result_state_does_not_leak_into_the_next_run() -> None:
    seen: list[dict[str, Any]] = []

    def look(state: Memo) -> None:
        seen.append(dict(state.data))

    app = linear(look, state=Memo, checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    result = await app.ainvoke(inp("one", data={"k": 1}), config, response_granularity="full")
    result["state"].data["k"] = 2
    await app.ainvoke(inp("two"), config)
    stored = await app.aget_state(config)
    assert isinstance(stored, Memo)
    assert seen == [{"k": 1}, {"k": 1}]
    assert stored.data == {"k": 1}


async def test_mutating_an_input_message_does_not_leak_into_the_next_run() -> None:
    seen: list[str] = []

    def look(state: AgentState) -> None:
        seen.append(state.context[0].text())

    app = linear(look, checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    message = user("original")
    await app.ainvoke({"messages": [message]}, config)
    message.content[0] = TextBlock(text="changed")
    await app.ainvoke(inp("two"), config)
    assert seen == ["original", "original"]


# -- concurrent runs on one thread ----------------------------------------------------------


async def test_enqueued_runs_on_one_thread_take_turns_and_lose_nothing() -> None:
    running = 0
    most = 0

    async def slow_echo(state: AgentState) -> str:
        nonlocal running, most
        running += 1
        most = max(most, running)
        for _ in range(3):
            await asyncio.sleep(0)  # let the other runs try to interleave
        running -= 1
        return f"reply to {state.context[-1].text()}"

    app = linear(slow_echo, checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t", "multitask_strategy": "enqueue"}
    words = [f"m{i}" for i in range(5)]
    await asyncio.gather(*(app.ainvoke(inp(w), config) for w in words))
    stored = await app.aget_state(config)
    assert stored is not None
    history = texts(stored.context)
    assert len(history) == 10
    assert sorted(history[0::2]) == words
    assert history[1::2] == [f"reply to {w}" for w in history[0::2]]
    assert most == 1
    assert stored.execution_meta.step == 5


async def test_a_run_cancelled_while_waiting_for_its_turn_does_not_block_the_next() -> None:
    holding, release = asyncio.Event(), asyncio.Event()
    entered: list[str] = []

    async def held(state: AgentState) -> str:
        text = state.context[-1].text()
        entered.append(text)
        if text == "first":
            holding.set()
            await release.wait()
        return f"reply to {text}"

    app = linear(held, checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t", "multitask_strategy": "enqueue"}
    first = asyncio.create_task(app.ainvoke(inp("first"), config))
    await holding.wait()  # the first run holds the thread
    second = asyncio.create_task(app.ainvoke(inp("second"), config))
    third = asyncio.create_task(app.ainvoke(inp("third"), config))
    await asyncio.sleep(0)  # one loop turn: both start and queue up behind the first
    (waiting,) = app._threads.turns.values()
    assert len(waiting) == 2
    second.cancel()
    release.set()
    await asyncio.wait_for(asyncio.gather(first, third), 5)
    with pytest.raises(asyncio.CancelledError):
        await second
    assert entered == ["first", "third"]
    stored = await app.aget_state(config)
    assert stored is not None
    assert texts(stored.context) == ["first", "reply to first", "third", "reply to third"]
    assert app._threads.turns == {}  # nothing left of the thread's queue


async def test_concurrent_runs_on_different_threads_run_at_the_same_time() -> None:
    both_in = asyncio.Event()
    inside: set[str] = set()

    async def meet(state: AgentState, config: dict[str, Any]) -> str:
        inside.add(config["thread_id"])
        if len(inside) == 2:
            both_in.set()
        await both_in.wait()  # only returns if the other thread's run is inside too
        return "met"

    app = linear(meet, checkpointer=InMemoryCheckpointer())
    results = await asyncio.wait_for(
        asyncio.gather(
            app.ainvoke(inp("a"), {"thread_id": "a"}), app.ainvoke(inp("b"), {"thread_id": "b"})
        ),
        5,
    )
    assert [texts(r["messages"]) for r in results] == [["a", "met"], ["b", "met"]]


# -- no shared state between apps -----------------------------------------------------------


async def test_same_thread_id_on_two_apps_keeps_separate_histories() -> None:
    first, second = memo_app(), memo_app()
    config = {"thread_id": "shared-id"}
    await first.ainvoke(inp("first app, turn 1"), config)
    await second.ainvoke(inp("second app"), config)
    await first.ainvoke(inp("first app, turn 2"), config)
    one = await first.aget_state(config)
    two = await second.aget_state(config)
    assert one is not None
    assert two is not None
    assert texts(one.context) == [
        "first app, turn 1",
        "echo 1: first app, turn 1",
        "first app, turn 2",
        "echo 3: first app, turn 2",
    ]
    assert texts(two.context) == ["second app", "echo 1: second app"]


async def test_one_graph_compiled_twice_gives_independent_apps() -> None:
    graph = StateGraph(Memo)
    graph.add_node(echo)
    graph.add_edge(START, "echo")
    first = graph.compile(checkpointer=InMemoryCheckpointer())
    second = graph.compile(checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    await first.ainvoke(inp("x"), config)
    assert await second.aget_state(config) is None
    result = await second.ainvoke(inp("y"), config, response_granularity="partial")
    assert texts(result["context"]) == ["y", "echo 1: y"]


def concat(left: list[str], right: list[str]) -> list[str]:
    return [*left, *right]


class Appending(AgentState):
    items: Annotated[list[str], concat] = Field(default_factory=list)


class Replacing(AgentState):
    items: Annotated[list[str], replace_value] = Field(default_factory=list)


async def test_one_apps_state_class_and_reducers_do_not_affect_another() -> None:
    def add_item(state: AgentState) -> dict[str, Any]:
        return {"items": ["x"]}

    appending = linear(("a", add_item), ("b", add_item), state=Appending)
    replacing = linear(("a", add_item), ("b", add_item), state=Replacing)
    plain = linear(("a", add_item), ("b", add_item), state=Memo)
    for _ in range(2):  # order of first use does not matter either
        a = await appending.ainvoke(inp("hi"), response_granularity="full")
        r = await replacing.ainvoke(inp("hi"), response_granularity="full")
        p = await plain.ainvoke(inp("hi"), response_granularity="full")
        assert (type(a["state"]), a["state"].items) == (Appending, ["x", "x"])
        assert (type(r["state"]), r["state"].items) == (Replacing, ["x"])
        assert (type(p["state"]), p["state"].items) == (Memo, ["x"])


async def test_two_apps_with_different_state_classes_on_one_thread_id() -> None:
    class Other(AgentState):
        other: int = 0

    memo = memo_app()
    other = linear(("n", lambda s: {"other": 3}), state=Other, checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    await memo.ainvoke(inp("one", data={"k": 1}), config)
    await other.ainvoke(inp("two"), config)
    a, b = await memo.aget_state(config), await other.aget_state(config)
    assert isinstance(a, Memo)
    assert a.data == {"k": 1}
    assert isinstance(b, Other)
    assert b.other == 3
