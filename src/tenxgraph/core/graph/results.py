"""The types of what a run gives back: `RunResult[StateT]`, the dict `ainvoke`/`invoke` return.

Types only: a `RunResult` is a plain dict at runtime, built by the engine; nothing here runs
per run. `StateT` is the state type a `StateGraph` and its `CompiledGraph` are generic in.
"""

# (no `from __future__ import annotations`: TypedDict reads Required/NotRequired at runtime)
from typing import Any, Generic, NotRequired, Required, TypedDict

from typing_extensions import TypeVar

from tenxgraph.core.state import AgentState, Message

#: The state type of a graph: `StateGraph(MyState).compile()` is a `CompiledGraph[MyState]`.
#: Covariant (a `CompiledGraph[MyState]` is a `CompiledGraph[AgentState]`: its state is only
#: given out), and `AgentState` where none is named (a bare `CompiledGraph`).
StateT = TypeVar("StateT", bound=AgentState, default=AgentState, covariant=True)


class Interrupted(TypedDict):
    """`result["interrupted"]`: where and why a paused run stopped."""

    node: str | None
    reason: str | None
    status: str


class RunResult(TypedDict, Generic[StateT], total=False):
    """What `ainvoke`/`invoke` return (a dict), by `response_granularity`:

    - always: `messages` (the turn's user message and the messages the run produced) and
      `token_usage` (what its model calls cost);
    - ``"partial"``: also `context` (the thread's history) and `summary` (its
      `context_summary`);
    - ``"full"``: also `state`, the thread's state, of the graph's state type;
    - a paused run (not ``"full"``): `interrupted` (`node`, `reason`, `status`) and, when the
      pause asks a question (`interrupt()`, a tool approval), `interrupt` (the `Interrupt`,
      as a dict);
    - a run a budget ended: `budget` (`ended_by`, ``thread.<limit>`` for a thread budget's;
      `scope`, ``"run"`` or ``"thread"``; the run's `limits` and `spent`; with a thread
      budget, `thread`: its `limits` and the thread's totals, `spent`).
    """

    messages: Required[list[Message]]
    token_usage: Required[dict[str, Any]]
    context: NotRequired[list[Message]]
    summary: NotRequired[str | None]
    state: NotRequired[StateT]
    interrupted: NotRequired[Interrupted]
    interrupt: NotRequired[dict[str, Any]]
    budget: NotRequired[dict[str, Any]]


__all__ = ["Interrupted", "RunResult", "StateT"]
