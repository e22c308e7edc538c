"""Core runtime: the state model and exceptions (eager); the graph classes (on first use)."""

# ruff: noqa: F401 - the names below are re-exported through `__all__` (built from state's)

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
from tenxgraph.core.state import (  # SummaryContextManager: on first use, below
    AgentState,
    AnnotationBlock,
    AnnotationRef,
    AudioBlock,
    BaseContextManager,
    ContentBlock,
    CustomEvent,
    DataBlock,
    DocumentBlock,
    ErrorBlock,
    ExecMeta,
    ExecutionState,
    ExecutionStatus,
    ImageBlock,
    MediaRef,
    Message,
    MessageContextManager,
    ReasoningBlock,
    StopRequestStatus,
    StreamChunk,
    StreamEvent,
    TextBlock,
    TokenUsages,
    ToolCallBlock,
    ToolResult,
    ToolResultBlock,
    VideoBlock,
    add_messages,
    append_items,
    remove_tool_messages,
    replace_messages,
    replace_value,
)
from tenxgraph.core.state import __all__ as _state_all

if TYPE_CHECKING:
    from tenxgraph.core.graph import Agent, CompiledGraph, RetryConfig, StateGraph, ToolNode
    from tenxgraph.core.llm.summary import SummaryContextManager

_LAZY = {
    name: "tenxgraph.core.graph"
    for name in ("Agent", "CompiledGraph", "RetryConfig", "StateGraph", "ToolNode")
}
_LAZY["SummaryContextManager"] = "tenxgraph.core.llm.summary"


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
