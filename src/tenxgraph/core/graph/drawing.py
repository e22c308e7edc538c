"""Drawing a compiled graph: `app.get_graph()` lists its nodes and edges, and
`draw_mermaid()` turns them into a Mermaid flowchart any Markdown viewer renders.

How each edge is drawn:

- a plain edge is a solid arrow; several out of one node are a parallel fan-out;
- a conditional edge with a path map is one dotted arrow per target, labelled with the
  condition's result(s) that lead there (END shown as ``END``);
- a conditional edge without a path map has no known targets. If the condition's return
  annotation is a ``Literal`` of node names (``-> Literal["a", "b", "__end__"]``) those are
  drawn as unlabelled dotted arrows; otherwise a dotted arrow leads to a diamond named after
  the condition, saying it may choose any node. A node whose return annotation mentions
  `Command` gets the same diamond (``Command(goto=...)``);
- a node with no way out ends its branch: it gets a solid arrow to END.

`Agent` nodes are drawn rounded and show their model; `ToolNode` nodes as a subroutine box
listing their tools.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tenxgraph.core.graph.agent import Agent
from tenxgraph.core.graph.node import NodeSpec
from tenxgraph.core.graph.routing import Branch, Routing
from tenxgraph.core.graph.tool_node import ToolNode
from tenxgraph.utils.constants import END, START

NodeKind = Literal["start", "end", "agent", "tools", "node", "choice"]

_MAX_TOOLS_SHOWN = 5
_RESERVED_IDS = frozenset(
    {"end", "graph", "subgraph", "flowchart", "style", "class", "classdef", "click", "call"}
    | {"linkstyle", "default", "direction", "href", "interpolate"}
)
# Characters Mermaid (or the Markdown it renders labels with, as GitHub does) would read as
# syntax; they are written as Mermaid entity codes.
_ENTITIES = {
    "#": "#35;",
    '"': "#quot;",
    "<": "#lt;",
    ">": "#gt;",
    "|": "#124;",
    "*": "#42;",
    "`": "#96;",
    "[": "#91;",
    "]": "#93;",
}
_EDGE_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")  # would start emphasis


@dataclass(frozen=True, slots=True)
class GraphNode:
    """A node to draw: its name in the graph, what it is, and an optional second line."""

    name: str
    kind: NodeKind
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class GraphEdge:
    """An edge to draw; `conditional` edges are dotted, `label` is what routes along it."""

    source: str
    target: str
    conditional: bool = False
    label: str | None = None


@dataclass(slots=True)
class DrawableGraph:
    """A graph's shape, for drawing: nodes by name (START and END included when used, and a
    diamond per condition whose targets are unknown), and edges in a stable order."""

    nodes: dict[str, GraphNode] = field(default_factory=dict)
    edges: list[GraphEdge] = field(default_factory=list)

    def draw_mermaid(self) -> str:
        """The graph as a Mermaid ``flowchart TD``: paste it into a ```` ```mermaid ````
        block of any Markdown file."""
        ids = _mermaid_ids(self.nodes)
        lines = ["flowchart TD"]
        for name, node in self.nodes.items():
            lines.append(f"    {ids[name]}{_shape(node)}")
        for edge in self.edges:
            arrow = "-.->" if edge.conditional else "-->"
            label = f'|"{_escape(edge.label)}"|' if edge.label else ""
            lines.append(f"    {ids[edge.source]} {arrow}{label} {ids[edge.target]}")
        return "\n".join(lines) + "\n"


def graph_of(specs: Mapping[str, NodeSpec], routing: Routing) -> DrawableGraph:
    """The drawable shape of a compiled graph's nodes and routing."""
    drawn = DrawableGraph()
    drawn.nodes[START] = GraphNode(START, "start")
    known = {*specs, END}
    for name, spec in specs.items():
        drawn.nodes[name] = _node(name, spec.func)
    for source in (START, *specs):
        static = routing.static.get(source, ())
        branches = routing.branches.get(source, ())
        for target in static:
            drawn.edges.append(GraphEdge(source, target))
        for index, branch in enumerate(branches):
            _add_branch(drawn, branch, index, known)
        compiled = specs.get(source)
        if compiled is not None and compiled.dynamic_goto:
            _add_choice(drawn, source, f"{source}:command", "Command(goto=...)")
        elif source != START and not static and not branches:
            drawn.edges.append(GraphEdge(source, END))  # an edge-less node ends its branch
    if any(edge.target == END for edge in drawn.edges):
        drawn.nodes[END] = GraphNode(END, "end")
    return drawn


def _node(name: str, func: Any) -> GraphNode:
    if isinstance(func, Agent):
        model = func.model
        shown = model if isinstance(model, str) else getattr(model, "model_name", None)
        return GraphNode(name, "agent", f"Agent({shown or type(model).__name__})")
    if isinstance(func, ToolNode):
        tools = list(func.tools)
        listed = ", ".join(tools[:_MAX_TOOLS_SHOWN])
        if len(tools) > _MAX_TOOLS_SHOWN:
            listed += f" +{len(tools) - _MAX_TOOLS_SHOWN} more"
        return GraphNode(name, "tools", f"ToolNode: {listed}" if tools else "ToolNode")
    return GraphNode(name, "node")


def _add_branch(drawn: DrawableGraph, branch: Branch, index: int, known: set[str]) -> None:
    if branch.path_map is not None:
        labels: dict[str, list[str]] = {}
        for key, target in branch.path_map.items():
            labels.setdefault(target, []).append(_display(key))
        for target, keys in labels.items():
            drawn.edges.append(GraphEdge(branch.source, target, True, ", ".join(keys)))
        return
    targets = [t for t in literal_targets(branch.condition) or () if t in known]
    if targets:
        for target in targets:
            drawn.edges.append(GraphEdge(branch.source, target, True))
        return
    name = getattr(branch.condition, "__name__", None) or type(branch.condition).__name__
    _add_choice(drawn, branch.source, f"{branch.source}:condition:{index}", f"{name}()")


def _add_choice(drawn: DrawableGraph, source: str, key: str, what: str) -> None:
    drawn.nodes[key] = GraphNode(key, "choice", what)
    drawn.edges.append(GraphEdge(source, key, True))


def literal_targets(condition: Callable[..., Any]) -> list[str] | None:
    """The node names a condition can return, from a ``Literal[...]`` (or a list of one)
    return annotation; None when its annotation does not say."""
    plain = inspect.isfunction(condition) or inspect.ismethod(condition)
    hints_of = condition if plain else getattr(condition, "__call__", None)  # noqa: B004
    try:
        returned = typing.get_type_hints(hints_of).get("return")
    except Exception:  # unresolvable forward references: the annotation does not say
        return None
    if returned is None:
        return None
    if typing.get_origin(returned) in (list, tuple, set, frozenset):
        args = typing.get_args(returned)
        returned = args[0] if args else None
    if typing.get_origin(returned) is not Literal:
        return None
    values = typing.get_args(returned)
    if not values or not all(isinstance(v, str) for v in values):
        return None
    return list(dict.fromkeys(values))


def _display(key: object) -> str:
    if key == END:
        return "END"
    if key == START:
        return "START"
    return str(key)


def _escape(text: str) -> str:
    escaped = "".join(_ENTITIES.get(ch, ch) for ch in text)
    return _EDGE_UNDERSCORE.sub("#95;", escaped)


def _label(node: GraphNode) -> str:
    if node.kind == "start":
        return "START"
    if node.kind == "end":
        return "END"
    if node.kind == "choice":
        return f"{_escape(node.detail or '?')}<br/>any node"
    head = _escape(node.name)
    return head if node.detail is None else f"{head}<br/>{_escape(node.detail)}"


def _shape(node: GraphNode) -> str:
    text = _label(node)
    return {
        "start": '(["{}"])',
        "end": '(["{}"])',
        "agent": '("{}")',
        "tools": '[["{}"]]',
        "node": '["{}"]',
        "choice": '{{"{}"}}',
    }[node.kind].format(text)


def _mermaid_ids(nodes: Iterable[str]) -> dict[str, str]:
    """Safe, unique Mermaid ids: letters, digits and underscores, no keyword (``end``)."""
    ids: dict[str, str] = {}
    used: set[str] = set()
    for name in nodes:
        base = re.sub(r"[^0-9A-Za-z_]", "_", name) or "node"
        if base[0].isdigit():
            base = "n_" + base
        if base.lower() in _RESERVED_IDS:
            base += "_"
        candidate, n = base, 2
        while candidate in used:
            candidate, n = f"{base}_{n}", n + 1
        used.add(candidate)
        ids[name] = candidate
    return ids


__all__ = ["DrawableGraph", "GraphEdge", "GraphNode", "graph_of", "literal_targets"]
