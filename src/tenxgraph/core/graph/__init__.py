"""The graph: `StateGraph` (builder) -> `CompiledGraph` (the app) -> the engine (one loop)."""

from tenxgraph.core.graph.compiled_graph import CompiledGraph
from tenxgraph.core.graph.state_graph import StateGraph

__all__ = ["CompiledGraph", "StateGraph"]
