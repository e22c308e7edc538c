"""The graph: `StateGraph` (builder) -> `CompiledGraph` (the app) -> the engine (one loop);
the `Agent` node that calls models and the `ToolNode` that runs tools."""

from tenxgraph.core.graph.agent import Agent
from tenxgraph.core.graph.compiled_graph import CompiledGraph
from tenxgraph.core.graph.state_graph import StateGraph
from tenxgraph.core.graph.tool_node import ToolNode
from tenxgraph.core.llm.retry import RetryConfig

__all__ = ["Agent", "CompiledGraph", "RetryConfig", "StateGraph", "ToolNode"]
