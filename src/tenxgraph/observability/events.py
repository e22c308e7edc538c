"""What a run tells its hooks: one frozen record per thing that happened.

Records carry names, ids, timings, counts and errors, never message contents: a hook that
wants the conversation reads it from the state (`aget_state`) on purpose. The one record with
data of the run's is `Interrupted.data`: the interrupt as the caller gets it, so the question
an `interrupt()` asked, and for a tool approval the pending calls with their arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tenxgraph.core.state.message import TokenUsages
from tenxgraph.core.state.usage import Usage


@dataclass(frozen=True, slots=True)
class RunStarted:
    run_id: str
    thread_id: str
    graph: str


@dataclass(frozen=True, slots=True)
class RunFinished:
    """`status` is ``"completed"``, ``"interrupted"`` (paused for a person, or stopped),
    ``"error"`` (`error` says which), or ``"cancelled"`` (its task was cancelled, or the
    consumer of `astream` stopped reading); `usage` is what this run's model calls cost."""

    run_id: str
    thread_id: str
    graph: str
    status: str
    duration: float  # seconds
    usage: Usage
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class NodeStarted:
    run_id: str
    thread_id: str
    node: str
    step: int


@dataclass(frozen=True, slots=True)
class NodeFinished:
    run_id: str
    thread_id: str
    node: str
    step: int
    duration: float
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class ModelCallFinished:
    """One call to one model (each retry and fallback is a call of its own). `cost` is in
    US dollars from litellm's price table, None when the model has no known price."""

    run_id: str
    thread_id: str
    node: str | None
    model: str
    provider: str | None
    streamed: bool
    duration: float
    usage: TokenUsages | None = None
    cost: float | None = None
    finish_reason: str | None = None
    time_to_first_token: float | None = None
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """One tool call; `replayed` when its recorded result was used instead of running it."""

    run_id: str
    thread_id: str
    node: str
    tool: str
    call_id: str
    duration: float
    is_error: bool
    replayed: bool
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class Interrupted:
    """The run paused: at a breakpoint, an `interrupt()` call, or a stop request. `data` is
    the interrupt as the run's result gives it (``result["interrupt"]``), None for a
    breakpoint or a stop: what was asked, which for a tool approval includes the arguments
    the model gave the pending calls."""

    run_id: str
    thread_id: str
    node: str
    reason: str
    data: dict[str, Any] | None = None


Event = (
    RunStarted
    | RunFinished
    | NodeStarted
    | NodeFinished
    | ModelCallFinished
    | ToolFinished
    | Interrupted
)

__all__ = [
    "Event",
    "Interrupted",
    "ModelCallFinished",
    "NodeFinished",
    "NodeStarted",
    "RunFinished",
    "RunStarted",
    "ToolFinished",
]
