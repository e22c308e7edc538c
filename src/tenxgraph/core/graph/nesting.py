"""How a run inside a node of another (a subgraph's) knows the run it is nested in."""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # types only: nothing of this is needed at run time
    from typing import Protocol

    from tenxgraph.core.graph.chunks import Chunks
    from tenxgraph.core.graph.program import Program
    from tenxgraph.core.graph.run_config import RunSettings
    from tenxgraph.core.state import AgentState, StreamEvent
    from tenxgraph.observability.observer import Observer


class Nesting(NamedTuple):
    """A run inside a node of another (a subgraph): where its chunks say they come from."""

    namespace: tuple[str, ...]
    thread_id: str  # the outermost run's thread and run, which its chunks carry
    run_id: str


if TYPE_CHECKING:

    class Parent(Protocol):
        """What a subgraph node reads of the run it runs in (an engine `Run`, which imports this
        module: named by its shape, not imported back)."""

        program: Program
        settings: RunSettings
        state: AgentState | None
        chunks: Chunks
        want: frozenset[StreamEvent]
        observer: Observer
        finished_children: list[str]  # subgraph threads to delete once the step is saved


#: the run whose node is running in this context (a subgraph node's run is nested in it)
current_run: ContextVar[Parent | None] = ContextVar("tenxgraph_current_run", default=None)


__all__ = ["Nesting", "current_run"]
