"""Core runtime: the state model and exceptions (eager); the graph classes (on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenxgraph._lazy import lazy_getattr
from tenxgraph.core.exceptions import (
    GraphError,
    GraphRecursionError,
    NodeError,
    NodeTimeoutError,
    StorageError,
)
from tenxgraph.core.state import *  # noqa: F403
from tenxgraph.core.state import __all__ as _state_all

if TYPE_CHECKING:
    from tenxgraph.core.graph import Agent, CompiledGraph, RetryConfig, StateGraph, ToolNode

_LAZY = {
    name: "tenxgraph.core.graph"
    for name in ("Agent", "CompiledGraph", "RetryConfig", "StateGraph", "ToolNode")
}


__getattr__ = lazy_getattr(__name__, globals(), _LAZY)


__all__ = [
    "Agent",
    "CompiledGraph",
    "GraphError",
    "GraphRecursionError",
    "NodeError",
    "NodeTimeoutError",
    "RetryConfig",
    "StateGraph",
    "StorageError",
    "ToolNode",
    *_state_all,
]
