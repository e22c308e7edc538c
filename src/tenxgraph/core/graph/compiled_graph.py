"""`CompiledGraph`: the runnable app returned by `StateGraph.compile()`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Generic, Self

from tenxgraph.core.exceptions import ResourceNotFoundError, StorageError
from tenxgraph.core.graph.engine import Run
from tenxgraph.core.graph.merge import apply_update, copy_message, handed_out, log_entries
from tenxgraph.core.graph.node import NodeFunc, NodeSpec, compile_node, normalize
from tenxgraph.core.graph.program import Program
from tenxgraph.core.graph.results import RunResult, StateT
from tenxgraph.core.graph.rollback import forget_children, paused_children
from tenxgraph.core.graph.routing import Routing
from tenxgraph.core.graph.run_config import WANTED, RunSettings
from tenxgraph.core.graph.subgraph import Subgraph, child_thread_id
from tenxgraph.core.graph.threads import Threads
from tenxgraph.core.state import AgentState, Message, StreamChunk
from tenxgraph.core.state.context_manager import BaseContextManager
from tenxgraph.core.state.reducers import seal_history
from tenxgraph.observability.hooks import Hook
from tenxgraph.observability.settings import DEFAULT_TRACING, Tracing
from tenxgraph.storage.checkpointer.paging import RECENT_MESSAGES, alook_up_ids
from tenxgraph.storage.checkpointer.thread_ids import thread_id_of
from tenxgraph.utils.constants import ResponseGranularity
from tenxgraph.utils.sync_bridge import SyncBridge

if TYPE_CHECKING:
    from tenxgraph.core.graph.drawing import DrawableGraph
    from tenxgraph.core.graph.subgraph import Compiled
    from tenxgraph.core.state.budget import Budget
    from tenxgraph.storage.checkpointer.base import BaseCheckpointer, CheckpointInfo
    from tenxgraph.storage.media.base import MediaStore
    from tenxgraph.storage.media.offload import MediaOffload
    from tenxgraph.storage.store.base import BaseStore

Input = dict[str, Any] | None
Config = dict[str, Any] | None


class CompiledGraph(Generic[StateT]):
    """A validated graph, ready to run. Create it with `StateGraph.compile()`.

    Generic in its state type: `StateGraph(MyState).compile()` is a `CompiledGraph[MyState]`,
    whose `ainvoke` returns a `RunResult[MyState]` and `aget_state` a `MyState | None` (a bare
    `CompiledGraph` is a `CompiledGraph[AgentState]`). Types only: nothing is checked or
    converted at runtime.

    Everything a run needs (node call conventions, reducers, edge tables) was worked out at
    compile time. Each compiled graph owns its checkpointer and thread locks; nothing is
    shared between two compiled graphs but the process's loop thread of the sync API.
    """

    def __init__(
        self,
        *,
        state: StateT,
        specs: dict[str, NodeSpec],
        routing: Routing,
        checkpointer: BaseCheckpointer | None,
        context_manager: BaseContextManager[Any] | None,
        interrupt_before: frozenset[str],
        interrupt_after: frozenset[str],
        name: str = "graph",
        hooks: tuple[Hook, ...] = (),
        tracing: Tracing = DEFAULT_TRACING,
        store: BaseStore | None = None,
        budget: Budget | None = None,
        media: MediaOffload | None = None,
        thread_budget: Budget | None = None,
    ) -> None:
        state_type = type(state)
        self.name = name
        self._store = store
        self.state_type: type[StateT] = state_type
        self._program = program = Program.build(
            state_type,
            specs,
            routing,
            checkpointer,
            interrupt_before,
            interrupt_after,
            name,
            hooks,
            tracing,
            budget,
            media,
            thread_budget,
        )
        self.context_manager = context_manager
        # every new thread starts from a copy of this: the given state, as it would come
        # back from storage
        initial = state_type.model_validate(state.model_dump(mode="json"))
        self._threads = Threads(program, initial)
        # the sync API runs on the process's one loop thread, shared by every graph: an
        # executor, not state (this graph's checkpointer, callbacks and ids stay its own)
        self._loop_thread = SyncBridge(f"graph-{id(self):x}", closing=checkpointer)

    @property
    def checkpointer(self) -> BaseCheckpointer | None:
        """Where this app keeps its threads (None: nowhere)."""
        return self._program.checkpointer

    @checkpointer.setter
    def checkpointer(self, checkpointer: BaseCheckpointer | None) -> None:
        if checkpointer is not None:
            checkpointer.bind_state_type(self.state_type)
        self._program.checkpointer = checkpointer
        self._loop_thread.closing = checkpointer

    def adopt_checkpointer(self, checkpointer: BaseCheckpointer) -> bool:
        """Give an app compiled without a checkpointer (kept in memory by default) the one
        its host provides (the `tenxgraph` command's SQLite file, a server's database); its
        media store follows when it was the default one. False, and nothing changed, when
        the app chose its own checkpointer."""
        from tenxgraph.storage.checkpointer.memory import DefaultCheckpointer

        old = self.checkpointer
        if old is not None and type(old) is not DefaultCheckpointer:
            return False
        media = self._program.media
        self.checkpointer = checkpointer
        if media is not None and media.store is getattr(old, "media_store", None):
            from tenxgraph.storage.media.defaults import default_media_store
            from tenxgraph.storage.media.offload import MediaOffload

            store = default_media_store(checkpointer)
            self._program.media = None if store is None else MediaOffload(store, media.threshold)
        return True

    @property
    def store(self) -> BaseStore | None:
        """The long-term store given to `compile(store=...)` (None: none), the one this app's
        nodes and tools taking `store` receive. Read-only: it was bound to them at compile
        time; compile again for another."""
        return self._store

    @property
    def media_store(self) -> MediaStore | None:
        """Where this app keeps the bytes of images and files its saved messages name
        (``tenxgraph://media/<sha256>``): `compile(media_store=...)` or the checkpointer's
        default; None when media stays inline."""
        media = self._program.media
        return None if media is None else media.store

    @property
    def interrupt_before(self) -> frozenset[str]:
        return self._program.interrupt_before

    @property
    def interrupt_after(self) -> frozenset[str]:
        return self._program.interrupt_after

    # -- running ---------------------------------------------------------------------------

    def _run(self, input_data: Input, config: Config, granularity: Any, streaming: bool) -> Run:
        if type(granularity) is not ResponseGranularity:
            granularity = ResponseGranularity(granularity)
        settings = RunSettings.from_config(config, streaming)
        want = WANTED[granularity] if streaming else frozenset()
        return Run(self._program, self._threads, input_data, settings, want, granularity)

    async def ainvoke(
        self,
        input_data: Input,
        config: Config = None,
        response_granularity: ResponseGranularity | str = ResponseGranularity.LOW,
    ) -> RunResult[StateT]:
        """Run the graph to the end (or to a pause) and return the result."""
        run = self._run(input_data, config, response_granularity, streaming=False)
        async for _ in run.events():
            pass
        return run.result

    def astream(
        self,
        input_data: Input,
        config: Config = None,
        response_granularity: ResponseGranularity | str = ResponseGranularity.LOW,
    ) -> AsyncGenerator[StreamChunk, None]:
        """Run the graph, yielding a new `StreamChunk` per event as it happens:
        ``async for chunk in app.astream(...)``. Close it (``aclosing``) if you stop early."""
        run = self._run(input_data, config, response_granularity, streaming=True)
        return run.events()

    def invoke(
        self,
        input_data: Input,
        config: Config = None,
        response_granularity: ResponseGranularity | str = ResponseGranularity.LOW,
    ) -> RunResult[StateT]:
        """Sync `ainvoke`; safe to call where an event loop is already running."""
        return self._loop_thread.run(self.ainvoke, input_data, config, response_granularity)

    def stream(
        self,
        input_data: Input,
        config: Config = None,
        response_granularity: ResponseGranularity | str = ResponseGranularity.LOW,
    ) -> Iterator[StreamChunk]:
        """Sync `astream`."""
        return self._loop_thread.iterate(
            self.astream, input_data, config, response_granularity, keepalive=self
        )

    # -- state -----------------------------------------------------------------------------

    async def aget_state(self, config: dict[str, Any]) -> StateT | None:
        """The thread's stored state, or None if there is none: your own copy, except for its
        messages, which are the thread's and sealed (`SealedError` on any change; change a
        `model_copy(deep=True)`). `config["checkpoint_version"]` reads an earlier version."""
        if self.checkpointer is None:
            return None
        thread_id, version = thread_id_of(config), config.get("checkpoint_version")
        kept = await self._threads.current(thread_id, version)
        if kept is not None:  # still what the store holds: no need to read it
            return handed_out(kept)  # type: ignore[return-value]  # this graph's state type
        snapshot = (
            await self.checkpointer.aload(thread_id, self.state_type, version)
            if version is not None
            else await self.checkpointer.aload_recent(thread_id, self.state_type, RECENT_MESSAGES)
        )
        if snapshot is None:
            return None
        seal_history(snapshot.state.context)  # as a warm thread's: the same rules either way
        return snapshot.state

    def get_state(self, config: dict[str, Any]) -> StateT | None:
        return self._loop_thread.run(self.aget_state, config)

    async def aget_subgraph_state(
        self, config: dict[str, Any], namespace: str | Sequence[str]
    ) -> AgentState | None:
        """The state of the subgraph node `namespace` (a node name, or a path of them for a
        subgraph inside a subgraph: `("research", "search")`; the i-th `Send` to a node is
        `"name[i]"`) in the thread's current step: the child a paused run is paused in, or
        None when that node has no run in this step."""
        path = (namespace,) if isinstance(namespace, str) else tuple(namespace)
        state: AgentState | None = await self.aget_state(config)
        graph: Compiled = self
        thread_id = thread_id_of(config)
        for key in path:
            if state is None or self.checkpointer is None:
                return None
            spec = graph._program.specs.get(key.partition("[")[0])
            if spec is None or not isinstance(spec.func, Subgraph):
                subgraphs = [n for n, s in graph._program.specs.items()
                             if isinstance(s.func, Subgraph)]  # fmt: skip
                raise ValueError(
                    f"{key!r} is not a subgraph node of graph {graph.name!r}; its subgraph "
                    f"nodes are {subgraphs}"
                )
            thread_id = child_thread_id(thread_id, key, state.execution_meta.step)
            graph = spec.func.graph
            snapshot = await self.checkpointer.aload_recent(
                thread_id, graph.state_type, RECENT_MESSAGES
            )
            state = None if snapshot is None else snapshot.state
        if state is not None:
            seal_history(state.context)
        return state

    def get_subgraph_state(
        self, config: dict[str, Any], namespace: str | Sequence[str]
    ) -> AgentState | None:
        return self._loop_thread.run(self.aget_subgraph_state, config, namespace)

    async def aget_state_history(
        self, config: dict[str, Any], limit: int | None = None
    ) -> list[CheckpointInfo]:
        """The thread's saved versions, newest first: version, step, status, node, message
        count and time. Read one with `aget_state({..., "checkpoint_version": v})`, or run
        from it (a fork) with `ainvoke(..., {..., "checkpoint_version": v})`."""
        if self.checkpointer is None:
            return []
        return await self.checkpointer.ahistory(thread_id_of(config), limit=limit)

    def get_state_history(
        self, config: dict[str, Any], limit: int | None = None
    ) -> list[CheckpointInfo]:
        return self._loop_thread.run(self.aget_state_history, config, limit)

    async def aupdate_state(
        self, config: dict[str, Any], values: Any, *, replace: bool = False
    ) -> int:
        """Change a thread's state from outside a run, as a new version. `values` is anything a
        node may return (a dict of fields, messages...); it merges through the reducers.

        A message whose id is already in the thread is an edit: with `replace=True` it takes
        the stored one's place (the history is rewritten, so versions from before it can no
        longer be loaded); without, it is refused with `ValueError`, never silently skipped.
        Refused with `ThreadBusyError` while a run holds the thread. Returns the new version."""
        if self.checkpointer is None:
            raise ValueError("update_state needs a graph compiled with a checkpointer")
        thread_id = thread_id_of(config)
        program, threads = self._program, self._threads
        update = normalize(values, "update_state", program.fields)
        if update.goto is not None or update.state is not None:
            raise ValueError("update_state takes field values or messages, not a Command or state")
        key = await threads.take_turn(thread_id)
        try:
            state, version, _ = await threads.checkout(thread_id)
            before = state.context
            await alook_up_ids(before, update.messages)  # no blocking read in `_edits`
            edited = _edits(thread_id, before, update.messages, replace)
            if edited:
                update.messages = [m for m in update.messages if m.message_id not in edited]
                state.context = [edited.get(m.message_id, m) for m in before]
            apply_update(program, state, update, "update_state")
            added = (
                None
                if edited
                else log_entries(before, state.context, program.append_only, version is None)
            )
            saved = await self.checkpointer.asave(
                thread_id,
                expected_version=version,
                state=state,
                new_messages=state.context if added is None else added,
                rewrite=added is None,
            )
            threads.remember(thread_id, saved, state)
            return saved
        finally:
            threads.end_turn(key)

    def update_state(self, config: dict[str, Any], values: Any, *, replace: bool = False) -> int:
        async def update() -> int:
            return await self.aupdate_state(config, values, replace=replace)

        return self._loop_thread.run(update)

    async def arestore(self, config: dict[str, Any], version: int | None) -> int:
        """Roll the thread back: its state at `version` (header and messages) becomes its
        state again, as a new version. Nothing is rewritten: the versions after `version`
        stay in the history and still load (`aget_state_history` lists them, then this one).
        `version=None`: the thread as it was before its first version, a new version with
        no messages. Refused with `ThreadBusyError` while a run holds the thread, and with
        `StaleStateError` if one changed it meanwhile. The threads its subgraph nodes kept
        for the steps rolled back are deleted (see `tenxgraph.core.graph.rollback`). Returns
        the new version."""
        if self.checkpointer is None:
            raise ValueError("arestore needs a graph compiled with a checkpointer")
        thread_id, store = thread_id_of(config), self.checkpointer
        threads = self._threads
        key = await threads.take_turn(thread_id)
        try:
            threads.forget(thread_id)
            history = await store.ahistory(thread_id)
            if not history:
                raise ResourceNotFoundError(
                    f"Thread {thread_id!r} does not exist: there is no state to restore",
                    context={"thread_id": thread_id},
                )
            empty = threads.new_state() if version is None else None
            if not any(isinstance(s.func, Subgraph) for s in self._program.specs.values()):
                return await store.arestore(
                    thread_id, version, expected_version=history[0].version, empty=empty
                )
            target = empty or await self.aget_state(
                {"thread_id": thread_id, "checkpoint_version": version}
            )
            assert target is not None
            saved_at = next((i.created_at for i in history if i.version == version), 0.0)
            keep = await paused_children(self._program, store, thread_id, target, saved_at)
            restored = await store.arestore(
                thread_id, version, expected_version=history[0].version, empty=empty
            )
            steps = range(target.execution_meta.step, max(i.step for i in history) + 2)
            try:
                await forget_children(self._program, store, thread_id, steps, keep)
            except Exception as exc:
                raise StorageError(
                    f"Thread {thread_id!r} was rolled back (as version {restored}), but the "
                    f"threads its subgraph nodes kept for the steps rolled back could not all "
                    f"be deleted ({exc}); restore it again to delete them",
                    context={"thread_id": thread_id, "version": restored},
                ) from exc
            return restored
        finally:
            threads.end_turn(key)

    def restore(self, config: dict[str, Any], version: int | None) -> int:
        return self._loop_thread.run(self.arestore, config, version)

    # -- stopping --------------------------------------------------------------------------

    async def astop(self, config: dict[str, Any]) -> dict[str, Any]:
        """Ask the run on `config["thread_id"]` to stop. A run in this process stops at once
        (its running node is cancelled); one in another process sharing the checkpointer stops
        at its next step boundary."""
        thread_id = thread_id_of(config)
        run = self._threads.active.get(thread_id)
        if run is not None:
            loop = run.loop
            if loop is None or loop is asyncio.get_running_loop():
                run.request_stop()
            else:
                loop.call_soon_threadsafe(run.request_stop)
            return {"ok": True, "running": True}
        if self.checkpointer is None:
            return {"ok": False, "running": False, "reason": "not-running"}
        if await self.checkpointer.aversion(thread_id) is None:
            return {"ok": False, "running": False, "reason": "no-state"}
        await self.checkpointer.arequest_stop(thread_id)
        return {"ok": True, "running": False, "reason": "requested"}

    def stop(self, config: dict[str, Any]) -> dict[str, Any]:
        thread_id = thread_id_of(config)
        run = self._threads.active.get(thread_id)
        if run is not None and run.loop is not None:
            run.loop.call_soon_threadsafe(run.request_stop)
            return {"ok": True, "running": True}
        return self._loop_thread.run(self.astop, config)

    # -- graph editing and lifecycle -------------------------------------------------------

    def get_graph(self) -> DrawableGraph:
        """The graph's nodes and edges, to look at: ``print(app.get_graph().draw_mermaid())``
        gives a Mermaid flowchart that renders in any Markdown viewer."""
        from tenxgraph.core.graph.drawing import graph_of

        return graph_of(self._program.specs, self._program.routing)

    def override_node(self, name: str, func: NodeFunc) -> Self:
        """Replace a node's function (tests, mocks); edges stay as they are."""
        specs = self._program.specs
        if name not in specs:
            raise KeyError(f"No node named {name!r}; nodes are {sorted(specs)}")
        specs[name] = compile_node(name, func, specs[name].index, self._store)
        return self

    async def aclose(self) -> None:
        """Close the checkpointer (its connections on every event loop)."""
        if self.checkpointer is not None:
            await self.checkpointer.aclose()

    def close(self) -> None:
        if self.checkpointer is not None:
            self._loop_thread.run(self.checkpointer.aclose)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _edits(
    thread_id: str, history: list[Message], messages: list[Message], replace: bool
) -> dict[str | int, Message]:
    """The messages of an update that replace stored ones (same id), by id; refused unless
    `replace` is true."""
    if not messages:
        return {}
    ids = {m.message_id for m in messages}
    in_store = getattr(history, "stored_ids", None)  # a lazy history: asks its store
    stored = in_store(ids) if in_store is not None else {m.message_id for m in history} & ids
    edits = {m.message_id: copy_message(m) for m in messages if m.message_id in stored}
    if edits and not replace:
        raise ValueError(
            f"update_state: thread {thread_id!r} already has message(s) {sorted(map(str, edits))}."
            " To edit them in place, pass replace=True; to add a message, give it a new id"
        )
    return edits


__all__ = ["CompiledGraph"]
