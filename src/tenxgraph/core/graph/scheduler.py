"""`Scheduler`: which nodes run in a run's next super-step.

After a step, each node that ran leads on through its `Command(goto=...)` or, without one,
through its edges and conditions; a `Send` among them runs its node once with its payload.
A join (a node several branches lead to) waits while a node that leads to it is still
pending; such nodes are deferred to a later step.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from tenxgraph.core.exceptions import GraphError
from tenxgraph.core.graph.node import NO_ARG, NodeOutput, NodeSpec
from tenxgraph.core.graph.program import Program
from tenxgraph.core.graph.routing import check_send
from tenxgraph.core.state import AgentState
from tenxgraph.utils.constants import END
from tenxgraph.utils.send import Send


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
        """The nodes of the next step, after the nodes `names` ran and returned `outputs`:
        those the edges lead to in graph order, then one run per `Send`, in the order sent."""
        nodes = self.program.specs
        led_to: list[str | Send] | None = None  # where one node's edges lead, if asked
        if len(names) == 1 and not self.deferred:
            out = outputs[0]
            if out is None or out.goto is None:  # one node's edges and conditions decide
                led_to = await self.targets(state, names[0])
                following = [t for t in led_to if t != END]
                if not following:
                    return []
                if len(following) == 1 and type(following[0]) is str:  # not a Send
                    return [nodes[following[0]]]
        pending = set(self.deferred)
        sends: list[Send] = []
        for name, out in zip(names, outputs, strict=True):
            if out is not None and out.goto is not None:
                targets: Sequence[str | Send] = out.goto
                for target in targets:
                    if isinstance(target, Send):
                        check_send(target, name, nodes)
                    elif target != END and target not in nodes:
                        raise GraphError(
                            f"Node {name!r} returned Command(goto={target!r}), which is not a "
                            f"node of this graph; use one of {sorted(nodes)} or END",
                            "GRAPH_004",
                            {"node": name, "goto": target},
                        )
            else:
                targets = led_to if led_to is not None else await self.targets(state, name)
            for target in targets:
                if isinstance(target, Send):
                    sends.append(target)
                elif target != END:
                    pending.add(target)
        if not pending:
            self.deferred = set()
            return self._sent(sends)
        return self._runnable(pending) + self._sent(sends)

    async def targets(self, state: AgentState, name: str) -> list[str | Send]:
        """Where node `name`'s edges and conditions lead (END included)."""
        routing = self.program.routing
        targets: list[str | Send] = list(routing.static.get(name, ()))
        for branch in routing.branches.get(name, ()):
            value = branch.call(state, self.node_config)
            if branch.is_async or inspect.isawaitable(value):
                value = await value
            targets.extend(branch.resolve(value, self.program.specs))
        return targets

    def resume(self, names: Sequence[Any], deferred: Sequence[str]) -> list[NodeSpec]:
        """The step an unfinished run stopped before, as `recorded` wrote it."""
        nodes = self.program.specs
        self.deferred = set(deferred)
        plain = sorted((nodes[n] for n in names if isinstance(n, str) and n in nodes), key=by_index)
        sends = [
            Send(item["send"], item.get("arg"))
            for item in names
            if isinstance(item, dict) and item.get("send") in nodes
        ]
        return plain + self._sent(sends)

    def _sent(self, sends: list[Send]) -> list[NodeSpec]:
        """One run per `Send`: the i-th to a node in a step is its run "name[i]"."""
        if not sends:
            return []
        nodes, counts = self.program.specs, dict[str, int]()
        runs = []
        for send in sends:
            number = counts[send.node] = counts.get(send.node, -1) + 1
            runs.append(nodes[send.node].sent(send.arg, number))
        return runs

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


def recorded(frontier: Sequence[NodeSpec]) -> list[Any]:
    """A step's nodes as the thread keeps them, to continue an unfinished run: their names,
    and for a node run by a `Send` its payload too."""
    return [s.name if s.arg is NO_ARG else {"send": s.name, "arg": s.arg} for s in frontier]


__all__ = ["Scheduler", "by_index", "recorded"]
