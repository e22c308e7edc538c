"""Core runtime: the state model and the exceptions."""

from tenxgraph.core.exceptions import (
    GraphError,
    GraphRecursionError,
    NodeError,
    NodeTimeoutError,
    StorageError,
)
from tenxgraph.core.state import *  # noqa: F403
from tenxgraph.core.state import __all__ as _state_all

__all__ = [
    "GraphError",
    "GraphRecursionError",
    "NodeError",
    "NodeTimeoutError",
    "StorageError",
    *_state_all,
]
