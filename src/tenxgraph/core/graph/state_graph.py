"""`StateGraph`: the builder. Add nodes and edges, then `compile()` into a runnable app."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Literal, Self, overload

from tenxgraph.core.exceptions import GraphError, UnreachableNodesWarning
from tenxgraph.core.graph.compiled_graph import CompiledGraph
from tenxgraph.core.graph.node import NodeFunc, NodeSpec, compile_node
from tenxgraph.core.graph.results import StateT
from tenxgraph.core.graph.routing import Branch, Routing
from tenxgraph.core.graph.subgraph import Subgraph
from tenxgraph.core.state import AgentState
from tenxgraph.core.state.context_manager import BaseContextManager
from tenxgraph.observability.hooks import hooks_from
from tenxgraph.observability.settings import DEFAULT_TRACING, Tracing
from tenxgraph.utils.constants import END, START

if TYPE_CHECKING:
    from tenxgraph.core.state.budget import Budget
    from tenxgraph.storage.checkpointer.base import BaseCheckpointer
    from tenxgraph.storage.store.base import BaseStore

_RESERVED_NAMES = (START, END)


class StateGraph(Generic[StateT]):
    """A graph of nodes over a state (`AgentState` or a subclass, or an instance of one whose
    values start every new thread).

    Generic in that state's type, for type checkers only: `StateGraph(MyState)` and
    `StateGraph(MyState())` are a `StateGraph[MyState]`, `StateGraph()` a
    `StateGraph[AgentState]`, and `compile()` gives a `CompiledGraph` of the same type."""

    @overload
    def __init__(
        self: StateGraph[AgentState],
        state: None = None,
        context_manager: BaseContextManager[Any] | None = None,
        publisher: Any = None,
        id_generator: Any = None,
        container: Any = None,
    ) -> None: ...

    @overload
    def __init__(
        self,
        state: type[StateT],
        context_manager: BaseContextManager[Any] | None = None,
        publisher: Any = None,
        id_generator: Any = None,
        container: Any = None,
    ) -> None: ...

    @overload
    def __init__(
        self,
        state: StateT,
        context_manager: BaseContextManager[Any] | None = None,
        publisher: Any = None,
        id_generator: Any = None,
        container: Any = None,
    ) -> None: ...

    def __init__(
        self,
        state: AgentState | type[AgentState] | None = None,
        context_manager: BaseContextManager[Any] | None = None,
        publisher: Any = None,
        id_generator: Any = None,
        container: Any = None,
    ) -> None:
        _not_supported(
            "StateGraph", publisher=publisher, id_generator=id_generator, container=container
        )
        if state is None:
            state = AgentState()
        elif inspect.isclass(state):
            if not issubclass(state, AgentState):
                raise TypeError(
                    f"StateGraph(state=...) takes an AgentState subclass or instance, "
                    f"not {state.__name__}"
                )
            state = state()
        elif not isinstance(state, AgentState):
            raise TypeError(
                "StateGraph(state=...) takes an AgentState subclass or instance, "
                f"not {type(state).__name__}"
            )
        self.state: StateT = state  # type: ignore[assignment]  # (the overloads say which)
        self.context_manager = context_manager
        self.nodes: dict[str, NodeFunc] = {}
        self.edges: list[tuple[str, str]] = []
        self.branches: list[tuple[str, Callable[..., Any], Any]] = []
        self.entry_point: str | None = None

    # -- building --------------------------------------------------------------------------

    def add_node(self, name_or_func: str | NodeFunc, func: NodeFunc | None = None) -> Self:
        """`add_node(fn)` (named after the function) or `add_node("name", fn_or_node)`."""
        if isinstance(name_or_func, str):
            name = name_or_func
            if func is None:
                raise ValueError(f"add_node({name!r}) needs the node function as well")
        else:
            if func is not None or not callable(name_or_func):
                raise ValueError("add_node takes (function) or (name, function)")
            func = name_or_func
            name = getattr(func, "__name__", None) or type(func).__name__
        if isinstance(func, CompiledGraph):  # a graph as a node: run inside this one's step
            func = Subgraph(func)
        if not callable(func):
            raise ValueError(f"Node {name!r} must be callable, got {type(func).__name__}")
        if name in _RESERVED_NAMES:
            raise ValueError(f"{name!r} is reserved; choose another node name")
        if name in self.nodes:
            raise ValueError(f"A node named {name!r} already exists")
        self.nodes[name] = func
        return self

    def add_edge(self, from_node: str, to_node: str) -> Self:
        """Run `to_node` after `from_node`. Several edges out of one node run in parallel."""
        if from_node == END:
            raise ValueError("END has no outgoing edges")
        if to_node == START:
            raise ValueError("No edge can lead to START")
        if from_node == START:
            self.entry_point = self.entry_point or to_node
        self.edges.append((from_node, to_node))
        return self

    def add_conditional_edges(
        self,
        from_node: str,
        condition: Callable[..., Any],
        path_map: Mapping[Hashable, str] | Iterable[str] | None = None,
    ) -> Self:
        """After `from_node`, call `condition(state)` once; it returns a node name, END, or a
        list of names (through `path_map` if one is given)."""
        if from_node == END:
            raise ValueError("END has no outgoing edges")
        if not callable(condition):
            raise ValueError("add_conditional_edges needs a callable condition")
        if from_node == START:
            self.entry_point = self.entry_point or START
        self.branches.append((from_node, condition, path_map))
        return self

    def set_entry_point(self, name: str) -> Self:
        """Start runs at `name` (same as `add_edge(START, name)`)."""
        return self.add_edge(START, name)

    def override_node(self, name: str, func: NodeFunc) -> Self:
        """Replace the function of an existing node."""
        if name not in self.nodes:
            raise KeyError(f"No node named {name!r}; nodes are {sorted(self.nodes)}")
        self.nodes[name] = func
        return self

    # -- compiling -------------------------------------------------------------------------

    def compile(
        self,
        checkpointer: BaseCheckpointer | Literal[False] | None = None,
        interrupt_before: Iterable[str] | None = None,
        interrupt_after: Iterable[str] | None = None,
        store: BaseStore | None = None,
        media_store: Any = None,
        callback_manager: Any = None,
        shutdown_timeout: Any = None,
        *,
        name: str | None = None,
        hooks: Any = None,
        tracing: Tracing | bool | None = None,
        budget: Budget | dict[str, Any] | None = None,
        media_threshold: int | None = None,
        thread_budget: Budget | dict[str, Any] | None = None,
    ) -> CompiledGraph[StateT]:
        """Check the graph and build the app. Raises `GraphError` for a missing entry point
        (GRAPH_002), an edge or path-map target or interrupt name that is not a node
        (GRAPH_004), a node whose parameters cannot be filled (GRAPH_007). Nodes no edge or
        condition leads to only give an `UnreachableNodesWarning` (GRAPH_003): a node may
        still route to them with `Command(goto=...)`.

        Without a `checkpointer` the app keeps its threads in memory, as 10xgraph's does
        (`get_state`, resuming a pause, the next turn of a thread all work), in an
        `InMemoryCheckpointer` bounded at 1,000 threads and 64 MiB that drops the least
        recently used ones; `checkpointer=False` keeps nothing at all.

        `store` (a `tenxgraph.storage.store.BaseStore`) is the long-term memory of this app's
        nodes and tools: those taking a parameter named `store` receive it (a required one
        without a store is a GRAPH_007 error here; an optional one gets None).

        `media_store` (a `tenxgraph.storage.media.MediaStore`) keeps the bytes of images and
        files: a saved message's inline media above `media_threshold` bytes (default 256 KiB;
        0 keeps everything inline) is stored there once and the message names it. Without
        one, the checkpointer's default is used (in its own database or memory, see
        `tenxgraph.storage.media.defaults`); `media_store=False` keeps media inline.

        `name` is what traces, logs and hooks call this graph. `hooks` (a `RunHooks`, a
        callable taking one event, or a list of them) are told what every run does.
        `tracing`: OpenTelemetry spans go to the globally configured tracer provider when
        there is one; pass `Tracing(...)` for another provider or to record message contents,
        `False` for none.

        `budget` limits what each run spends, `thread_budget` what all the runs of a thread
        spend together (see `tenxgraph.core.state.budget`)."""
        _not_supported(
            "compile",
            callback_manager=callback_manager,
            shutdown_timeout=shutdown_timeout,
        )
        self._check_edges()
        _check_store(store, self.nodes)
        specs = {
            name: compile_node(name, _bound(name, func, self.nodes, self.context_manager), i, store)
            for i, (name, func) in enumerate(self.nodes.items())
        }
        routing = self._routing(specs)
        before = self._breakpoints(interrupt_before)
        after = self._breakpoints(interrupt_after)
        checkpointer = _bound_checkpointer(checkpointer, type(self.state))
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ValueError(f"compile(name=...) must be a non-empty string, got {name!r}")
        return CompiledGraph(
            name=name or "graph",
            hooks=tuple(hooks_from(hooks, "compile(hooks=...)")),
            tracing=_tracing(tracing),
            budget=_budget(budget),
            thread_budget=_budget(thread_budget, "thread_budget"),
            state=self.state,
            specs=specs,
            routing=routing,
            checkpointer=None if checkpointer is False else checkpointer,
            context_manager=self.context_manager,
            interrupt_before=before,
            interrupt_after=after,
            store=store,
            media=_media(media_store, media_threshold, checkpointer),
        )

    def _routing(self, specs: dict[str, NodeSpec]) -> Routing:
        """The edge tables; a warning naming the nodes nothing leads to."""
        dynamic = [n for n, spec in specs.items() if spec.dynamic_goto]
        routing = Routing.build(list(self.nodes), self.edges, self._branches(), dynamic)
        reached = routing.reachable_from_start()
        if not any(isinstance(specs[n].func, Subgraph) for n in reached):
            # (a subgraph's nodes may route anywhere here: `Command.PARENT`)
            _warn_unreachable([n for n in self.nodes if n not in reached])
        return routing

    def _check_edges(self) -> None:
        """GRAPH_002 without an entry point, GRAPH_004 for an edge to or from no node."""
        names = list(self.nodes)
        known = {START, END, *names}
        if self.entry_point is None:
            raise GraphError(
                "No entry point set: add an edge from START, e.g. "
                "graph.add_edge(START, 'first_node'), or call graph.set_entry_point(...)",
                "GRAPH_002",
            )
        for source, target in self.edges:
            for end, label in ((source, "from"), (target, "to")):
                if end not in known:
                    raise GraphError(
                        f"Edge {source!r} -> {target!r} goes {label} {end!r}, which is not a "
                        f"node; add it with graph.add_node({end!r}, ...) (nodes: {names})",
                        "GRAPH_004",
                        {"edge": [source, target]},
                    )

    def _branches(self) -> list[Branch]:
        """The conditional edges, built; GRAPH_004 for one from or (by its path_map) to no
        node."""
        names = list(self.nodes)
        known = {START, END, *names}
        branches = []
        for source, condition, path_map in self.branches:
            if source not in known:
                raise GraphError(
                    f"Conditional edges start from {source!r}, which is not a node (nodes: "
                    f"{names})",
                    "GRAPH_004",
                    {"node": source},
                )
            branch = Branch.build(source, condition, path_map)
            for target in branch.targets() or ():
                if target not in known or target == START:
                    raise GraphError(
                        f"The path_map of the condition on {source!r} leads to {target!r}, "
                        f"which is not a node (nodes: {names})",
                        "GRAPH_004",
                        {"node": source, "target": target},
                    )
            branches.append(branch)
        return branches

    def _breakpoints(self, names: Iterable[str] | None) -> frozenset[str]:
        """Node names to interrupt at; GRAPH_004 for one that is not a node."""
        chosen = frozenset(names or ())
        for name in chosen:
            if name not in self.nodes:
                raise GraphError(
                    f"Cannot interrupt at {name!r}: it is not a node (nodes: {list(self.nodes)})",
                    "GRAPH_004",
                    {"node": name},
                )
        return chosen


def _warn_unreachable(unreachable: list[str]) -> None:
    """Nodes no edge or condition leads to are not an error (10xgraph and LangGraph compile
    them: `Command(goto=...)` may reach them), but likely a mistake: say so, at the caller's
    `compile()`."""
    if unreachable:
        warnings.warn(
            UnreachableNodesWarning(
                f"[GRAPH_003] No edge or condition leads to node(s) {unreachable} from START: "
                "they run only if a node routes to them with Command(goto=...). Connect them "
                "with add_edge/add_conditional_edges, or, if a node does route to them, "
                "annotate its return type with Command (-> Command) to say so",
                unreachable,
            ),
            stacklevel=4,  # the caller of compile(),
        )


def _bound_checkpointer(
    checkpointer: BaseCheckpointer | Literal[False] | None, state_type: type[AgentState]
) -> BaseCheckpointer | Literal[False]:
    """`compile(checkpointer=...)`: the default (in memory) for None; bound to the state."""
    if checkpointer is None:
        from tenxgraph.storage.checkpointer.memory import default_checkpointer

        checkpointer = default_checkpointer()
    if checkpointer is not False:
        checkpointer.bind_state_type(state_type)
    return checkpointer


def _budget(value: Any, name: str = "budget") -> Budget | None:
    """`compile(budget=...)` (or `thread_budget=`) as a `Budget` (its module imported only
    when one is given)."""
    if value is None:
        return None
    from tenxgraph.core.state.budget import Budget

    return Budget.of(value, f"compile({name}=...)")


__all__ = ["StateGraph"]


def _bound(
    name: str, func: Any, nodes: dict[str, Any], context_manager: BaseContextManager[Any] | None
) -> Any:
    """The node as this graph runs it: nodes that refer to other nodes by name (an Agent's
    `tool_node`) or use the graph's context manager get them here, in a copy, so one node
    object can serve several graphs."""
    bind = getattr(func, "_bind_to_graph", None)
    return bind(name, nodes, context_manager) if bind is not None else func


def _check_store(store: Any, nodes: dict[str, Any]) -> None:
    """`compile(store=...)` is a `BaseStore` or None; without one, no ToolNode may hold a tool
    that requires a `store` (nodes taking one are checked by `compile_node`)."""
    if store is not None:
        from tenxgraph.storage.store.base import BaseStore

        if not isinstance(store, BaseStore):
            raise TypeError(
                f"compile(store=...) takes a tenxgraph.storage.store.BaseStore (InMemoryStore, "
                f"SqliteStore, PostgresStore), not {type(store).__name__}"
            )
        return
    for name, func in nodes.items():
        needing = getattr(type(func), "_store_required_by", None)  # on the class: not a mock's
        tools = needing(func) if callable(needing) and not isinstance(func, type) else []
        if tools:
            raise GraphError(
                f"Node {name!r} has tools that take a `store` ({tools}), but the graph was "
                "compiled without one: pass compile(store=InMemoryStore()) (or SqliteStore/"
                "PostgresStore from tenxgraph.storage.store), or give the tools' parameter a "
                "default (`store=None`)",
                "GRAPH_007",
                {"node": name, "tools": tools},
            )


def _tracing(value: Tracing | bool | None) -> Tracing:
    if value is None or value is True:
        return DEFAULT_TRACING
    if value is False:
        return Tracing(enabled=False)
    if isinstance(value, Tracing):
        return value
    raise TypeError(
        f"compile(tracing=...) takes a tenxgraph.observability.Tracing, True or False, not "
        f"{value!r}"
    )


def _media(store: Any, threshold: int | None, checkpointer: Any) -> Any:
    """The graph's `MediaOffload`: `compile(media_store=...)` or the checkpointer's default
    (None: no store, media stays inline)."""
    if store is False:
        return None
    from tenxgraph.storage.media.base import MediaStore
    from tenxgraph.storage.media.defaults import default_media_store
    from tenxgraph.storage.media.offload import DEFAULT_OFFLOAD_THRESHOLD, MediaOffload

    if store is None:
        store = default_media_store(checkpointer)
        if store is None:
            return None
    elif not isinstance(store, MediaStore):
        raise TypeError(
            "compile(media_store=...) takes a tenxgraph.storage.media.MediaStore "
            f"(InMemoryMediaStore, LocalMediaStore, SqliteMediaStore, PostgresMediaStore), "
            f"not {type(store).__name__}"
        )
    elif checkpointer not in (None, False) and checkpointer.media_store is None:
        checkpointer.media_store = store  # deleting a thread releases its media here
    return MediaOffload(store, DEFAULT_OFFLOAD_THRESHOLD if threshold is None else threshold)


def _not_supported(where: str, **given: Any) -> None:
    """10xgraph's parameters that tenxgraph takes (so its code runs) but does not act on:
    a warning for each one given, never silence."""
    for name, value in given.items():
        if value is not None:
            warnings.warn(
                f"{where}({name}=...) has no effect in tenxgraph (10xgraph's parameter, not "
                "supported yet); leave it out to silence this warning",
                UserWarning,
                stacklevel=3,
            )
