"""How a run inside a node of another (a subgraph's) knows the run it is nested in."""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from tenxgraph.core.graph.engine import Run


class Nesting(NamedTuple):
    """A run inside a node of another (a subgraph): where its chunks say they come from."""

    namespace: tuple[str, ...]
    thread_id: str  # the outermost run's thread and run, which its chunks carry
    run_id: str


#: the run whose node is running in this context (a subgraph node's run is nested in it)
current_run: ContextVar[Run | None] = ContextVar("tenxgraph_current_run", default=None)


__all__ = ["Nesting", "current_run"]
