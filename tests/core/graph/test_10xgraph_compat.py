"""Code written for 10xgraph runs unchanged: the error texts its users match on, an app compiled
without a checkpointer that still keeps its threads, and nodes only `Command(goto=...)` reaches.
"""

from __future__ import annotations

from typing import Any

import pytest

from tenxgraph.core.exceptions import GraphRecursionError, NodeError, UnreachableNodesWarning
from tenxgraph.core.graph import CompiledGraph, StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.storage.checkpointer.memory import DefaultCheckpointer
from tenxgraph.utils import Command, interrupt
from tenxgraph.utils.constants import END, START
from tests.core.graph._support import inp, linear, texts

# -- error texts ----------------------------------------------------------------------------


def fails(state: AgentState) -> str:
    raise ValueError("it broke")


def fails_silently(state: AgentState) -> str:
    raise RuntimeError


async def test_a_node_error_reads_error_in_node_then_the_exception_message() -> None:
    app = linear(("failing", fails))
    with pytest.raises(NodeError, match="Error in node 'failing': it broke") as info:
        await app.ainvoke(inp("hi"))
    err = info.value
    assert str(err) == "[NODE_001] Error in node 'failing': it broke"
    assert err.message == "Error in node 'failing': it broke"
    assert err.error_code == "NODE_001"
    assert err.context == {"node": "failing", "node_name": "failing", "error_type": "ValueError"}
    assert isinstance(err.__cause__, ValueError)


def test_a_node_error_reads_the_same_through_the_sync_api() -> None:
    with pytest.raises(NodeError, match="Error in node 'failing': it broke"):
        linear(("failing", fails)).invoke(inp("hi"))


async def test_an_exception_without_a_message_is_named_by_its_class() -> None:
    with pytest.raises(NodeError) as info:
        await linear(("failing", fails_silently)).ainvoke(inp("hi"))
    assert str(info.value) == "[NODE_001] Error in node 'failing': RuntimeError"


def test_the_recursion_error_says_recursion_limit_and_keeps_its_context() -> None:
    err = GraphRecursionError.limit_reached(5, ["agent"])
    assert "recursion limit" in str(err)
    assert str(err).startswith("[RECURSION_001] Graph execution exceeded recursion limit: 5")
    assert "['agent']" in str(err)
    assert "config={'recursion_limit': 100}" in str(err)
    assert err.error_code == "RECURSION_001"
    assert err.context == {"recursion_limit": 5, "next": ["agent"]}
    assert "'recursion_limit': 400" in str(GraphRecursionError.limit_reached(200, ["a"]))


def looping_app() -> CompiledGraph:
    def again(state: AgentState) -> str:
        return "again"

    graph = StateGraph()
    graph.add_node("agent", again)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", lambda state: "agent", {"agent": "agent", END: END})
    return graph.compile()


async def test_a_run_past_its_recursion_limit_says_recursion_limit() -> None:
    with pytest.raises(GraphRecursionError, match="recursion limit") as info:
        await looping_app().ainvoke(inp("hi"), {"recursion_limit": 5})
    assert info.value.context == {"recursion_limit": 5, "next": ["agent"]}


# -- an app compiled without a checkpointer keeps its threads -------------------------------


def reply(state: AgentState) -> str:
    return f"reply to {state.context[-1].text()}"


async def test_an_app_without_a_checkpointer_keeps_its_threads_in_memory() -> None:
    app = linear(reply)
    assert isinstance(app.checkpointer, InMemoryCheckpointer)
    config = {"thread_id": "t"}
    await app.ainvoke(inp("one"), config)
    result = await app.ainvoke(inp("two"), config, response_granularity="partial")
    assert texts(result["context"]) == ["one", "reply to one", "two", "reply to two"]
    stored = await app.aget_state(config)
    assert stored is not None
    assert texts(stored.context) == ["one", "reply to one", "two", "reply to two"]
    assert stored.execution_meta.status == "completed"
    assert app.get_state(config) == stored
    assert [v.version for v in await app.aget_state_history(config)] == [4, 3, 2, 1]


def test_the_sync_api_of_an_app_without_a_checkpointer_keeps_its_threads_too() -> None:
    app = linear(reply)
    config = {"thread_id": "t"}
    app.invoke(inp("one"), config)
    stored = app.get_state(config)
    assert stored is not None
    assert texts(stored.context) == ["one", "reply to one"]


async def test_a_pause_of_an_app_without_a_checkpointer_is_resumed() -> None:
    def ask(state: AgentState) -> Message:
        answer = interrupt("proceed?")
        return Message.text_message(f"told {answer}", "assistant")

    app = linear(ask)
    config = {"thread_id": "t"}
    paused = await app.ainvoke(inp("go"), config)
    assert paused["interrupted"]["node"] == "ask"
    assert (await app.aget_state(config)).execution_meta.is_interrupted()  # type: ignore[union-attr]
    result = await app.ainvoke({"resume": "yes"}, config)
    assert texts(result["messages"])[-1] == "told yes"


