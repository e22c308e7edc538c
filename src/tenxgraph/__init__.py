"""tenxgraph: an async-first agent runtime.

The names below are imported on first use, so `import tenxgraph` stays cheap (and never imports
litellm).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenxgraph._lazy import lazy_getattr

__version__ = "0.1.0"

_LAZY: dict[str, str] = {
    "Agent": "tenxgraph.core.graph",
    "StateGraph": "tenxgraph.core.graph",
    "CompiledGraph": "tenxgraph.core.graph",
    "RunResult": "tenxgraph.core.graph",
    "ToolNode": "tenxgraph.core.graph",
    "AgentState": "tenxgraph.core.state",
    "Message": "tenxgraph.core.state",
    "START": "tenxgraph.utils.constants",
    "END": "tenxgraph.utils.constants",
}

if TYPE_CHECKING:
    from tenxgraph.core.graph import Agent, CompiledGraph, RunResult, StateGraph, ToolNode
    from tenxgraph.core.state import AgentState, Message
    from tenxgraph.utils.constants import END, START


__getattr__ = lazy_getattr(__name__, globals(), _LAZY)


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = [
    "END",
    "START",
    "Agent",
    "AgentState",
    "CompiledGraph",
    "Message",
    "RunResult",
    "StateGraph",
    "ToolNode",
    "__version__",
]
