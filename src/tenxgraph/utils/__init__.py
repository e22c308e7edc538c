"""Public helpers: constants, enums, `Command`, `Send` and the `@tool` decorator.

`Command`, `Send` and `tool` are imported on first use: the state models need only the
constants."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenxgraph._lazy import lazy_getattr
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

# eager: the function `interrupt` shares its name with its module, which would hide it once
# the module is imported by something else
from tenxgraph.utils.interrupt import GraphInterrupt, Interrupt, interrupt, pending_interrupt

if TYPE_CHECKING:
    from tenxgraph.utils.command import Command
    from tenxgraph.utils.decorators import tool
    from tenxgraph.utils.send import Send

_LAZY = {
    "Command": "tenxgraph.utils.command",
    "tool": "tenxgraph.utils.decorators",
    "Send": "tenxgraph.utils.send",
}

__getattr__ = lazy_getattr(__name__, globals(), _LAZY)


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


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
