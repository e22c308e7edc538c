"""`CompiledGraph`: the runnable app returned by `StateGraph.compile()`."""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import AsyncGenerator, Iterator
from typing import TYPE_CHECKING, Any

from tenxgraph.core.exceptions import ResourceNotFoundError
from tenxgraph.core.graph.engine import WANTED, Run, RunSettings
from tenxgraph.core.graph.merge import apply_update, copy_message, log_entries
from tenxgraph.core.graph.node import NodeFunc, NodeSpec, compile_node, normalize
from tenxgraph.core.graph.routing import Routing
from tenxgraph.core.graph.sync_bridge import SyncBridge
from tenxgraph.core.state import AgentState, Message, StreamChunk
from tenxgraph.core.state._construct import copied
from tenxgraph.core.state.context_manager import BaseContextManager
from tenxgraph.core.state.reducers import add_messages
from tenxgraph.storage.checkpointer.base import BaseCheckpointer, CheckpointInfo, thread_id_of
from tenxgraph.storage.checkpointer.lease import busy_error, waited_error
from tenxgraph.utils.constants import ResponseGranularity

if TYPE_CHECKING:
    from tenxgraph.core.graph.drawing import DrawableGraph
    from tenxgraph.core.state.agent_state import Reducer

Input = dict[str, Any] | None
Config = dict[str, Any] | None

_LIVE_THREADS = 1024  # per app: states kept in memory between runs, so a run need not reload


