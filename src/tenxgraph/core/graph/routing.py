"""Edges as compiled: where each node leads, and which nodes must wait for others (joins)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from tenxgraph.core.exceptions import GraphError
from tenxgraph.core.graph.node import make_caller
from tenxgraph.utils.constants import END, START
from tenxgraph.utils.record import Record
from tenxgraph.utils.send import Send

_SEVERAL = (list, tuple, set, frozenset)  # a condition that names several nodes at once


class Branch(Record):
    """A conditional edge: `condition` picks the next node(s), through `path_map` if given."""

    __match_args__ = ("source", "condition", "path_map", "call", "is_async")
    __slots__ = __match_args__

    def __init__(
        self,
        source: str,
        condition: Callable[..., Any],
        path_map: dict[Hashable, str] | None,
        call: Callable[[Any, dict[str, Any]], Any],
        is_async: bool,
    ) -> None:
        self.source = source
        self.condition = condition
        self.path_map = path_map
        self.call = call
        self.is_async = is_async

    @classmethod
    def build(
        cls,
        source: str,
        condition: Callable[..., Any],
        path_map: Mapping[Hashable, str] | Iterable[str] | None,
    ) -> Branch:
        mapping: dict[Hashable, str] | None
        if path_map is None:
            mapping = None
        elif isinstance(path_map, Mapping):
            mapping = dict(path_map)
        else:
            mapping = {name: name for name in path_map}
        call = make_caller(f"{source} (condition)", condition, what="Condition of")
        is_async = inspect.iscoroutinefunction(condition) or inspect.iscoroutinefunction(
            getattr(condition, "__call__", None)  # noqa: B004
        )
        return cls(source, condition, mapping, call, is_async)

    def targets(self) -> list[str] | None:
        """The nodes this branch can lead to, or None when any node is possible."""
        return None if self.path_map is None else list(self.path_map.values())

    def resolve(self, value: Any, known: Mapping[str, object]) -> list[str | Send]:
        """Node names (END included) and `Send`s for what the condition returned."""
        values = value if isinstance(value, _SEVERAL) else (value,)
        names: list[str | Send] = []
        for item in values:
            if isinstance(item, Send):  # names its node itself: no path_map
                check_send(item, self.source, known)
                names.append(item)
                continue
            if self.path_map is not None:
                try:
                    name = self.path_map[item]
                except (KeyError, TypeError):
                    raise GraphError(
                        f"The condition on {self.source!r} returned {item!r}, which is not a key "
                        f"of its path_map {sorted(map(repr, self.path_map))}",
                        "GRAPH_004",
                        {"node": self.source, "returned": repr(item)},
                    ) from None
            else:
                name = item
            if name != END and (not isinstance(name, str) or name not in known):
                raise GraphError(
                    f"The condition on {self.source!r} returned {name!r}, which is not a node "
                    f"of this graph; return one of {sorted(known)} or END",
                    "GRAPH_004",
                    {"node": self.source, "returned": repr(name)},
                )
            names.append(name)
        return names


def check_send(send: Send, source: str, known: Mapping[str, object]) -> None:
    if send.node not in known:
        raise GraphError(
            f"{source!r} sent {send!r}, but {send.node!r} is not a node of this graph; send "
            f"to one of {sorted(known)}",
            "GRAPH_004",
            {"node": source, "send": send.node},
        )


class Routing(Record):
    """Static edges, conditional branches, join nodes and reachability, built at compile."""

    __match_args__ = ("static", "branches", "joins", "reach")
    __slots__ = __match_args__

    def __init__(
        self,
        static: dict[str, tuple[str, ...]],
        branches: dict[str, tuple[Branch, ...]],
        joins: frozenset[str],
        reach: dict[str, frozenset[str]],
    ) -> None:
        self.static = static
        self.branches = branches
        self.joins = joins
        self.reach = reach

    @classmethod
    def build(
        cls,
        nodes: Iterable[str],
        edges: list[tuple[str, str]],
        branches: list[Branch],
        dynamic: Iterable[str],
    ) -> Routing:
        names = [START, *nodes]
        static: dict[str, list[str]] = {n: [] for n in names}
        for source, target in edges:
            if target not in static[source]:
                static[source].append(target)
        by_source: dict[str, list[Branch]] = {n: [] for n in names}
        for branch in branches:
            by_source[branch.source].append(branch)
        real = [n for n in names if n != START]
        dynamic = set(dynamic)
        successors: dict[str, set[str]] = {}
        for name in names:
            succ = {t for t in static[name] if t != END}
            for branch in by_source[name]:
                targets = branch.targets()
                succ.update(real if targets is None else (t for t in targets if t != END))
            if name in dynamic:
                succ.update(real)
            successors[name] = succ
        incoming: dict[str, int] = {n: 0 for n in real}
        for name in names:
            for target in successors[name]:
                incoming[target] += 1
        return cls(
            static={n: tuple(t) for n, t in static.items()},
            branches={n: tuple(b) for n, b in by_source.items() if b},
            joins=frozenset(n for n, count in incoming.items() if count > 1),
            reach=_closure(successors),
        )

    def reachable_from_start(self) -> frozenset[str]:
        return self.reach[START]


def _closure(successors: dict[str, set[str]]) -> dict[str, frozenset[str]]:
    """For every node, the nodes reachable from it by one or more edges."""
    reach: dict[str, frozenset[str]] = {}
    for origin in successors:
        seen: set[str] = set()
        stack = list(successors[origin])
        while stack:
            node = stack.pop()
            if node not in seen:
                seen.add(node)
                stack.extend(successors.get(node, ()))
        reach[origin] = frozenset(seen)
    return reach


__all__ = ["Branch", "Routing", "check_send"]
