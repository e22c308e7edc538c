"""Names and defaults shared by the whole runtime."""

from __future__ import annotations

from enum import StrEnum
from typing import Final

START: Final = "__start__"
END: Final = "__end__"

DEFAULT_NODE_TIMEOUT_SECONDS: Final = 900.0
DEFAULT_TOOL_TIMEOUT_SECONDS: Final = 300.0
DEFAULT_RECURSION_LIMIT: Final = 25
DEFAULT_MAX_PARALLEL_TOOLS: Final = 8
DEFAULT_ANONYMOUS_USER_ID: Final = "anonymous"
DEFAULT_ENQUEUE_TIMEOUT_SECONDS: Final = 300.0


class ResponseGranularity(StrEnum):
    """How much of the final state `invoke` returns and `stream` yields."""

    FULL = "full"
    PARTIAL = "partial"
    LOW = "low"


class ExecutionState(StrEnum):
    """Coarse run status of the 10xgraph API (unrelated to `core.state.ExecutionState`)."""

    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    ERROR = "error"
    INTERRUPTED = "interrupted"
    ABORTED = "aborted"
    IDLE = "idle"


__all__ = [
    "DEFAULT_ANONYMOUS_USER_ID",
    "DEFAULT_ENQUEUE_TIMEOUT_SECONDS",
    "DEFAULT_MAX_PARALLEL_TOOLS",
    "DEFAULT_NODE_TIMEOUT_SECONDS",
    "DEFAULT_RECURSION_LIMIT",
    "DEFAULT_TOOL_TIMEOUT_SECONDS",
    "END",
    "START",
    "ExecutionState",
    "ResponseGranularity",
]
