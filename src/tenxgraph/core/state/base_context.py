"""10xgraph's import path of `BaseContextManager`, kept so that its code runs unchanged."""

from tenxgraph.core.state.context_manager import BaseContextManager

__all__ = ["BaseContextManager"]
