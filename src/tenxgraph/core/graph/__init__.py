"""The graph: `StateGraph` (builder) -> `CompiledGraph` (the app) -> the engine (one loop);
the `Agent` node that calls models and the `ToolNode` that runs tools.

Each name is imported on first use: a graph without an Agent never loads the model clients."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenxgraph._lazy import lazy_getattr

if TYPE_CHECKING:
    from tenxgraph.core.graph.agent import Agent
    from tenxgraph.core.graph.compiled_graph import CompiledGraph
    from tenxgraph.core.graph.results import RunResult
    from tenxgraph.core.graph.state_graph import StateGraph
    from tenxgraph.core.graph.tool_node import ToolNode
    from tenxgraph.core.llm.retry import RetryConfig

_LAZY = {
    "Agent": "tenxgraph.core.graph.agent",
    "CompiledGraph": "tenxgraph.core.graph.compiled_graph",
    "RunResult": "tenxgraph.core.graph.results",
    "StateGraph": "tenxgraph.core.graph.state_graph",
    "ToolNode": "tenxgraph.core.graph.tool_node",
    "RetryConfig": "tenxgraph.core.llm.retry",
}

__getattr__ = lazy_getattr(__name__, globals(), _LAZY)


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = ["Agent", "CompiledGraph", "RetryConfig", "RunResult", "StateGraph", "ToolNode"]
