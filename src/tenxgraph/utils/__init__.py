"""Public helpers: constants, enums, `Command`, `Send` and the `@tool` decorator."""

from tenxgraph.utils.command import Command
from tenxgraph.utils.constants import (
    DEFAULT_ANONYMOUS_USER_ID,
    DEFAULT_ENQUEUE_TIMEOUT_SECONDS,
    DEFAULT_MAX_PARALLEL_TOOLS,
    DEFAULT_NODE_TIMEOUT_SECONDS,
    DEFAULT_RECURSION_LIMIT,
    DEFAULT_TOOL_TIMEOUT_SECONDS,
    END,
    START,
    ExecutionState,
    ResponseGranularity,
)
from tenxgraph.utils.decorators import tool
from tenxgraph.utils.interrupt import GraphInterrupt, Interrupt, interrupt, pending_interrupt
from tenxgraph.utils.send import Send

__all__ = [
    "DEFAULT_ANONYMOUS_USER_ID",
    "DEFAULT_ENQUEUE_TIMEOUT_SECONDS",
    "DEFAULT_MAX_PARALLEL_TOOLS",
    "DEFAULT_NODE_TIMEOUT_SECONDS",
    "DEFAULT_RECURSION_LIMIT",
    "DEFAULT_TOOL_TIMEOUT_SECONDS",
    "END",
    "START",
    "Command",
    "ExecutionState",
    "GraphInterrupt",
    "Interrupt",
    "ResponseGranularity",
    "Send",
    "interrupt",
    "pending_interrupt",
    "tool",
]
