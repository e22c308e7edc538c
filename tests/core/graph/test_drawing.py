"""`app.get_graph()` and `draw_mermaid()`: nodes, plain and conditional edges, fan-outs, and
names Mermaid would otherwise misread."""

from __future__ import annotations

import itertools
import textwrap
from typing import Literal

from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.graph.drawing import GraphEdge, GraphNode, literal_targets
from tenxgraph.core.state import AgentState
from tenxgraph.prebuilt import ReactAgent, tools_condition
from tenxgraph.utils import Command
from tenxgraph.utils.constants import END, START


def node(state: AgentState) -> None:
    return None


def lookup(order_id: int) -> str:
    """Find an order."""
    return "found"


def refund(order_id: int) -> str:
    """Refund an order."""
    return "refunded"


def mermaid(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def test_react_agent() -> None:
    app = ReactAgent("openai/gpt-4o-mini", [lookup, refund]).compile()
    assert app.get_graph().draw_mermaid() == mermaid(
        """
        flowchart TD
            __start__(["START"])
            agent("agent<br/>Agent(openai/gpt-4o-mini)")
            tools[["tools<br/>ToolNode: lookup, refund"]]
            __end__(["END"])
            __start__ --> agent
            agent -.->|"tools"| tools
            agent -.->|"END"| __end__
            tools --> agent
        """
    )


def test_get_graph_lists_nodes_and_edges() -> None:
    app = ReactAgent("test", [lookup]).compile()
    drawn = app.get_graph()
    assert list(drawn.nodes) == [START, "agent", "tools", END]
    assert drawn.nodes["agent"] == GraphNode("agent", "agent", "Agent(test)")
    assert drawn.nodes["tools"] == GraphNode("tools", "tools", "ToolNode: lookup")
    assert drawn.edges == [
        GraphEdge(START, "agent"),
        GraphEdge("agent", "tools", conditional=True, label="tools"),
        GraphEdge("agent", END, conditional=True, label="END"),
        GraphEdge("tools", "agent"),
    ]


def test_parallel_fan_out_and_a_conditional_edge_with_a_path_map() -> None:
    graph = StateGraph()
    for name in ("plan", "search", "read", "merge", "review"):
        graph.add_node(name, node)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "search")  # fan-out: both run in the next step
    graph.add_edge("plan", "read")
    graph.add_edge("search", "merge")  # and join again
    graph.add_edge("read", "merge")
    graph.add_conditional_edges(
        "merge", lambda s: "ok", {"ok": END, "done": END, "again": "plan", "check": "review"}
    )
    assert graph.compile().get_graph().draw_mermaid() == mermaid(
        """
        flowchart TD
            __start__(["START"])
            plan["plan"]
            search["search"]
            read["read"]
            merge["merge"]
            review["review"]
            __end__(["END"])
            __start__ --> plan
            plan --> search
            plan --> read
            search --> merge
            read --> merge
            merge -.->|"ok, done"| __end__
            merge -.->|"again"| plan
            merge -.->|"check"| review
            review --> __end__
        """
    )


def test_a_condition_without_path_map_uses_its_literal_annotation() -> None:
    def route(state: AgentState) -> Literal["a", "b", "__end__"]:
        return "a"

    graph = StateGraph()
    graph.add_node("a", node)
    graph.add_node("b", node)
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", route)
    graph.add_edge("b", END)
    lines = graph.compile().get_graph().draw_mermaid().splitlines()
    assert "    a -.-> a" in lines
    assert "    a -.-> b" in lines
    assert "    a -.-> __end__" in lines
    assert literal_targets(route) == ["a", "b", "__end__"]


def test_literal_targets_of_lists_and_callables() -> None:
    def several(state: AgentState) -> list[Literal["x", "y"]]:
        return ["x", "y"]

    class Router:
        def __call__(self, state: AgentState) -> Literal["z"]:
            return "z"

    assert literal_targets(several) == ["x", "y"]
    assert literal_targets(Router()) == ["z"]
    assert literal_targets(tools_condition) is None  # -> str says nothing
    assert literal_targets(lambda s: "x") is None


def test_unknown_targets_lead_to_a_decision_note() -> None:
    class Goto(AgentState):
        pass

    def jump(state: Goto) -> Command:
        return Command(goto=END)

    graph = StateGraph()
    graph.add_node("agent", Agent("test", tool_node="tools"))
    graph.add_node("tools", ToolNode([lookup]))
    graph.add_node("jump", jump)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)  # no path map: any node
    graph.add_edge("tools", "jump")
    text = graph.compile().get_graph().draw_mermaid()
    assert '    agent_condition_0{"tools#95;condition()<br/>any node"}' not in text
    assert '    agent_condition_0{"tools_condition()<br/>any node"}' in text
    assert "    agent -.-> agent_condition_0" in text
    assert '    jump_command{"Command(goto=...)<br/>any node"}' in text
    assert "    jump -.-> jump_command" in text
    assert "__end__" not in text  # nothing is known to lead there


def test_names_mermaid_would_misread_are_made_safe() -> None:
    graph = StateGraph()
    names = ["end", "o node", 'say "hi"', "a|b", "__private__", "1st", "graph"]
    for name in names:
        graph.add_node(name, node)
    graph.add_edge(START, "end")
    for before, after in itertools.pairwise(names):
        graph.add_edge(before, after)
    text = graph.compile().get_graph().draw_mermaid()
    assert text.splitlines()[1:9] == [
        '    __start__(["START"])',
        '    end_["end"]',  # a bare `end` would close the flowchart
        '    o_node["o node"]',
        '    say__hi_["say #quot;hi#quot;"]',
        '    a_b["a#124;b"]',
        '    __private__["#95;#95;private#95;#95;"]',  # not bold in Markdown labels
        '    n_1st["1st"]',
        '    graph_["graph"]',
    ]
    assert "    end_ --> o_node" in text


def test_an_edge_less_node_ends_its_branch() -> None:
    graph = StateGraph()
    graph.add_node("only", node)
    graph.add_edge(START, "only")
    assert graph.compile().get_graph().draw_mermaid().splitlines()[-1] == "    only --> __end__"