async def test_apps_compiled_without_a_checkpointer_share_no_store() -> None:
    one, two = linear(reply), linear(reply)
    assert one.checkpointer is not two.checkpointer
    await one.ainvoke(inp("one"), {"thread_id": "t"})
    assert await two.aget_state({"thread_id": "t"}) is None


def test_the_store_of_an_app_without_a_checkpointer_is_bounded() -> None:
    store = linear(reply).checkpointer
    assert type(store) is DefaultCheckpointer
    assert (store.max_threads, store.max_bytes) == (1_000, 64 * 1024 * 1024)


async def test_a_thread_its_bounded_store_dropped_starts_afresh() -> None:
    app = linear(reply, checkpointer=InMemoryCheckpointer(max_threads=2))
    for thread in ("a", "b", "c"):
        await app.ainvoke(inp(f"to {thread}"), {"thread_id": thread})
    assert await app.aget_state({"thread_id": "a"}) is None  # the least recently used
    result = await app.ainvoke(inp("again"), {"thread_id": "a"}, response_granularity="partial")
    assert texts(result["context"]) == ["again", "reply to again"]


# -- nodes only Command(goto=...) reaches ----------------------------------------------------


def say(text: str) -> Any:
    def node(state: AgentState) -> str:
        return text

    return node


def route_to_second(state: AgentState):  # type: ignore[no-untyped-def]  # no -> Command
    return Command(goto="second")


async def test_goto_from_a_node_without_annotation_reaches_a_node_no_edge_leads_to() -> None:
    graph = StateGraph()
    graph.add_node("router", route_to_second)
    graph.add_node("second", say("second ran"))
    graph.add_node("third", say("third ran"))
    graph.add_edge(START, "router")
    graph.add_edge("second", "third")
    graph.add_edge("third", END)
    with pytest.warns(UnreachableNodesWarning) as record:
        app = graph.compile()
    assert [w.message.nodes for w in record] == [["second", "third"]]  # type: ignore[union-attr]
    result = await app.ainvoke(inp("hi"))
    assert texts(result["messages"]) == ["hi", "second ran", "third ran"]


async def test_nodes_nothing_leads_to_compile_and_the_reachable_ones_run() -> None:
    """10xgraph's "parallel agents": one entry, every agent leading to END."""
    graph = StateGraph()
    for i in range(1, 4):
        graph.add_node(f"agent_{i}", say(f"agent {i}"))
        graph.add_edge(f"agent_{i}", END)
    graph.set_entry_point("agent_1")
    with pytest.warns(UnreachableNodesWarning, match=r"\['agent_2', 'agent_3'\]"):
        app = graph.compile()
    result = await app.ainvoke(inp("hi"))
    assert texts(result["messages"]) == ["hi", "agent 1"]


def test_10xgraphs_builder_parameters_are_taken_and_each_one_given_is_warned_about() -> None:
    with pytest.warns(UserWarning, match=r"StateGraph\(publisher=\.\.\.\) has no effect") as seen:
        graph = StateGraph(AgentState, publisher=object(), id_generator=None)
    assert len(seen) == 1  # the one given, not the one left at None
    graph.add_node("only", say("ok"))
    graph.add_edge(START, "only")
    with pytest.warns(UserWarning, match=r"compile\(callback_manager=\.\.\.\) has no effect"):
        graph.compile(callback_manager=object())
    with pytest.raises(TypeError, match=r"compile\(media_store=\.\.\.\) takes a tenxgraph"):
        graph.compile(media_store=object())  # supported now: a MediaStore
    with pytest.raises(TypeError, match=r"compile\(store=\.\.\.\) takes a tenxgraph"):
        graph.compile(store=object())  # type: ignore[arg-type]


def test_a_parameter_neither_framework_has_is_refused() -> None:
    with pytest.raises(TypeError, match="publsher"):
        StateGraph(AgentState, publsher=object())  # type: ignore[call-arg]
    graph = StateGraph()
    graph.add_node("only", say("ok"))
    graph.add_edge(START, "only")
    with pytest.raises(TypeError, match="checkpointr"):
        graph.compile(checkpointr=None)  # type: ignore[call-arg]


def test_10xgraphs_import_path_of_the_base_context_manager_works() -> None:
    from tenxgraph.core.state import BaseContextManager
    from tenxgraph.core.state.base_context import BaseContextManager as Same

    assert Same is BaseContextManager
