"""Small builders shared by the graph tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal

from tenxgraph.core.graph import CompiledGraph, StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer.base import BaseCheckpointer
from tenxgraph.utils.constants import END, START


def user(text: str) -> Message:
    return Message.text_message(text, "user")


def ai(text: str) -> Message:
    return Message.text_message(text, "assistant")


def inp(*texts: str, **state: Any) -> dict[str, Any]:
    """A run input with one user message per text, and `state` updates if given."""
    data: dict[str, Any] = {"messages": [user(t) for t in texts]}
    if state:
        data["state"] = state
    return data


def texts(messages: Iterable[Message]) -> list[str]:
    return [m.text() for m in messages]


def chain(
    *nodes: Callable[..., Any] | tuple[str, Callable[..., Any]],
    state: AgentState | type[AgentState] | None = None,
) -> StateGraph:
    """START -> n1 -> n2 -> ... -> END; a node is a function or a (name, function) pair."""
    graph = StateGraph(state)
    names = []
    for node in nodes:
        if isinstance(node, tuple):
            graph.add_node(*node)
            names.append(node[0])
        else:
            graph.add_node(node)
            names.append(node.__name__)
    for a, b in zip([START, *names], [*names, END], strict=True):
        graph.add_edge(a, b)
    return graph


def linear(
    *nodes: Callable[..., Any] | tuple[str, Callable[..., Any]],
    state: AgentState | type[AgentState] | None = None,
    checkpointer: BaseCheckpointer | Literal[False] | None = None,
) -> CompiledGraph:
    return chain(*nodes, state=state).compile(checkpointer=checkpointer)
