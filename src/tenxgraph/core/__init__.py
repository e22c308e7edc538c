"""Core runtime: the state model and exceptions (eager); the graph classes (on first use)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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
    from tenxgraph.core.graph import CompiledGraph, StateGraph

_LAZY = {"StateGraph": "tenxgraph.core.graph", "CompiledGraph": "tenxgraph.core.graph"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tenxgraph.core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "CompiledGraph",
    "GraphError",
    "GraphRecursionError",
    "NodeError",
    "NodeTimeoutError",
    "StateGraph",
    "StorageError",
    *_state_all,
]