class CompiledGraph:
    """A validated graph, ready to run. Create it with `StateGraph.compile()`.

    Everything a run needs (node call conventions, reducers, edge tables) was worked out at
    compile time. Each compiled graph owns its checkpointer and thread locks; nothing is
    shared between two compiled graphs but the process's loop thread of the sync API.
    """

    def __init__(
        self,
        *,
        state: AgentState,
        specs: dict[str, NodeSpec],
        routing: Routing,
        checkpointer: BaseCheckpointer | None,
        context_manager: BaseContextManager[Any] | None,
        interrupt_before: frozenset[str],
        interrupt_after: frozenset[str],
    ) -> None:
        # every new thread starts from a copy of this: the given state, as it would come
        # back from storage
        self._initial = type(state).model_validate(state.model_dump(mode="json"))
        self.state_type: type[AgentState] = type(state)
        self._specs = specs
        self._routing = routing
        self.checkpointer = checkpointer
        self.context_manager = context_manager
        self.interrupt_before = interrupt_before
        self.interrupt_after = interrupt_after
        self._fields = frozenset(self.state_type.model_fields)
        reducers = dict(self.state_type.field_reducers())
        self._merge_messages: Reducer = reducers.pop("context", add_messages)
        self._append_only = self._merge_messages is add_messages
        self._reducers = reducers
        # per (event loop, thread): the runs waiting for their turn on that thread
        self._turns: dict[tuple[int, str], deque[asyncio.Future[None]]] = {}
        self._live: OrderedDict[str, tuple[int, AgentState]] = OrderedDict()
        self._active: dict[str, Run] = {}
        # the sync API runs on the process's one loop thread, shared by every graph: an
        # executor, not state (this graph's checkpointer, callbacks and ids stay its own)
        self._loop_thread = SyncBridge(f"graph-{id(self):x}", closing=checkpointer)

    # -- running ---------------------------------------------------------------------------

    def _run(self, input_data: Input, config: Config, granularity: Any, streaming: bool) -> Run:
        if type(granularity) is not ResponseGranularity:
            granularity = ResponseGranularity(granularity)
        settings = RunSettings.from_config(config, streaming)
        want = WANTED[granularity] if streaming else frozenset()
        return Run(self, input_data, settings, want, granularity)

    async def ainvoke(
        self,
        input_data: Input,
        config: Config = None,
        response_granularity: ResponseGranularity | str = ResponseGranularity.LOW,
    ) -> dict[str, Any]:
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
    ) -> dict[str, Any]:
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

    async def aget_state(self, config: dict[str, Any]) -> AgentState | None:
        """The thread's stored state (a copy of your own), or None if there is none.
        `config["checkpoint_version"]` reads an earlier version."""
        if self.checkpointer is None:
            return None
        snapshot = await self.checkpointer.aload(
            thread_id_of(config), self.state_type, config.get("checkpoint_version")
        )
        return None if snapshot is None else snapshot.state

    def get_state(self, config: dict[str, Any]) -> AgentState | None:
        return self._loop_thread.run(self.aget_state, config)

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
        update = normalize(values, "update_state", self._fields)
        if update.goto is not None or update.state is not None:
            raise ValueError("update_state takes field values or messages, not a Command or state")
        key = await self._take_turn(thread_id)
        try:
            state, version, _ = await self._checkout(thread_id)
            before = state.context
            edited = _edits(thread_id, before, update.messages, replace)
            if edited:
                update.messages = [m for m in update.messages if m.message_id not in edited]
                state.context = [edited.get(m.message_id, m) for m in before]
            apply_update(self, state, update, "update_state")
            added = (
                None
                if edited
                else log_entries(before, state.context, self._append_only, version is None)
            )
            return await self.checkpointer.asave(
                thread_id,
                expected_version=version,
                state=state,
                new_messages=state.context if added is None else added,
                rewrite=added is None,
            )
        finally:
            self._end_turn(key)

    def update_state(self, config: dict[str, Any], values: Any, *, replace: bool = False) -> int:
        async def update() -> int:
            return await self.aupdate_state(config, values, replace=replace)

        return self._loop_thread.run(update)

    # -- stopping --------------------------------------------------------------------------

    async def astop(self, config: dict[str, Any]) -> dict[str, Any]:
        """Ask the run on `config["thread_id"]` to stop. A run in this process stops at once
        (its running node is cancelled); one in another process sharing the checkpointer stops
        at its next step boundary."""
        thread_id = thread_id_of(config)
        run = self._active.get(thread_id)
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
        run = self._active.get(thread_id)
        if run is not None and run.loop is not None:
            run.loop.call_soon_threadsafe(run.request_stop)
            return {"ok": True, "running": True}
        return self._loop_thread.run(self.astop, config)

    # -- graph editing and lifecycle -------------------------------------------------------

    def get_graph(self) -> DrawableGraph:
        """The graph's nodes and edges, to look at: ``print(app.get_graph().draw_mermaid())``
        gives a Mermaid flowchart that renders in any Markdown viewer."""
        from tenxgraph.core.graph.drawing import graph_of

        return graph_of(self._specs, self._routing)

    def override_node(self, name: str, func: NodeFunc) -> CompiledGraph:
        """Replace a node's function (tests, mocks); edges stay as they are."""
        if name not in self._specs:
            raise KeyError(f"No node named {name!r}; nodes are {sorted(self._specs)}")
        self._specs[name] = compile_node(name, func, self._specs[name].index)
        return self

    async def aclose(self) -> None:
        """Close the checkpointer (its connections on every event loop)."""
        if self.checkpointer is not None:
            await self.checkpointer.aclose()

    def close(self) -> None:
        if self.checkpointer is not None:
            self._loop_thread.run(self.checkpointer.aclose)

    async def __aenter__(self) -> CompiledGraph:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- internals used by runs ------------------------------------------------------------

    async def _take_turn(
        self,
        thread_id: str,
        strategy: str = "reject",
        deadline: float | None = None,
        waited: float | None = None,
    ) -> tuple[int, str]:
        """Take `thread_id` among this app's runs on this event loop, by the multitask
        strategy: refuse at once while another run holds it (`reject`), wait for it
        (`enqueue`, until the `time.monotonic()` `deadline`, `waited` seconds from the run's
        start), or stop it and wait (`interrupt`). Other apps and processes are kept out by
        the checkpointer's lease. Returns the key to give back to `_end_turn`."""
        loop = asyncio.get_running_loop()
        key = (id(loop), thread_id)
        waiting = self._turns.get(key)
        if waiting is None:  # nobody else: no lock object at all
            self._turns[key] = deque()
            return key
        holder = self._active.get(thread_id)
        lease = None if holder is None else holder.lease
        owner = "a run of this app" if lease is None else lease.owner
        if strategy == "reject":
            raise busy_error(thread_id, owner, None)
        if strategy == "interrupt" and holder is not None:
            holder.request_stop()
        turn = loop.create_future()
        waiting.append(turn)
        try:
            async with asyncio.timeout_at(deadline):  # the loop's clock is time.monotonic()
                await turn
        except (asyncio.CancelledError, TimeoutError) as exc:
            if turn.done() and not turn.cancelled():  # handed the turn just as we gave up
                self._end_turn(key)
            if isinstance(exc, TimeoutError):
                raise waited_error(thread_id, owner, waited) from exc
            raise
        return key

    def _end_turn(self, key: tuple[int, str]) -> None:
        """Hand the thread to the next run waiting for it, if any."""
        waiting = self._turns[key]
        while waiting:
            turn = waiting.popleft()
            if not turn.done():  # not given up (cancelled) while waiting
                turn.set_result(None)
                return
        del self._turns[key]

    def _new_state(self) -> AgentState:
        return copied(self._initial)

    async def _checkout(
        self, thread_id: str, version: int | None = None
    ) -> tuple[AgentState, int | None, bool]:
        """The thread's state for a run, the version it is at, and whether it was loaded from
        an older `version` (a fork). Kept from the last run if still current, else loaded; a
        fresh state for a new thread. The run owns it until it ends."""
        checkpointer = self.checkpointer
        if checkpointer is None:
            if version is not None:
                raise ValueError("config['checkpoint_version'] needs a graph with a checkpointer")
            return self._new_state(), None, False
        kept = self._live.pop(thread_id, None)
        head = await checkpointer.aversion(thread_id)
        if version is not None:
            if head is None:
                raise ResourceNotFoundError(
                    f"Thread {thread_id!r} does not exist, so it has no version {version}",
                    context={"thread_id": thread_id, "version": version},
                )
            if version != head:
                snapshot = await checkpointer.aload(thread_id, self.state_type, version)
                assert snapshot is not None
                return snapshot.state, head, True
        if kept is not None and kept[0] == head:
            return kept[1], head, False
        if head is None:
            return self._new_state(), None, False
        snapshot = await checkpointer.aload(thread_id, self.state_type)
        if snapshot is None:
            return self._new_state(), None, False
        return snapshot.state, snapshot.version, False

    def _remember(self, thread_id: str, version: int | None, state: AgentState) -> None:
        if self.checkpointer is None or version is None:
            return
        self._live[thread_id] = (version, state)
        if len(self._live) > _LIVE_THREADS:
            self._live.popitem(last=False)


def _edits(
    thread_id: str, history: list[Message], messages: list[Message], replace: bool
) -> dict[str | int, Message]:
    """The messages of an update that replace stored ones (same id), by id; refused unless
    `replace` is true."""
    if not messages:
        return {}
    stored = {m.message_id for m in history}
    edits = {m.message_id: copy_message(m) for m in messages if m.message_id in stored}
    if edits and not replace:
        raise ValueError(
            f"update_state: thread {thread_id!r} already has message(s) {sorted(map(str, edits))}."
            " To edit them in place, pass replace=True; to add a message, give it a new id"
        )
    return edits


__all__ = ["CompiledGraph"]
