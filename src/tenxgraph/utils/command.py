"""`Command`: a node's way to update state and choose where the run goes next."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from tenxgraph.utils.send import Send


class Command:
    """Returned by a node: apply `update` (anything a node may return), then go to `goto`.

    `goto` is a node name, `END`, a `Send`, or a list of them (they run together in the next
    step); it replaces the node's outgoing edges for this step. With `graph=Command.PARENT`, a
    node (or a tool) of a subgraph ends the subgraph's run and routes in the graph that runs
    it: `update` is applied there, and `goto` names that graph's nodes.
    """

    PARENT: ClassVar[str] = "PARENT"

    __slots__ = ("goto", "graph", "state", "update")

    def __init__(
        self,
        update: Any = None,
        goto: str | Send | Sequence[str | Send] | None = None,
        graph: str | None = None,
        state: Any = None,
    ) -> None:
        if goto is not None and not isinstance(goto, str | Send):
            goto = list(goto)
            if not all(isinstance(name, str | Send) for name in goto):
                raise TypeError(f"Command(goto=...) takes node names or Sends, got {goto!r}")
        if graph is not None and graph != Command.PARENT:
            raise ValueError(
                f"Command(graph=...) takes None (this graph) or Command.PARENT, got {graph!r}"
            )
        self.update = update
        self.goto = goto
        self.graph = graph
        self.state = state

    def __repr__(self) -> str:
        return f"Command(update={self.update!r}, goto={self.goto!r}, graph={self.graph!r})"


class ParentCommand(BaseException):
    """A `Command(graph=Command.PARENT)` on its way out of a subgraph's run to the graph that
    runs it. A BaseException, so that `except Exception` in user code lets it through."""

    def __init__(self, command: Command) -> None:
        super().__init__(f"Command(graph=PARENT, goto={command.goto!r})")
        self.command = command
        self.state: Any = None  # the subgraph's state when it ended (set by its run)


__all__ = ["Command", "ParentCommand"]
