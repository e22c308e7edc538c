"""Super-steps: fan-out, joins, conditional edges and Command routing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any

import pytest
from pydantic import Field

from tenxgraph.core.exceptions import GraphError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState
from tenxgraph.utils import Command
from tenxgraph.utils.constants import END, START
from tests.core.graph._support import ai, inp, texts


def append(left: list[str], right: list[str]) -> list[str]:
    return [*left, *right]


class Trail(AgentState):
    trail: Annotated[list[str], append] = Field(default_factory=list)
    note: str = ""
    route: str = ""


def mark(name: str, log: list[str] | None = None) -> Callable[[Trail], dict[str, Any]]:
    def node(state: Trail) -> dict[str, Any]:
        if log is not None:
            log.append(name)
        return {"trail": [name]}

    return node


def graph_of(names: list[str], log: list[str] | None = None) -> StateGraph:
    graph = StateGraph(Trail)
    for name in names:
        graph.add_node(name, mark(name, log))
    return graph


async def final_state(graph: StateGraph, **config: Any) -> Trail:
    result = await graph.compile().ainvoke(inp("go"), config or None, response_granularity="full")
    state = result["state"]
    assert isinstance(state, Trail)
    return state


# -- fan-out --------------------------------------------------------------------------------


async def test_static_fan_out_runs_branches_concurrently() -> None:
    b_started, c_started = asyncio.Event(), asyncio.Event()

    async def b(state: Trail) -> dict[str, Any]:
        b_started.set()
        await c_started.wait()  # only finishes if c runs at the same time
        return {"trail": ["b"]}

    async def c(state: Trail) -> dict[str, Any]:
        c_started.set()
        await b_started.wait()
        return {"trail": ["c"]}

    graph = graph_of(["a"])
    graph.add_node(b)
    graph.add_node(c)
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("a", "c")
    state = await asyncio.wait_for(final_state(graph), 5)
    assert state.trail == ["a", "b", "c"]


async def test_parallel_updates_merge_in_registration_order_not_finish_order() -> None:
    first_may_finish = asyncio.Event()

    async def first(state: Trail) -> dict[str, Any]:
        await first_may_finish.wait()
        return {"trail": ["first"], "context": [ai("from first")]}

    async def second(state: Trail) -> dict[str, Any]:
        first_may_finish.set()  # second finishes before first
        return {"trail": ["second"], "context": [ai("from second")]}

    graph = StateGraph(Trail)
    graph.add_node(first)
    graph.add_node(second)
    graph.add_edge(START, "second")  # edge order differs from registration order
    graph.add_edge(START, "first")
    state = await asyncio.wait_for(final_state(graph), 5)
    assert state.trail == ["first", "second"]
    assert texts(state.context) == ["go", "from first", "from second"]


async def test_parallel_in_place_appends_merge_in_registration_order() -> None:
    first_may_finish = asyncio.Event()

    async def first(state: Trail) -> None:
        await first_may_finish.wait()
        state.context.append(ai("from first"))

    async def second(state: Trail) -> None:
        state.context.append(ai("from second"))
        first_may_finish.set()

    async def third(state: Trail) -> Any:
        return ai("from third")

    graph = StateGraph(Trail)
    for node in (third, first, second):
        graph.add_node(node)
        graph.add_edge(START, node.__name__)
    state = await asyncio.wait_for(final_state(graph), 5)
    assert texts(state.context) == ["go", "from third", "from first", "from second"]


async def test_parallel_branches_see_the_same_pre_step_state() -> None:
    seen: dict[str, list[str]] = {}

    def look(name: str) -> Callable[[Trail], dict[str, Any]]:
        def node(state: Trail) -> dict[str, Any]:
            seen[name] = list(state.trail)
            return {"trail": [name]}

        return node

    graph = graph_of(["a"])
    graph.add_node("b", look("b"))
    graph.add_node("c", look("c"))
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("a", "c")
    await final_state(graph)
    assert seen == {"b": ["a"], "c": ["a"]}


async def test_parallel_reducer_and_plain_updates_are_both_kept() -> None:
    graph = StateGraph(Trail)
    graph.add_node("plain", lambda s: {"note": "set"})
    graph.add_node("reduced", lambda s: {"trail": ["r"]})
    graph.add_edge(START, "plain")
    graph.add_edge(START, "reduced")
    state = await final_state(graph)
    assert state.note == "set"
    assert state.trail == ["r"]


# -- joins ----------------------------------------------------------------------------------


async def test_join_runs_once_after_both_branches() -> None:
    log: list[str] = []
    graph = graph_of(["a", "b", "c", "d"], log)
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("a", "c")
    graph.add_edge("b", "d")
    graph.add_edge("c", "d")
    state = await final_state(graph)
    assert log.count("d") == 1
    assert state.trail == ["a", "b", "c", "d"]


async def test_join_after_uneven_branches_waits_for_the_longer_one() -> None:
    log: list[str] = []
    graph = graph_of(["a", "b", "c", "b2", "d"], log)
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("a", "c")
    graph.add_edge("b", "b2")
    graph.add_edge("b2", "d")
    graph.add_edge("c", "d")
    state = await final_state(graph)
    assert log.count("d") == 1
    assert log.index("d") > log.index("b2")
    assert state.trail == ["a", "b", "c", "b2", "d"]
    assert state.execution_meta.step == 4


async def test_join_reached_through_a_conditional_branch_runs_once() -> None:
    log: list[str] = []
    graph = graph_of(["a", "b", "c", "c2", "d"], log)
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("a", "c")
    graph.add_edge("b", "d")
    graph.add_conditional_edges("c", lambda s: "c2", ["c2", "d"])
    graph.add_edge("c2", "d")
    await final_state(graph)
    assert log.count("d") == 1
    assert log.index("d") > log.index("c2")


async def test_join_runs_when_the_other_branch_ends() -> None:
    log: list[str] = []
    graph = graph_of(["a", "b", "c", "d"], log)
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("a", "c")
    graph.add_edge("b", "d")
    graph.add_conditional_edges("c", lambda s: END, {END: END, "d": "d"})
    await final_state(graph)
    assert log == ["a", "b", "c", "d"]


async def test_node_in_a_loop_runs_again_each_time_it_is_reached() -> None:
    log: list[str] = []
    graph = graph_of(["agent", "tools"], log)
    graph.add_edge(START, "agent")
    calls: list[int] = []

    def condition(state: Trail) -> str:
        calls.append(len(state.trail))
        return "tools" if state.trail.count("agent") < 3 else END

    graph.add_conditional_edges("agent", condition, ["tools", END])
    graph.add_edge("tools", "agent")
    await final_state(graph)
    assert log == ["agent", "tools", "agent", "tools", "agent"]
    assert calls == [1, 3, 5]  # once per agent step, with the state after that step


# -- conditional edges ----------------------------------------------------------------------


async def test_condition_picks_the_next_node_and_is_called_once_per_step() -> None:
    calls: list[int] = []
    log: list[str] = []

    def condition(state: Trail) -> str:
        calls.append(len(state.trail))
        return "left"

    graph = graph_of(["a", "left", "right"], log)
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", condition)
    graph.add_edge("left", END)
    graph.add_edge("right", END)
    await final_state(graph)
    assert log == ["a", "left"]
    assert calls == [1]


async def test_condition_sees_the_state_after_the_step() -> None:
    def condition(state: Trail) -> str:
        return state.route

    graph = graph_of(["left", "right"])
    graph.add_node("a", lambda s: {"route": "right"})
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", condition)
    state = await final_state(graph)
    assert state.trail == ["right"]


async def test_condition_may_take_config_and_be_async() -> None:
    async def condition(state: Trail, config: dict[str, Any]) -> str:
        await asyncio.sleep(0)
        return config["pick"]

    graph = graph_of(["a", "left", "right"])
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", condition, ["left", "right"])
    state = await final_state(graph, pick="right")
    assert state.trail == ["a", "right"]


async def test_condition_returning_end_ends_the_run() -> None:
    log: list[str] = []
    graph = graph_of(["a", "b"], log)
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", lambda s: END)
    graph.add_edge("b", END)
    await final_state(graph)
    assert log == ["a"]


async def test_condition_returning_a_list_fans_out() -> None:
    calls: list[int] = []

    def condition(state: Trail) -> list[str]:
        calls.append(1)
        return ["c", "b"]

    graph = graph_of(["a", "b", "c"])
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", condition)
    state = await final_state(graph)
    assert state.trail == ["a", "b", "c"]  # registration order
    assert state.execution_meta.step == 2
    assert calls == [1]


async def test_path_map_dict_maps_the_returned_value() -> None:
    graph = graph_of(["a", "b", "c"])
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", lambda s: True, {True: "c", False: "b"})
    state = await final_state(graph)
    assert state.trail == ["a", "c"]


async def test_path_map_list_allows_the_listed_names() -> None:
    graph = graph_of(["a", "b", "c"])
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", lambda s: "b", ["b", "c"])
    state = await final_state(graph)
    assert state.trail == ["a", "b"]


async def test_condition_returning_an_unknown_node_is_graph_004() -> None:
    graph = graph_of(["a"])
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", lambda s: "ghost")
    with pytest.raises(GraphError) as info:
        await graph.compile().ainvoke(inp("go"))
    assert info.value.error_code == "GRAPH_004"
    assert "ghost" in str(info.value)


async def test_condition_returning_a_value_outside_the_path_map_is_graph_004() -> None:
    graph = graph_of(["a", "b"])
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", lambda s: "nope", {"yes": "b", "no": END})
    with pytest.raises(GraphError) as info:
        await graph.compile().ainvoke(inp("go"))
    assert info.value.error_code == "GRAPH_004"
    assert "nope" in str(info.value)


async def test_name_outside_a_list_path_map_is_graph_004() -> None:
    graph = graph_of(["a", "b", "c"])
    graph.add_edge(START, "a")
    graph.add_edge("a", "c")
    graph.add_conditional_edges("a", lambda s: "c", ["b"])
    with pytest.raises(GraphError) as info:
        await graph.compile().ainvoke(inp("go"))
    assert info.value.error_code == "GRAPH_004"


# -- Command --------------------------------------------------------------------------------


async def test_command_goto_overrides_the_nodes_edges() -> None:
    log: list[str] = []
    graph = graph_of(["b", "c"], log)

    def a(state: Trail) -> Command:
        log.append("a")
        return Command(goto="c", update={"trail": ["a"]})

    graph.add_node(a)
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("c", END)
    graph.add_edge("b", END)
    state = await final_state(graph)
    assert log == ["a", "c"]
    assert state.trail == ["a", "c"]


async def test_command_goto_overrides_a_conditional_edge_too() -> None:
    calls: list[int] = []
    graph = graph_of(["b", "c"])
    graph.add_node("a", lambda s: Command(goto="c"))
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", lambda s: calls.append(1) or "b", ["b", "c"])
    state = await final_state(graph)
    assert state.trail == ["c"]
    assert calls == []


async def test_command_goto_list_fans_out() -> None:
    def a(state: Trail) -> Command:
        return Command(goto=["d", "b"])

    graph = graph_of(["b", "c", "d"])
    graph.add_node(a)
    graph.add_edge(START, "a")
    graph.add_edge("a", "c")
    state = await final_state(graph)
    assert state.trail == ["b", "d"]
    assert state.execution_meta.step == 2


async def test_command_goto_end_ends_the_run() -> None:
    log: list[str] = []
    graph = graph_of(["b"], log)
    graph.add_node("a", lambda s: Command(goto=END, update="bye"))
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    result = await graph.compile().ainvoke(inp("go"))
    assert log == []
    assert texts(result["messages"]) == ["go", "bye"]


async def test_command_goto_unknown_node_is_a_graph_error() -> None:
    graph = graph_of(["b"])
    graph.add_node("a", lambda s: Command(goto="ghost"))
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    with pytest.raises(GraphError) as info:
        await graph.compile().ainvoke(inp("go"))
    assert info.value.error_code == "GRAPH_004"
    assert "ghost" in str(info.value)


async def test_command_without_goto_follows_the_edges() -> None:
    graph = graph_of(["b"])
    graph.add_node("a", lambda s: Command(update={"note": "x"}))
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    state = await final_state(graph)
    assert (state.note, state.trail) == ("x", ["b"])


async def test_graph_ends_when_a_node_has_no_out_edges() -> None:
    log: list[str] = []
    graph = graph_of(["a", "b"], log)
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    state = await final_state(graph)
    assert log == ["a", "b"]
    assert state.execution_meta.status == "completed"
