"""`Command`: a node's way to update state and choose where the run goes next."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar


class Command:
    """Returned by a node: apply `update` (anything a node may return), then go to `goto`.

    `goto` is a node name, `END`, or a list of names (they run together in the next step); it
    replaces the node's outgoing edges for this step. `graph=Command.PARENT` is reserved for
    nested graphs.
    """

    PARENT: ClassVar[str] = "PARENT"

    __slots__ = ("goto", "graph", "state", "update")

    def __init__(
        self,
        update: Any = None,
        goto: str | Sequence[str] | None = None,
        graph: str | None = None,
        state: Any = None,
    ) -> None:
        if goto is not None and not isinstance(goto, str):
            goto = list(goto)
            if not all(isinstance(name, str) for name in goto):
                raise TypeError(f"Command(goto=...) takes node names, got {goto!r}")
        self.update = update
        self.goto = goto
        self.graph = graph
        self.state = state

    def __repr__(self) -> str:
        return f"Command(update={self.update!r}, goto={self.goto!r}, graph={self.graph!r})"


__all__ = ["Command"]
