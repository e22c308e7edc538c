"""StateGraph: the state it is built over, adding nodes and edges, and what compile() rejects."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from pydantic import BaseModel

from tenxgraph.core.exceptions import GraphError, UnreachableNodesWarning
from tenxgraph.core.graph import CompiledGraph, StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils.command import Command
from tenxgraph.utils.constants import END, START
from tests.core.graph._support import inp, linear, texts


class NoteState(AgentState):
    note: str = "default"
    count: int = 0


def answer(state: AgentState) -> str:
    return "answered"


def other(state: AgentState) -> str:
    return "other"


def graph_with(*names: str, state: Any = None) -> StateGraph:
    graph = StateGraph(state)
    for name in names:
        graph.add_node(name, answer)
    return graph


# -- the state ------------------------------------------------------------------------------


async def test_default_state_is_agent_state() -> None:
    graph = StateGraph()
    graph.add_node(answer)
    graph.add_edge(START, "answer")
    result = await graph.compile().ainvoke(inp("hi"), response_granularity="full")
    assert type(result["state"]) is AgentState


async def test_state_subclass_starts_new_threads_from_its_defaults() -> None:
    seen: list[tuple[str, int]] = []

    def look(state: NoteState) -> None:
        seen.append((state.note, state.count))

    graph = StateGraph(NoteState)
    graph.add_node(look)
    graph.add_edge(START, "look")
    result = await graph.compile().ainvoke(inp("hi"), response_granularity="full")
    assert seen == [("default", 0)]
    assert type(result["state"]) is NoteState


async def test_state_instance_values_start_every_new_thread() -> None:
    seen: list[tuple[str, int]] = []

    def look(state: NoteState) -> dict[str, Any]:
        seen.append((state.note, state.count))
        return {"note": "changed by run", "count": state.count + 1}

    graph = StateGraph(NoteState(note="preset", count=7))
    graph.add_node(look)
    graph.add_edge(START, "look")
    app = graph.compile()
    await app.ainvoke(inp("one"), {"thread_id": "a"})
    await app.ainvoke(inp("two"), {"thread_id": "b"})
    # the second thread starts from the instance again, not from the first run's result
    assert seen == [("preset", 7), ("preset", 7)]


async def test_state_instance_messages_are_part_of_the_stored_thread() -> None:
    system = Message.text_message("You are terse.", "system")
    seen: list[list[str]] = []

    def look(state: AgentState) -> str:
        seen.append(texts(state.context))
        return "ok"

    checkpointer = InMemoryCheckpointer()
    initial = AgentState(context=[system])
    app = linear(look, state=initial, checkpointer=checkpointer)
    config = {"thread_id": "t"}
    await app.ainvoke(inp("hi"), config)
    assert seen == [["You are terse.", "hi"]]
    stored = await app.aget_state(config)
    assert stored is not None
    assert texts(stored.context) == ["You are terse.", "hi", "ok"]
    # a second app on the same store (e.g. after a restart) continues the same history
    again = linear(look, state=initial, checkpointer=checkpointer)
    await again.ainvoke(inp("more"), config)
    assert seen[-1] == ["You are terse.", "hi", "ok", "more"]


@pytest.mark.parametrize("bad", [dict, {}, "AgentState", BaseModel, int])
def test_state_that_is_not_an_agent_state_is_a_type_error(bad: Any) -> None:
    with pytest.raises(TypeError, match="AgentState"):
        StateGraph(bad)


# -- nodes ----------------------------------------------------------------------------------


async def test_add_node_with_a_function_names_it_after_the_function() -> None:
    graph = StateGraph()
    graph.add_node(answer)
    graph.add_edge(START, "answer")
    graph.add_edge("answer", END)
    result = await graph.compile().ainvoke(inp("hi"))
    assert texts(result["messages"]) == ["hi", "answered"]


async def test_add_node_with_a_name_and_a_function() -> None:
    graph = StateGraph()
    graph.add_node("responder", answer)
    graph.add_edge(START, "responder")
    result = await graph.compile().ainvoke(inp("hi"))
    assert texts(result["messages"]) == ["hi", "answered"]


def test_duplicate_node_name_is_rejected() -> None:
    graph = StateGraph()
    graph.add_node("a", answer)
    with pytest.raises(ValueError, match="'a'"):
        graph.add_node("a", other)
    with pytest.raises(ValueError, match="'answer'"):
        graph.add_node(answer).add_node(answer)


@pytest.mark.parametrize("reserved", [START, END, "__start__", "__end__"])
def test_reserved_node_names_are_rejected(reserved: str) -> None:
    with pytest.raises(ValueError, match=reserved):
        StateGraph().add_node(reserved, answer)


async def test_builder_override_node_replaces_the_function() -> None:
    graph = graph_with("a")
    graph.add_edge(START, "a")
    graph.override_node("a", other)
    result = await graph.compile().ainvoke(inp("hi"))
    assert texts(result["messages"]) == ["hi", "other"]


def test_builder_override_of_an_unknown_node_is_a_key_error() -> None:
    graph = graph_with("a")
    with pytest.raises(KeyError, match="ghost"):
        graph.override_node("ghost", other)


async def test_compiled_override_node_replaces_the_function_and_keeps_edges() -> None:
    graph = graph_with("a", "b")
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    app = graph.compile()
    app.override_node("b", other)
    result = await app.ainvoke(inp("hi"))
    assert texts(result["messages"]) == ["hi", "answered", "other"]
    with pytest.raises(KeyError, match="ghost"):
        app.override_node("ghost", other)


async def test_override_node_after_a_run_is_used_by_the_next_run() -> None:
    """Routes are remembered after the first run; overriding a node must not leave them
    pointing at the old one."""
    graph = graph_with("a", "b")
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    app = graph.compile()
    first = await app.ainvoke(inp("hi"))
    assert texts(first["messages"])[-1] == "answered"
    app.override_node("b", other)
    second = await app.ainvoke(inp("hi"))
    assert texts(second["messages"]) == ["hi", "answered", "other"]


# -- edges and entry point ------------------------------------------------------------------


async def test_edge_from_start_sets_the_entry_point() -> None:
    graph = graph_with("a", "b")
    graph.add_edge(START, "b")
    graph.add_edge("b", "a")
    result = await graph.compile().ainvoke(inp("hi"))
    assert len(result["messages"]) == 3


async def test_set_entry_point_starts_the_run_there() -> None:
    order: list[str] = []

    def make(name: str) -> Any:
        def node(state: AgentState) -> None:
            order.append(name)

        return node

    graph = StateGraph()
    graph.add_node("a", make("a"))
    graph.add_node("b", make("b"))
    graph.set_entry_point("b")
    graph.add_edge("b", "a")
    graph.add_edge("a", END)
    await graph.compile().ainvoke(inp("hi"))
    assert order == ["b", "a"]


async def test_conditional_edges_from_start_choose_the_first_node() -> None:
    graph = graph_with("a")
    graph.add_node("b", other)
    graph.add_conditional_edges(START, lambda state: "b", ["a", "b"])
    result = await graph.compile().ainvoke(inp("hi"))
    assert texts(result["messages"]) == ["hi", "other"]


# -- compile errors -------------------------------------------------------------------------


def compile_error(graph: StateGraph, **kwargs: Any) -> GraphError:
    with pytest.raises(GraphError) as info:
        graph.compile(**kwargs)
    return info.value


def test_no_entry_point_is_graph_002() -> None:
    graph = graph_with("a")
    graph.add_edge("a", END)
    err = compile_error(graph)
    assert err.error_code == "GRAPH_002"
    assert "entry point" in str(err)
    assert "START" in str(err)


def test_empty_graph_has_no_entry_point() -> None:
    assert compile_error(StateGraph()).error_code == "GRAPH_002"


def test_edge_to_an_unknown_node_is_graph_004_naming_it() -> None:
    graph = graph_with("a")
    graph.add_edge(START, "a")
    graph.add_edge("a", "ghost")
    err = compile_error(graph)
    assert err.error_code == "GRAPH_004"
    assert "ghost" in str(err)


def test_edge_from_an_unknown_node_is_graph_004_naming_it() -> None:
    graph = graph_with("a")
    graph.add_edge(START, "a")
    graph.add_edge("ghost", "a")
    err = compile_error(graph)
    assert err.error_code == "GRAPH_004"
    assert "ghost" in str(err)


def test_entry_point_that_is_not_a_node_is_graph_004() -> None:
    graph = graph_with("a")
    graph.set_entry_point("ghost")
    err = compile_error(graph)
    assert err.error_code == "GRAPH_004"
    assert "ghost" in str(err)


@pytest.mark.parametrize("path_map", [{"go": "ghost"}, ["a", "ghost"]])
def test_path_map_target_that_is_not_a_node_is_graph_004(path_map: Any) -> None:
    graph = graph_with("a")
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", lambda state: "go", path_map)
    err = compile_error(graph)
    assert err.error_code == "GRAPH_004"
    assert "ghost" in str(err)


def test_path_map_may_lead_to_end() -> None:
    graph = graph_with("a")
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", lambda state: "done", {"done": END, "again": "a"})
    assert isinstance(graph.compile(), CompiledGraph)


def test_conditional_edges_from_an_unknown_node_are_graph_004() -> None:
    graph = graph_with("a")
    graph.add_edge(START, "a")
    graph.add_conditional_edges("ghost", lambda state: END)
    err = compile_error(graph)
    assert err.error_code == "GRAPH_004"
    assert "ghost" in str(err)


@pytest.mark.parametrize("where", ["interrupt_before", "interrupt_after"])
def test_interrupt_at_an_unknown_node_is_graph_004(where: str) -> None:
    graph = graph_with("a")
    graph.add_edge(START, "a")
    err = compile_error(graph, **{where: ["ghost"]})
    assert err.error_code == "GRAPH_004"
    assert "ghost" in str(err)


@pytest.mark.parametrize("where", ["interrupt_before", "interrupt_after"])
def test_interrupt_at_a_known_node_compiles(where: str) -> None:
    graph = graph_with("a")
    graph.add_edge(START, "a")
    assert isinstance(graph.compile(**{where: ["a"]}), CompiledGraph)


def unreachable_warning(graph: StateGraph) -> tuple[CompiledGraph, UnreachableNodesWarning]:
    with pytest.warns(UnreachableNodesWarning) as record:
        app = graph.compile()
    [warning] = [w.message for w in record if isinstance(w.message, UnreachableNodesWarning)]
    assert record[0].filename == __file__  # points at the caller's compile()
    return app, warning


async def test_node_nothing_reaches_is_a_graph_003_warning_naming_it() -> None:
    graph = graph_with("a", "island")
    graph.add_edge(START, "a")
    graph.add_edge("a", END)
    app, warning = unreachable_warning(graph)
    assert warning.nodes == ["island"]
    assert warning.code == "GRAPH_003"
    assert "['island']" in str(warning)
    assert "'a'" not in str(warning)
    result = await app.ainvoke(inp("hi"))  # compiled and runs; the island never does
    assert texts(result["messages"]) == ["hi", "answered"]


def test_node_reached_only_from_an_unreachable_node_is_also_named() -> None:
    graph = graph_with("a", "island", "beyond")
    graph.add_edge(START, "a")
    graph.add_edge("island", "beyond")
    _, warning = unreachable_warning(graph)
    assert warning.nodes == ["island", "beyond"]


def test_node_reachable_only_through_a_path_map_compiles() -> None:
    graph = graph_with("a", "b")
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", lambda state: "x", {"x": "b", "y": END})
    assert isinstance(graph.compile(), CompiledGraph)


def test_path_map_that_omits_a_node_leaves_it_unreachable() -> None:
    graph = graph_with("a", "b", "c")
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", lambda state: "x", {"x": "b"})
    _, warning = unreachable_warning(graph)
    assert warning.nodes == ["c"]


def router_with_command(state: AgentState) -> Command:
    return Command(goto="hidden")


def router_with_optional_command(state: AgentState) -> Command | None:
    return Command(goto="hidden")


def router_without_annotation(state: AgentState):  # type: ignore[no-untyped-def]
    return Command(goto="hidden")


@pytest.mark.parametrize("router", [router_with_command, router_with_optional_command])
async def test_node_annotated_to_return_command_may_reach_any_node(router: Any) -> None:
    graph = StateGraph()
    graph.add_node("router", router)
    graph.add_node("hidden", answer)  # only the router's Command leads here
    graph.add_edge(START, "router")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnreachableNodesWarning)  # nothing to warn about
        app = graph.compile()
    result = await app.ainvoke(inp("hi"))
    assert texts(result["messages"]) == ["hi", "answered"]


async def test_command_without_annotation_warns_and_still_routes() -> None:
    graph = StateGraph()
    graph.add_node("router", router_without_annotation)
    graph.add_node("hidden", answer)
    graph.add_edge(START, "router")
    app, warning = unreachable_warning(graph)
    assert warning.nodes == ["hidden"]
    result = await app.ainvoke(inp("hi"))  # the goto reaches it at run time
    assert texts(result["messages"]) == ["hi", "answered"]


def test_node_with_an_extra_required_parameter_is_graph_007() -> None:
    def needs_more(state: AgentState, config: dict[str, Any], llm: Any) -> None:
        return None

    graph = StateGraph()
    graph.add_node("needy", needs_more)
    graph.add_edge(START, "needy")
    err = compile_error(graph)
    assert err.error_code == "GRAPH_007"
    assert "needy" in str(err)
    assert "llm" in str(err)


def test_node_with_two_unnamed_required_parameters_is_graph_007() -> None:
    def two(first: Any, second: Any) -> None:
        return None

    graph = StateGraph()
    graph.add_node(two)
    graph.add_edge(START, "two")
    err = compile_error(graph)
    assert err.error_code == "GRAPH_007"
    assert "two" in str(err)


def test_optional_extra_parameters_are_fine() -> None:
    def tolerant(state: AgentState, config: dict[str, Any], extra: int = 1, *a: Any) -> None:
        return None

    graph = StateGraph()
    graph.add_node(tolerant)
    graph.add_edge(START, "tolerant")
    assert isinstance(graph.compile(), CompiledGraph)


def test_condition_with_an_extra_required_parameter_is_graph_007() -> None:
    def condition(state: AgentState, extra: Any) -> str:
        return END

    graph = graph_with("a")
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", condition)
    err = compile_error(graph)
    assert err.error_code == "GRAPH_007"
    assert "a" in str(err)


def test_compile_error_str_carries_the_code() -> None:
    err = compile_error(StateGraph())
    assert str(err).startswith("[GRAPH_002] ")
