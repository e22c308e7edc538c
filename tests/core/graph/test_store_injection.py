"""The long-term store reaching nodes and tools: `compile(store=...)`, then any node or tool
taking a parameter named `store` gets that store, in every thread of the app."""

from __future__ import annotations

from typing import Any

import pytest

from tenxgraph.core.exceptions import GraphError
from tenxgraph.core.graph import StateGraph, ToolNode
from tenxgraph.core.graph.tool_spec import tool_spec
from tenxgraph.core.llm import FunctionModel
from tenxgraph.core.state import AgentState
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.storage.store import BaseStore, InMemoryStore
from tenxgraph.utils.constants import END, START
from tests._helpers import results, thread, tool_call
from tests.core.graph._support import inp, texts
from tests.core.llm._support import Script

USER = ("users", "u1")


async def count_visits(state: AgentState, store: BaseStore) -> str:
    """Counts the runs of every thread in the store, and says the count."""
    item = await store.aget(USER, "visits")
    n = 1 if item is None else item.value["n"] + 1
    await store.aput(USER, "visits", {"n": n})
    return f"visit {n}"


def one_node(node: Any) -> StateGraph:
    graph = StateGraph()
    graph.add_node("node", node)
    graph.add_edge(START, "node")
    graph.add_edge("node", END)
    return graph


async def test_a_node_reads_in_one_thread_what_it_wrote_in_another() -> None:
    store = InMemoryStore()
    app = one_node(count_visits).compile(store=store)
    first = await app.ainvoke(inp("hi"), thread())
    second = await app.ainvoke(inp("hi"), thread())
    assert texts(first["messages"])[-1] == "visit 1"
    assert texts(second["messages"])[-1] == "visit 2"
    item = await store.aget(USER, "visits")
    assert item is not None
    assert item.value == {"n": 2}


def test_a_sync_node_uses_the_sync_twins() -> None:
    def note(store: BaseStore, state: AgentState) -> str:
        store.put(("notes",), "last", {"text": state.context[-1].text()})
        item = store.get(("notes",), "last")
        assert item is not None
        return f"noted {item.value['text']}"

    store = InMemoryStore()
    result = one_node(note).compile(store=store).invoke(inp("tea"), thread())
    assert texts(result["messages"])[-1] == "noted tea"
    assert store.get(("notes",), "last") is not None


async def test_two_apps_have_their_own_stores() -> None:
    one, other = InMemoryStore(), InMemoryStore()
    graph = one_node(count_visits)
    await graph.compile(store=one).ainvoke(inp("hi"), thread())
    result = await graph.compile(store=other).ainvoke(inp("hi"), thread())
    assert texts(result["messages"])[-1] == "visit 1"  # not 2: `one` is not `other`
    assert [i.value for i in await one.asearch(USER)] == [{"n": 1}]


async def test_a_node_with_a_single_other_parameter_gets_the_state_and_the_store() -> None:
    async def echo(s: AgentState, store: BaseStore) -> str:
        await store.aput(("echo",), "k", {"text": s.context[-1].text()})
        return "ok"

    store = InMemoryStore()
    await one_node(echo).compile(store=store).ainvoke(inp("x"), thread())
    item = await store.aget(("echo",), "k")
    assert item is not None
    assert item.value == {"text": "x"}


def test_a_node_requiring_a_store_without_one_fails_at_compile_time() -> None:
    with pytest.raises(GraphError, match="takes a `store`, but the graph was compiled without"):
        one_node(count_visits).compile()


async def test_an_optional_store_parameter_gets_none_without_a_store() -> None:
    def maybe(state: AgentState, store: BaseStore | None = None) -> str:
        return "no store" if store is None else "store"

    result = await one_node(maybe).compile().ainvoke(inp("hi"), thread())
    assert texts(result["messages"])[-1] == "no store"
    result = await one_node(maybe).compile(store=InMemoryStore()).ainvoke(inp("hi"), thread())
    assert texts(result["messages"])[-1] == "store"


# -- tools ------------------------------------------------------------------------------------


async def remember(fact: str, store: BaseStore) -> str:
    """Remember a fact about the user."""
    await store.aput((*USER, "facts"), fact, {"fact": fact})
    return f"remembered {fact}"


def recall(store: BaseStore) -> list[str]:
    """What is known about the user."""
    return sorted(item.value["fact"] for item in store.search((*USER, "facts")))


def test_a_tools_schema_does_not_show_the_store() -> None:
    parameters = tool_spec(remember).schema["function"]["parameters"]
    assert list(parameters["properties"]) == ["fact"]
    assert parameters["required"] == ["fact"]
    assert "store" in tool_spec(remember).injected


async def test_a_react_agent_tool_saves_a_memory_that_a_later_thread_reads() -> None:
    script = Script(
        tool_call("remember", "r1", fact="likes tea"),
        "noted",
        tool_call("recall", "r2"),
        "you like tea",
    )
    store = InMemoryStore()
    app = ReactAgent(FunctionModel(script), [remember, recall]).compile(store=store)
    first = await app.ainvoke(inp("I like tea"), thread())
    second = await app.ainvoke(inp("what do I like?"), thread())
    assert results(first["messages"])["r1"].output == "remembered likes tea"
    assert results(second["messages"])["r2"].output == ["likes tea"]
    shown = {t["function"]["name"]: t["function"]["parameters"] for t in script.infos[0].tools}
    assert "store" not in shown["remember"]["properties"]
    assert shown["recall"]["properties"] == {}


def test_a_tool_requiring_a_store_without_one_fails_at_compile_time() -> None:
    with pytest.raises(GraphError, match=r"tools that take a `store` \(\['recall', 'remember'\]\)"):
        ReactAgent(FunctionModel(Script()), [remember, recall]).compile()


async def test_a_tool_node_run_alone_passes_the_store_it_is_given() -> None:
    store = InMemoryStore()
    message = await ToolNode([remember]).invoke("remember", {"fact": "x"}, "c1", store=store)
    assert message.content[0].output == "remembered x"  # type: ignore[union-attr]
    assert await store.aget((*USER, "facts"), "x") is not None


def test_a_mock_node_is_not_taken_for_a_tool_node() -> None:
    from unittest.mock import MagicMock

    node = MagicMock(return_value="ok")
    node.__signature__ = None  # called with the state, as any callable without a signature
    one_node(node).compile()  # no store asked for: no GraphError


async def test_the_app_shows_its_store_and_an_overriding_node_gets_it() -> None:
    store = InMemoryStore()
    app = one_node(lambda state: "old").compile(store=store)
    assert app.store is store
    assert one_node(lambda state: "x").compile().store is None
    app.override_node("node", count_visits)
    result = await app.ainvoke(inp("hi"), thread())
    assert texts(result["messages"])[-1] == "visit 1"
    assert await store.aget(USER, "visits") is not None
