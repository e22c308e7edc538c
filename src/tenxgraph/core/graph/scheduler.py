"""`Scheduler`: which nodes run in a run's next super-step.

After a step, each node that ran leads on through its `Command(goto=...)` or, without one,
through its edges and conditions. A join (a node several branches lead to) waits while a node
that leads to it is still pending; such nodes are deferred to a later step.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from tenxgraph.core.exceptions import GraphError
from tenxgraph.core.graph.node import NodeOutput, NodeSpec
from tenxgraph.core.graph.program import Program
from tenxgraph.core.state import AgentState
from tenxgraph.utils.constants import END


class Scheduler:
    """One run's next steps: the nodes to run and those deferred (joins waiting)."""

    __slots__ = ("deferred", "node_config", "program")

    def __init__(self, program: Program, node_config: dict[str, Any]) -> None:
        self.program = program
        self.node_config = node_config
        self.deferred: set[str] = set()

    async def next(
        self, state: AgentState, names: Sequence[str], outputs: Sequence[NodeOutput | None]
    ) -> list[NodeSpec]:
        """The nodes of the next step, in graph order, after the nodes `names` ran and
        returned `outputs`."""
        nodes = self.program.specs
        if len(names) == 1 and not self.deferred:
            out = outputs[0]
            if out is None or out.goto is None:  # one node's edges and conditions decide
                led_to = await self.targets(state, names[0])
                following = [t for t in led_to if t != END]
                if len(following) <= 1:  # nothing to wait for or to order
                    return [nodes[t] for t in following]
                return self._runnable(set(following))
        pending = set(self.deferred)
        for name, out in zip(names, outputs, strict=True):
            if out is not None and out.goto is not None:
                targets: Sequence[str] = out.goto
                for target in targets:
                    if target != END and target not in nodes:
                        raise GraphError(
                            f"Node {name!r} returned Command(goto={target!r}), which is not a "
                            f"node of this graph; use one of {sorted(nodes)} or END",
                            "GRAPH_004",
                            {"node": name, "goto": target},
                        )
            else:
                targets = await self.targets(state, name)
            pending.update(t for t in targets if t != END)
        if not pending:
            self.deferred = set()
            return []
        return self._runnable(pending)

    async def targets(self, state: AgentState, name: str) -> list[str]:
        """Where node `name`'s edges and conditions lead (END included)."""
        routing = self.program.routing
        targets = list(routing.static.get(name, ()))
        for branch in routing.branches.get(name, ()):
            value = branch.call(state, self.node_config)
            if branch.is_async or inspect.isawaitable(value):
                value = await value
            targets.extend(branch.resolve(value, self.program.specs))
        return targets

    def resume(self, names: Sequence[str], deferred: Sequence[str]) -> list[NodeSpec]:
        """The step an unfinished run stopped before, as it recorded it."""
        nodes = self.program.specs
        self.deferred = set(deferred)
        return sorted((nodes[n] for n in names if n in nodes), key=by_index)

    def _runnable(self, pending: set[str]) -> list[NodeSpec]:
        """The pending nodes that may run now, in graph order; a join waits while a node
        that leads to it is pending too. The others are deferred."""
        routing = self.program.routing
        runnable = [
            n
            for n in pending
            if n not in routing.joins or not any(m != n and n in routing.reach[m] for m in pending)
        ] or list(pending)
        self.deferred = pending.difference(runnable)
        nodes = self.program.specs
        return sorted((nodes[n] for n in runnable), key=by_index)


def by_index(spec: NodeSpec) -> int:
    return spec.index


__all__ = ["Scheduler", "by_index"]
