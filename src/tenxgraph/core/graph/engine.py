"""The run loop: one async generator behind `ainvoke`, `astream`, `invoke` and `stream`.

A run is a sequence of super-steps. In each step the active nodes run (concurrently when there
are several), their outputs merge into the state through the field reducers in a fixed order,
the step is checkpointed, and the edges give the next set of nodes. Events are only built when
the consumer asked for them, so `ainvoke` pays for none.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tenxgraph.core.exceptions import (
    GraphError,
    GraphRecursionError,
    NodeError,
    StaleStateError,
    ThreadBusyError,
)
from tenxgraph.core.graph.guard import Guard, Stopped, node_error, timeout_error
from tenxgraph.core.graph.ledger import ToolLedger
from tenxgraph.core.graph.merge import (
    RUNTIME_FIELDS,
    assign,
    context_changes,
    copy_message,
    input_messages,
    log_entries,
    merge_fields,
    restore,
    set_fields,
    snapshot,
    tail,
    view_changes,
    view_of,
)
from tenxgraph.core.graph.node import (
    ASYNC,
    ASYNC_GEN,
    FieldUpdates,
    NodeEvent,
    NodeOutput,
    NodeSpec,
    normalize,
)
from tenxgraph.core.graph.routing import Routing
from tenxgraph.core.graph.run_config import MULTITASK_STRATEGIES, check_config_keys
from tenxgraph.core.state import AgentState, Message, StreamChunk, StreamEvent
from tenxgraph.core.state._construct import assemble, template
from tenxgraph.core.state.agent_state import RESERVED_FIELDS
from tenxgraph.core.state.execution_state import (
    ExecutionState,
    ExecutionStatus,
    StopRequestStatus,
)
from tenxgraph.core.state.message import generate_id
from tenxgraph.core.state.reducers import all_stored
from tenxgraph.storage.checkpointer._express import Express, current_express
from tenxgraph.storage.checkpointer.base import valid_thread_id
from tenxgraph.storage.checkpointer.lease import (
    Lease,
    lost_error,
    new_owner,
    owner_is_dead,
    waited_error,
)
from tenxgraph.utils.constants import (
    DEFAULT_ANONYMOUS_USER_ID,
    DEFAULT_ENQUEUE_TIMEOUT_SECONDS,
    DEFAULT_NODE_TIMEOUT_SECONDS,
    DEFAULT_RECURSION_LIMIT,
    END,
    START,
    ResponseGranularity,
)
from tenxgraph.utils.interrupt import GraphInterrupt, InterruptScope, current_scope

if TYPE_CHECKING:
    from tenxgraph.core.graph.compiled_graph import CompiledGraph

_STOP_POLL_SECONDS = 0.05
_PREPARE_ATTEMPTS = 20  # reads of a thread that moved under the run's first save, at most
_WAIT_POLL_SECONDS = (0.005, 0.25)  # first and longest pause while waiting for a thread
_CHUNK_SET = frozenset({"event", "thread_id", "run_id", "timestamp"})
_MESSAGE_CHUNK_SET = frozenset({*_CHUNK_SET, "message"})

WANTED: dict[ResponseGranularity, frozenset[StreamEvent]] = {
    ResponseGranularity.LOW: frozenset({StreamEvent.MESSAGE, StreamEvent.ERROR}),
    ResponseGranularity.PARTIAL: frozenset(
        {StreamEvent.MESSAGE, StreamEvent.ERROR, StreamEvent.STATE}
    ),
    ResponseGranularity.FULL: frozenset(StreamEvent),
}


@dataclass(slots=True)
class RunSettings:
    """The parts of a run's config the engine itself reads."""

    thread_id: str
    run_id: str
    recursion_limit: int
    node_timeout: float | None
    node_config: dict[str, Any]
    checkpoint_version: int | None = None
    # what this run does when another run holds its thread: "reject", "enqueue", "interrupt"
    multitask_strategy: str = "reject"
    enqueue_timeout: float | None = DEFAULT_ENQUEUE_TIMEOUT_SECONDS

    @classmethod
    def from_config(cls, config: dict[str, Any] | None, streaming: bool) -> RunSettings:
        given = dict(config or {})
        found = given.get("thread_id")  # none: a new thread with a random id
        thread_id = str(uuid.uuid4()) if found is None else valid_thread_id(found)
        run_id = str(given.get("run_id") or generate_id())
        limit = given.get("recursion_limit", DEFAULT_RECURSION_LIMIT)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"config['recursion_limit'] must be a positive int, got {limit!r}")
        timeout = given.get("node_timeout", DEFAULT_NODE_TIMEOUT_SECONDS)
        if timeout is not None and not isinstance(timeout, (int, float)):
            raise ValueError(f"config['node_timeout'] must be seconds or None, got {timeout!r}")
        given.update(thread_id=thread_id, run_id=run_id, recursion_limit=limit, is_stream=streaming)
        given.setdefault("user_id", DEFAULT_ANONYMOUS_USER_ID)
        given.setdefault("node_timeout", timeout)
        fork = given.get("checkpoint_version")
        if fork is not None and (not isinstance(fork, int) or isinstance(fork, bool) or fork < 1):
            raise ValueError(f"config['checkpoint_version'] must be a version number, got {fork!r}")
        strategy = given.get("multitask_strategy", "reject")
        if strategy not in MULTITASK_STRATEGIES:
            raise ValueError(
                f"config['multitask_strategy'] must be one of {list(MULTITASK_STRATEGIES)}, got "
                f"{strategy!r}: what a run does when another run holds its thread"
            )
        wait = given.get("enqueue_timeout", DEFAULT_ENQUEUE_TIMEOUT_SECONDS)
        if wait is not None and (isinstance(wait, bool) or not isinstance(wait, int | float)):
            raise ValueError(f"config['enqueue_timeout'] must be seconds or None, got {wait!r}")
        check_config_keys(given)
        return cls(
            thread_id, run_id, limit, timeout if timeout else None, given, fork, strategy, wait
        )


_DONE = object()
_INPUT_KEYS = frozenset({"messages", "state", "resume"})


class Run:
    """One execution of a compiled graph on one thread."""

    def __init__(
        self,
        app: CompiledGraph,
        input_data: dict[str, Any] | None,
        settings: RunSettings,
        want: frozenset[StreamEvent],
        granularity: ResponseGranularity,
    ) -> None:
        self.app = app
        self.input_data = input_data
        self.settings = settings
        self.want = want
        self.granularity = granularity
        self.result: dict[str, Any] = {}
        self.produced: list[Message] = []
        self.guard = Guard()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.step_tasks: list[asyncio.Task[Any]] = []
        self.stop_asked = False
        self.stop_stored = False  # the stop was asked through the checkpointer (to clear)
        # once stopping, the run's storage calls go ahead of other runs' queued ones
        self.express = Express()
        self.deferred: set[str] = set()
        self.version: int | None = None
        self.next_names: list[str] | None = None
        self.skip_breakpoint = False
        self.current: Sequence[NodeSpec] = ()
        self.streamed: set[str | int] = set()  # ids of messages a NodeEvent already sent
        self._chunk_template: dict[str, Any] | None = None
        # a resubmitted turn that is already answered: its stored answer, run nothing
        self.replay: list[Message] | None = None
        checkpointer = app.checkpointer
        # where this run's tool calls record their results; none without a checkpointer
        self.ledger = None if checkpointer is None else ToolLedger(checkpointer, settings.thread_id)
        # the run's claim on its thread, taken by its first save and released by its last
        self.lease = (
            None
            if checkpointer is None
            else Lease(new_owner(settings.run_id), checkpointer.lease_ttl)
        )
        self.holding = False
        self.lease_lost = False
        self._renewal: asyncio.Task[None] | None = None

    # -- stopping --------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Ask the run to stop: now if a node is running, else at the next step boundary."""
        self.stop_asked = True
        self.express.set()
        self.guard.stop()
        for task in self.step_tasks:
            task.cancel()

    # -- events ----------------------------------------------------------------------------

    @property
    def chunk_template(self) -> dict[str, Any]:
        """The fields every chunk of this run shares; built by the first chunk (an `ainvoke`
        makes none)."""
        shared = self._chunk_template
        if shared is None:
            settings = self.settings
            shared = self._chunk_template = template(
                StreamChunk, thread_id=settings.thread_id, run_id=settings.run_id, timestamp=0.0
            )
        return shared

    def _chunk(self, event: StreamEvent, **values: Any) -> StreamChunk:
        fields = self.chunk_template.copy()
        fields["event"] = event.value
        fields["timestamp"] = time.time()
        fields.update(values)
        return assemble(StreamChunk, fields, {*_CHUNK_SET, *values})

    def _message_chunk(self, message: Message) -> StreamChunk:
        """The hot path of streaming: one chunk per delta."""
        fields = self.chunk_template.copy()
        fields["message"] = message
        fields["timestamp"] = time.time()
        return assemble(StreamChunk, fields, set(_MESSAGE_CHUNK_SET))

    def _event_chunk(self, event: NodeEvent) -> StreamChunk:
        """A node's progress report as a chunk; a message it carries is not sent again when
        the step ends."""
        if event.message is None:
            return self._chunk(event.event, data=event.data)
        self.streamed.add(event.message.message_id)
        return self._chunk(event.event, data=event.data, message=copy_message(event.message))

    def _update(self, status: str, **data: Any) -> StreamChunk:
        return self._chunk(StreamEvent.UPDATES, data={"status": status, **data})

    # -- the loop --------------------------------------------------------------------------

    async def events(self) -> AsyncGenerator[StreamChunk, None]:
        """Run to the end, yielding the chunks the consumer wants."""
        app = self.app
        settings = self.settings
        thread_id = settings.thread_id
        wait = settings.enqueue_timeout
        deadline = None if wait is None else time.monotonic() + wait
        # a thread kept in a checkpointer has one run at a time; without one, runs share nothing
        turn = (
            None
            if app.checkpointer is None
            else await app._take_turn(thread_id, settings.multitask_strategy, deadline, wait)
        )
        app._active[thread_id] = self
        outer_express = current_express.get()
        current_express.set(self.express)
        self.loop = asyncio.get_running_loop()
        self.guard.task = asyncio.current_task()
        started = time.perf_counter()
        state: AgentState | None = None
        try:
            state, inputs = await self._prepare(deadline)
            want = self.want
            if StreamEvent.MESSAGE in want:
                for message in inputs:
                    yield self._chunk(
                        StreamEvent.MESSAGE,
                        message=message,
                        metadata={"status": "invoking_graph", "reason": "input message"},
                    )
            if StreamEvent.UPDATES in want:
                yield self._update("invoking_graph")
            if self.replay is not None:  # an answered turn sent again: its answer, once more
                self.produced = self.replay
                if StreamEvent.MESSAGE in want:
                    for message in self.replay:
                        yield self._chunk(StreamEvent.MESSAGE, message=copy_message(message))
            else:
                # closed here if the consumer stops early: in this task, so that the steps'
                # own cleanup (scopes, running nodes, model streams) runs in their context
                steps = self._steps(state)
                try:
                    async for chunk in steps:
                        yield chunk
                finally:
                    await steps.aclose()
            if StreamEvent.UPDATES in want:
                yield self._update(
                    "graph_invoked",
                    time_taken=time.perf_counter() - started,
                    token_usage=self.token_usage(),
                )
            # the state is kept for the thread's next run only at the low granularity (the
            # others hand out parts of it) and with a checkpointer; then the messages handed
            # out are copies, so what the caller does with them changes nothing
            keep = (
                self.granularity == ResponseGranularity.LOW
                and app.checkpointer is not None
                and self.version is not None
            )
            self.result = self._result(state, inputs, copies=keep)
            if keep:
                app._remember(thread_id, self.version, state)
        except BaseException as exc:
            if state is not None and self.replay is None:
                await self._record_failure(state, exc)
            if isinstance(exc, Exception) and StreamEvent.ERROR in self.want:
                yield self._chunk(StreamEvent.ERROR, data=_error_data(exc))
            raise
        finally:
            self.guard.close()
            await self._let_go()
            if app._active.get(thread_id) is self:
                del app._active[thread_id]
            if turn is not None:
                app._end_turn(turn)
            current_express.set(outer_express)

    async def _prepare(self, deadline: float | None) -> tuple[AgentState, list[Message]]:
        """Load the thread and apply the input, with the run's first save (which takes the
        thread's lease). When another run holds the thread, the multitask strategy decides:
        fail (`reject`), wait for it (`enqueue`), or stop it and wait (`interrupt`). Nothing
        is written until the lease is ours."""
        checkpointer = self.app.checkpointer
        strategy = self.settings.multitask_strategy
        moved = 0
        while True:
            try:
                return await self._prepare_once()
            except ThreadBusyError as busy:
                assert checkpointer is not None  # only a checkpointer has leases
                holder = str(busy.context.get("holder") or "")
                if owner_is_dead(holder):  # crashed on this machine: no need to wait
                    await checkpointer.arelease_lease(self.settings.thread_id, holder)
                    continue
                if strategy == "reject":
                    raise
                if strategy == "interrupt":
                    await checkpointer.arequest_stop(self.settings.thread_id)
                await self._wait_for_thread(deadline)
            except StaleStateError:
                # the thread moved between our read and our first save (another run ended
                # just then); nothing was written, so read it again
                moved += 1
                if moved >= _PREPARE_ATTEMPTS:
                    raise

    async def _wait_for_thread(self, deadline: float | None) -> None:
        """Wait until no live lease holds the thread (or its holder is found dead)."""
        checkpointer = self.app.checkpointer
        assert checkpointer is not None
        thread_id = self.settings.thread_id
        pause, longest = _WAIT_POLL_SECONDS
        while True:
            holder = await checkpointer.alease_holder(thread_id)
            if holder is None:
                return
            if owner_is_dead(holder.owner):
                await checkpointer.arelease_lease(thread_id, holder.owner)
                return
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise waited_error(thread_id, holder.owner, self.settings.enqueue_timeout)
            await asyncio.sleep(min(pause, holder.expires_in, left or pause) + 0.001)
            pause = min(pause * 2, longest)

    async def _prepare_once(self) -> tuple[AgentState, list[Message]]:
        """Load (or create) the thread's state and apply the run's input to it: new messages,
        field values, or the answer to the interrupt the thread is paused at."""
        app = self.app
        thread_id = self.settings.thread_id
        self.next_names, self.deferred, self.skip_breakpoint = None, set(), False
        state, version, forked = await app._checkout(thread_id, self.settings.checkpoint_version)
        data = {} if self.input_data is None else self.input_data
        if not isinstance(data, dict):
            raise ValueError(
                "Input must be a dict like {'messages': [Message, ...], 'state': {...}}, "
                f"not {type(data).__name__}"
            )
        if not _INPUT_KEYS.issuperset(data):
            unknown = set(data) - _INPUT_KEYS
            raise ValueError(
                f"Unknown input key(s) {sorted(unknown)}; the input takes 'messages', 'state' "
                "and 'resume'"
            )
        given = input_messages(data.get("messages"))
        # the thread keeps copies: the caller may go on using (and changing) its objects
        messages = [copy_message(m) for m in given]
        if version is None and "resume" in data:
            raise ValueError(
                f"Nothing to resume: thread {thread_id!r} has no stored state (it is new). "
                "Send {'messages': [...]} to start a run"
            )
        if version is None and not messages:
            raise ValueError(
                "Input data must contain 'messages' for new execution: this thread "
                f"({thread_id!r}) has no stored state, so the run needs at least one message, "
                "e.g. {'messages': [Message.text_message('Hello')]}"
            )
        new_turn = bool(messages)
        resent = version is not None and new_turn and not forked and data.keys() == {"messages"}
        if resent and _all_stored(app, state, messages):
            # sent again (a retry after a lost answer or a timeout): never a second turn.
            # Answered: that answer again; its run unfinished: continue that run.
            self.replay = _answer_to(state, messages[-1])
            if self.replay is not None:
                self.version = version
                return state, given
            messages, new_turn = [], False
        meta = state.execution_meta
        if version is not None:  # a thread that ran before: where did it stop?
            self._continue(state, data, new_turn)
        updates = data.get("state")
        if updates:
            self._set_input_fields(state, updates)
        set_fields(
            meta,
            status=ExecutionStatus.RUNNING,
            thread_id=thread_id,
            interrupted_node=None,
            interrupt_reason=None,
            interrupt_data=None,
            stop_current_execution=StopRequestStatus.NONE,
        )
        if self.next_names is None:
            set_fields(meta, current_node=START)
        meta.internal_data.pop("error", None)
        before = state.context
        if messages:
            set_fields(state, context=app._merge_messages(before, messages))
        # a fork from an earlier version rewrites the log to that version's history
        added = (
            None
            if forked
            else log_entries(before, state.context, app._append_only, version is None)
        )
        self.version = await self._save(state, version, added)
        checkpointer = app.checkpointer
        # a stop asked for while no run held the thread is not meant for this one
        if (
            version is not None
            and checkpointer is not None
            and await checkpointer.ais_stop_requested(thread_id)
        ):
            await checkpointer.aclear_stop_request(thread_id)
        return state, given

    def _continue(self, state: AgentState, data: dict[str, Any], new_turn: bool) -> None:
        """For a thread that ran before: take the answer to the interrupt it is paused at,
        refuse a new turn while it waits for one, and find where its unfinished run stopped."""
        thread_id = self.settings.thread_id
        meta = state.execution_meta
        internal = meta.internal_data
        interrupted = meta.is_interrupted()
        waiting = interrupted and bool(meta.interrupt_data)
        if "resume" in data:
            if not interrupted:
                raise ValueError(
                    f"Nothing to resume: thread {thread_id!r} is not paused (status "
                    f"{meta.status.value}). Send {{'messages': [...]}} to start a run"
                )
            if waiting:
                asked = meta.interrupt_data or {}
                # the node that paused may refuse an answer it cannot use (a ToolNode: a
                # decision missing for a pending tool call), before anything is written
                node = self.app._specs.get(str(asked.get("node")))
                check = getattr(type(node.func), "check_resume", None) if node else None
                if node is not None and check is not None:
                    check(node.func, asked, data["resume"])
                key = str(meta.interrupt_data["key"])  # type: ignore[index]
                scope = key.rsplit(":", 1)[0]
                internal.setdefault("answers", {}).setdefault(scope, []).append(data["resume"])
        elif waiting:
            asked = meta.interrupt_data or {}
            raise ValueError(
                f"Thread {thread_id!r} is paused at an interrupt in {asked.get('node')!r} "
                f"({asked.get('reason')}: {asked.get('message') or asked.get('value')!r}). "
                "Resume it with {'resume': <answer>}"
            )
        # Continue the thread's unfinished run (paused, stopped, crashed or failed) when the
        # input brings no new turn; new messages start a new run, even after a failure (the
        # failed step stays in the thread's history; `ainvoke(None, config)` retries it).
        unfinished = meta.status != ExecutionStatus.COMPLETED and not new_turn
        # where the unfinished run stopped; without a record it never finished its first
        # step (the process died in it), so it starts again from START
        if unfinished and "next" in internal:
            self.next_names = list(internal["next"])
            self.deferred = set(internal.get("deferred") or ())
        else:  # a new run: the last one's bookkeeping must not steer it
            for key in ("next", "deferred", "answers"):
                internal.pop(key, None)
        self.skip_breakpoint = meta.interrupt_reason == "interrupt_before"

    def _set_input_fields(self, state: AgentState, updates: Any) -> None:
        """`input['state']`: field values set (validated) before the run starts."""
        if not isinstance(updates, dict):
            raise ValueError("input['state'] must be a dict of field names to values")
        reserved = RESERVED_FIELDS.intersection(updates)
        if reserved:
            raise ValueError(
                f"input['state'] cannot set {sorted(reserved)}: they belong to the runtime. "
                "Send conversation turns in input['messages']; use your own fields for your data"
            )
        fields = self.app._fields
        for name, value in updates.items():
            if name not in fields:
                raise ValueError(
                    f"input['state'] names unknown field {name!r}; "
                    f"{type(state).__name__} has {sorted(fields - RESERVED_FIELDS)}"
                )
            assign(state, name, value, "input['state']")

    async def _steps(self, state: AgentState) -> AsyncGenerator[StreamChunk, None]:
        app = self.app
        want = self.want
        limit = self.settings.recursion_limit
        if self.next_names is None:
            frontier = await self._route(state, (START,), (None,))
        else:  # continue an unfinished run where it stopped
            frontier = sorted(
                (app._specs[n] for n in self.next_names if n in app._specs), key=_by_index
            )
        steps = 0
        last_poll = time.monotonic()
        while frontier:
            if steps >= limit:
                raise GraphRecursionError(
                    f"Recursion limit of {limit} steps reached before reaching END (next: "
                    f"{[s.name for s in frontier]}). If the graph needs more steps, raise it: "
                    "config={'recursion_limit': 100}",
                    context={"recursion_limit": limit, "next": [s.name for s in frontier]},
                )
            if (
                not self.stop_asked  # asked in this process: no need to ask the store
                and app.checkpointer is not None
                and time.monotonic() - last_poll > _STOP_POLL_SECONDS
            ):
                last_poll = time.monotonic()
                if await app.checkpointer.ais_stop_requested(self.settings.thread_id):
                    self.stop_stored = True
                    self.request_stop()
            if self.stop_asked:
                async for chunk in self._stop(state, frontier):
                    yield chunk
                return
            breakpoint_at = (
                [s.name for s in frontier if s.name in app.interrupt_before]
                if app.interrupt_before and not self.skip_breakpoint
                else None
            )
            if breakpoint_at:
                async for chunk in self._pause(
                    state,
                    ExecutionStatus.INTERRUPTED_BEFORE,
                    breakpoint_at[0],
                    "interrupt_before",
                    None,
                    frontier,
                ):
                    yield chunk
                return
            self.skip_breakpoint = False
            if StreamEvent.UPDATES in want:
                for spec in frontier:
                    yield self._update("invoking_node", node=spec.name, step=steps + 1)
            self.current = frontier
            set_fields(state.execution_meta, current_node=frontier[-1].name)
            pre = dict(state.__dict__)
            pre_len = len(state.context)
            outputs: list[NodeOutput] = []
            views: list[tuple[AgentState, list[Message]]] = [(state, pre["context"])]
            try:
                if len(frontier) == 1:
                    spec = frontier[0]
                    if spec.kind == ASYNC_GEN and (want or spec.whole is None):
                        output = NodeOutput()
                        # iterated here rather than in a helper generator: one relay less
                        # per streamed token
                        guard = self.guard
                        timeout = self.settings.node_timeout
                        scope_token = current_scope.set(self._scope(state, spec))
                        agen = spec.call(state, self.settings.node_config)
                        stream_deltas = StreamEvent.MESSAGE in want
                        guard.start(timeout)
                        try:
                            while True:
                                if guard.timed_out or guard.stopping:
                                    guard.check(spec, timeout, cancelled=False)
                                guard.armed = True
                                try:
                                    item = await agen.__anext__()
                                except StopAsyncIteration:
                                    break
                                except asyncio.CancelledError:
                                    guard.armed = False
                                    guard.check(spec, timeout, cancelled=True)
                                    raise
                                except Exception as exc:
                                    raise node_error(spec, exc) from exc
                                finally:
                                    guard.armed = False
                                if isinstance(item, Message):
                                    if not item.delta:  # a whole message: into the output
                                        output.messages.append(item)
                                    elif stream_deltas:
                                        yield self._message_chunk(item)
                                elif isinstance(item, NodeEvent):
                                    if want:
                                        yield self._event_chunk(item)
                                else:
                                    self._collect(spec, item, output)
                            guard.check(spec, timeout, cancelled=False)
                        finally:
                            guard.disarm()
                            await agen.aclose()
                            current_scope.reset(scope_token)
                    else:
                        output = await self._run_single(spec, state)
                    outputs.append(output)
                else:
                    views = [view_of(state) for _ in frontier]
                    parallel = self._run_parallel(frontier, views, outputs)
                    async with contextlib.aclosing(parallel):
                        async for chunk in parallel:
                            yield chunk
            except BaseException as exc:
                restore(state, pre, pre_len)
                if isinstance(exc, GraphInterrupt):
                    asked = exc.interrupt
                    async for chunk in self._pause(
                        state,
                        ExecutionStatus.INTERRUPTED_BEFORE,
                        asked.node or frontier[-1].name,
                        asked.reason,
                        asked.model_dump(mode="json"),
                        frontier,
                    ):
                        yield chunk
                    return
                if not isinstance(exc, Stopped):
                    raise
                async for chunk in self._stop(state, frontier):
                    yield chunk
                return
            before = pre["context"]
            meta = state.execution_meta
            pre_step = meta.step
            try:
                self._apply(state, frontier, outputs, views, pre, pre_len)
                added = tail(before, state.context, app._append_only)
                steps += 1
                set_fields(meta, step=pre_step + 1)
                answers = meta.internal_data.get("answers")
                if answers:  # this step's interrupts are answered and done with
                    for spec in frontier:
                        answers.pop(f"node:{spec.name}", None)
                    for key in [k for k in answers if k.startswith("tool:")]:
                        del answers[key]
                ran = frontier
                frontier = await self._route(state, [s.name for s in ran], outputs)
                if app.checkpointer is not None:  # where to continue an unfinished run
                    meta.internal_data["next"] = [s.name for s in frontier]
                    meta.internal_data["deferred"] = sorted(self.deferred)
                pause_after = (
                    [s.name for s in ran if s.name in app.interrupt_after]
                    if app.interrupt_after
                    else None
                )
                if pause_after:
                    meta.set_interrupt(
                        pause_after[0], "interrupt_after", ExecutionStatus.INTERRUPTED_AFTER
                    )
                elif not frontier:  # the last step: this save also records the completion
                    _mark_completed(meta)
                self.version = await self._save(
                    state, self.version, added, final=bool(pause_after) or not frontier
                )
            except BaseException:
                restore(state, pre, pre_len)
                set_fields(meta, step=pre_step)
                raise
            new_messages = state.context if added is None else added
            self.produced.extend(new_messages)
            if StreamEvent.MESSAGE in want:
                streamed = self.streamed
                for message in new_messages:
                    if not streamed or message.message_id not in streamed:  # not sent already
                        yield self._chunk(StreamEvent.MESSAGE, message=copy_message(message))
            if StreamEvent.UPDATES in want:
                for spec in ran:
                    yield self._update("node_invoked", node=spec.name, step=steps)
            if StreamEvent.STATE in want:
                yield self._chunk(StreamEvent.STATE, state=snapshot(state))
            if pause_after:
                if want:
                    yield self._update("interrupted", node=pause_after[0], reason="interrupt_after")
                return
        meta = state.execution_meta
        if meta.status != ExecutionStatus.COMPLETED:  # the entry led straight to END
            _mark_completed(meta)
            self.version = await self._save(state, self.version, [], final=True)

    # -- running nodes ---------------------------------------------------------------------

    async def _call(self, spec: NodeSpec, state: AgentState) -> Any:
        """Call a node that is not a generator: async ones directly, sync ones in a worker
        thread (awaiting what they return if it is awaitable)."""
        if spec.kind == ASYNC:
            return await spec.call(state, self.settings.node_config)
        if spec.whole is not None:  # a generator node that can answer in one piece
            return await spec.whole(state, self.settings.node_config)
        value = await asyncio.to_thread(spec.call, state, self.settings.node_config)
        if inspect.isawaitable(value):
            value = await value
        return value

    async def _run_single(self, spec: NodeSpec, state: AgentState) -> NodeOutput:
        guard = self.guard
        timeout = self.settings.node_timeout
        guard.start(timeout)
        guard.armed = True
        scope_token = current_scope.set(self._scope(state, spec))
        try:
            try:
                value = await self._call(spec, state)
            finally:
                guard.disarm()
                current_scope.reset(scope_token)
        except asyncio.CancelledError:
            guard.check(spec, timeout, cancelled=True)
            raise
        except Exception as exc:
            raise node_error(spec, exc) from exc
        guard.check(spec, timeout, cancelled=False)
        return normalize(value, spec.name, self.app._fields)

    async def _run_parallel(
        self,
        specs: Sequence[NodeSpec],
        views: Sequence[tuple[AgentState, list[Message]]],
        outputs: list[NodeOutput],
    ) -> AsyncGenerator[StreamChunk, None]:
        """Run several nodes at once; stream their deltas as they come; fail fast."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        stream_deltas = StreamEvent.MESSAGE in self.want
        results: list[NodeOutput | BaseException | None] = [None] * len(specs)

        async def run(i: int, spec: NodeSpec) -> None:
            deadline = asyncio.timeout(self.settings.node_timeout)
            try:
                async with deadline:
                    results[i] = await self._run_in_task(spec, views[i][0], queue, stream_deltas)
            except TimeoutError as exc:
                if deadline.expired():
                    error = timeout_error(spec, self.settings.node_timeout)
                    error.__cause__ = exc
                    results[i] = error
                else:
                    results[i] = node_error(spec, exc)
            except BaseException as exc:
                results[i] = exc
            finally:
                queue.put_nowait(_DONE)

        self.step_tasks = [asyncio.create_task(run(i, s)) for i, s in enumerate(specs)]
        guard = self.guard
        try:
            remaining = len(specs)
            while remaining:
                guard.armed = True
                try:
                    item = await queue.get()
                finally:
                    guard.armed = False
                if item is _DONE:
                    remaining -= 1
                    if any(isinstance(r, BaseException) for r in results):
                        break
                else:
                    yield item
        except asyncio.CancelledError:
            if not self.stop_asked:
                raise
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
        finally:
            for task in self.step_tasks:
                task.cancel()
            await asyncio.gather(*self.step_tasks, return_exceptions=True)
            self.step_tasks = []
        if self.stop_asked:
            raise Stopped
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                raise result
        outputs.extend(r for r in results if isinstance(r, NodeOutput))

    async def _run_in_task(
        self,
        spec: NodeSpec,
        state: AgentState,
        queue: asyncio.Queue[Any],
        stream_deltas: bool,
    ) -> NodeOutput:
        config = self.settings.node_config
        current_scope.set(self._scope(state, spec))  # this task's own context
        try:
            if spec.kind == ASYNC_GEN:
                output = NodeOutput()
                async for item in spec.call(state, config):
                    if isinstance(item, Message):
                        if not item.delta:
                            output.messages.append(item)
                        elif stream_deltas:
                            queue.put_nowait(self._message_chunk(item))
                    elif isinstance(item, NodeEvent):
                        if self.want:
                            queue.put_nowait(self._event_chunk(item))
                    else:
                        self._collect(spec, item, output)
                return output
            value = await self._call(spec, state)
        except (GraphError, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise node_error(spec, exc) from exc
        return normalize(value, spec.name, self.app._fields)

    def _collect(self, spec: NodeSpec, item: Any, output: NodeOutput) -> None:
        part = normalize(item, spec.name, self.app._fields)
        output.messages.extend(part.messages)
        if part.fields:
            fields, reducers = output.fields, self.app._reducers
            for key, value in part.fields.items():
                if key in fields and key in reducers:  # a second update: merge both, in order
                    previous = fields[key]
                    if not isinstance(previous, FieldUpdates):
                        previous = fields[key] = FieldUpdates([previous])
                    previous.append(value)
                else:
                    fields[key] = value
        if part.goto is not None:
            output.goto = part.goto
        if part.state is not None:
            output.state = part.state

    # -- merging ---------------------------------------------------------------------------

    def _apply(
        self,
        state: AgentState,
        specs: Sequence[NodeSpec],
        outputs: Sequence[NodeOutput],
        views: Sequence[tuple[AgentState, list[Message]]],
        pre: dict[str, Any],
        pre_len: int,
    ) -> None:
        """Merge the step's outputs into the state, node by node in graph order.

        Besides what a node returned, it may have changed its view of the state in place
        (assigned a field, appended to `context`) or returned another state object. Those
        changes are found by comparing with the bindings from before the step and merged like
        returned updates: new messages through the context reducer, an assigned field as a
        replacement of its value. A single node's view is the state itself (its in-place
        changes are undone first); parallel nodes each get their own view.
        """
        replaced: list[dict[str, Any]] = []
        for spec, out, (view, view_context) in zip(specs, outputs, views, strict=True):
            changes: dict[str, Any] = {}
            extra = view_changes(view, view_context, pre, pre_len, changes)
            returned = out.state
            if returned is not None and returned is not view:
                if type(returned) is not type(state):
                    raise NodeError(
                        f"Node {spec.name!r} returned a {type(returned).__name__}; "
                        f"this graph's state is {type(state).__name__}",
                        "NODE_002",
                        {"node": spec.name},
                    )
                extra += context_changes(returned, pre["context"], pre_len)
                for key, value in returned.__dict__.items():
                    if key not in RUNTIME_FIELDS and value is not pre[key]:
                        changes[key] = value
            if extra:
                out.messages[:0] = extra
            replaced.append(changes)
        if len(outputs) == 1:
            messages = outputs[0].messages
        else:
            messages = [m for out in outputs for m in out.messages]
        if messages:
            set_fields(state, context=self.app._merge_messages(state.context, messages))
        for spec, out, changes in zip(specs, outputs, replaced, strict=True):
            if changes or out.fields:
                who = f"node {spec.name!r}"
                for key, value in changes.items():
                    assign(state, key, value, who)
                merge_fields(self.app, state, out.fields, who)

    # -- routing ---------------------------------------------------------------------------

    async def _route(
        self, state: AgentState, names: Sequence[str], outputs: Sequence[NodeOutput | None]
    ) -> list[NodeSpec]:
        """The nodes of the next step, in graph order (joins wait for upstream branches), after
        the nodes `names` ran and returned `outputs`."""
        app = self.app
        routing = app._routing
        app_nodes = app._specs
        if len(names) == 1 and not self.deferred:
            out = outputs[0]
            if out is None or out.goto is None:  # one node's edges and conditions decide
                led_to = await self._targets(state, names[0], routing, app_nodes)
                following = [t for t in led_to if t != END]
                if len(following) <= 1:  # nothing to wait for or to order
                    return [app_nodes[t] for t in following]
                return self._runnable(set(following), routing, app_nodes)
        pending = set(self.deferred)
        for name, out in zip(names, outputs, strict=True):
            if out is not None and out.goto is not None:
                targets: Sequence[str] = out.goto
                for target in targets:
                    if target != END and target not in app_nodes:
                        raise GraphError(
                            f"Node {name!r} returned Command(goto={target!r}), which is not a "
                            f"node of this graph; use one of {sorted(app_nodes)} or END",
                            "GRAPH_004",
                            {"node": name, "goto": target},
                        )
            else:
                targets = await self._targets(state, name, routing, app_nodes)
            pending.update(t for t in targets if t != END)
        if not pending:
            self.deferred = set()
            return []
        return self._runnable(pending, routing, app_nodes)

    async def _targets(
        self, state: AgentState, name: str, routing: Routing, app_nodes: dict[str, NodeSpec]
    ) -> list[str]:
        """Where node `name`'s edges and conditions lead (END included)."""
        targets = list(routing.static.get(name, ()))
        for branch in routing.branches.get(name, ()):
            value = branch.call(state, self.settings.node_config)
            if branch.is_async or inspect.isawaitable(value):
                value = await value
            targets.extend(branch.resolve(value, app_nodes))
        return targets

    def _runnable(
        self, pending: set[str], routing: Routing, app_nodes: dict[str, NodeSpec]
    ) -> list[NodeSpec]:
        """The pending nodes that may run now, in graph order; a join waits while a node
        that leads to it is pending too. The others are deferred."""
        runnable = [
            n
            for n in pending
            if n not in routing.joins or not any(m != n and n in routing.reach[m] for m in pending)
        ] or list(pending)
        self.deferred = pending.difference(runnable)
        return sorted((app_nodes[n] for n in runnable), key=_by_index)

    # -- persistence -----------------------------------------------------------------------

    async def _save(
        self,
        state: AgentState,
        version: int | None,
        added: list[Message] | None,
        *,
        final: bool = False,
    ) -> int | None:
        """Checkpoint: append `added` to the log, or replace the log when it is None. The
        run's first save takes the thread's lease, a `final` one releases it."""
        checkpointer = self.app.checkpointer
        if checkpointer is None:
            return version
        lease = self.lease
        try:
            saved = await checkpointer.asave(
                self.settings.thread_id,
                expected_version=version,
                state=state,
                new_messages=state.context if added is None else added,
                rewrite=added is None,
                lease=lease,
                release=final,
            )
        except (ThreadBusyError, StaleStateError) as exc:
            if not self.holding or lease is None:  # the first save: `_prepare` decides
                raise
            self.holding = False  # someone else took the thread while we held it
            self._stop_heartbeat()
            raise lost_error(self.settings.thread_id, lease.owner) from exc
        if final:
            self.holding = False
            self._stop_heartbeat()
        elif not self.holding:
            self.holding = True
            self._start_heartbeat()
        return saved

    async def _record_failure(self, state: AgentState, exc: BaseException) -> None:
        """Mark the state failed and keep what was done so far."""
        if isinstance(exc, asyncio.CancelledError | GeneratorExit) or not self.holding:
            return  # cancelled (continued later), or the thread is not ours to write
        from tenxgraph.core.redaction import redact, scrub_exception

        state.execution_meta.error(redact(str(scrub_exception(exc))))  # no key is stored
        if self.current:  # `ainvoke(None, config)` retries from the step that failed
            state.execution_meta.internal_data["next"] = [s.name for s in self.current]
            state.execution_meta.internal_data["deferred"] = sorted(self.deferred)
        # the original error matters more than a failed bookkeeping write
        with contextlib.suppress(Exception):
            self.version = await self._save(state, self.version, [], final=True)

    # -- the lease -------------------------------------------------------------------------

    def _start_heartbeat(self) -> None:
        """Renew the lease every third of its life while the run works (a long node or tool
        must not let it expire), on the run's one timer; a run that ends sooner never does."""
        if self.lease is not None:
            self.guard.keep_alive(self.lease.ttl / 3, self._beat)

    def _beat(self) -> None:
        if self._renewal is None or self._renewal.done():  # one renewal at a time
            self._renewal = asyncio.ensure_future(self._renew())

    async def _renew(self) -> None:
        checkpointer, lease = self.app.checkpointer, self.lease
        if checkpointer is None or lease is None:
            return
        try:
            kept = await checkpointer.arenew_lease(self.settings.thread_id, lease)
        except Exception:  # storage hiccup: try again at the next beat; a save would tell
            kept = True
        if not kept and self.holding:  # taken over by another run: this one must stop now
            self.lease_lost = True
            self.request_stop()

    def _stop_heartbeat(self) -> None:
        self.guard.stop_beating()
        if self._renewal is not None and not self._renewal.done():
            self._renewal.cancel()

    async def _let_go(self) -> None:
        """At the end of a run that still holds its lease (cancelled, or its last save
        failed): release it, so the thread can be continued at once."""
        self._stop_heartbeat()
        checkpointer, lease = self.app.checkpointer, self.lease
        if self.holding and checkpointer is not None and lease is not None:
            self.holding = False
            with contextlib.suppress(Exception):  # else it expires after its ttl
                await checkpointer.arelease_lease(self.settings.thread_id, lease.owner)

    def _scope(self, state: AgentState, spec: NodeSpec) -> InterruptScope:
        """What `interrupt()` inside this node sees: the answers given to it so far."""
        answers = state.execution_meta.internal_data.get("answers")
        given = list(answers.get(f"node:{spec.name}", ())) if answers else []
        return InterruptScope("node", spec.name, spec.name, given, ledger=self.ledger)

    async def _pause(
        self,
        state: AgentState,
        status: ExecutionStatus,
        node: str,
        reason: str,
        data: dict[str, Any] | None,
        frontier: Sequence[NodeSpec],
    ) -> AsyncIterator[StreamChunk]:
        """Save the thread paused before `frontier`, to be continued from there."""
        meta = state.execution_meta
        meta.set_interrupt(node, reason, status, data)
        meta.internal_data["next"] = [s.name for s in frontier]
        meta.internal_data["deferred"] = sorted(self.deferred)
        self.version = await self._save(state, self.version, [], final=True)
        if self.want:  # every granularity is told: a paused run needs its caller
            yield self._update("interrupted", node=node, reason=reason, interrupt=data)

    async def _stop(
        self, state: AgentState, frontier: Sequence[NodeSpec]
    ) -> AsyncIterator[StreamChunk]:
        if self.lease_lost and self.lease is not None:  # stopped because another run took over
            raise lost_error(self.settings.thread_id, self.lease.owner)
        # a stop asked in this process left nothing in the store (one asked through the store
        # meanwhile is cleared by the thread's next run, which ignores older requests)
        if self.stop_stored and self.app.checkpointer is not None:
            await self.app.checkpointer.aclear_stop_request(self.settings.thread_id)
        state.execution_meta.stop_current_execution = StopRequestStatus.STOPPED
        node = frontier[-1].name if frontier else state.execution_meta.current_node
        async for chunk in self._pause(
            state, ExecutionStatus.INTERRUPTED_AFTER, node, "stop_requested", None, frontier
        ):
            yield chunk

    # -- result ----------------------------------------------------------------------------

    def token_usage(self) -> dict[str, int]:
        total_in = total_out = total_reasoning = 0
        for message in self.produced:
            usage = message.usages
            if usage is not None:
                total_in += usage.prompt_tokens
                total_out += usage.completion_tokens
                total_reasoning += usage.reasoning_tokens
        return {
            "total_input_tokens": total_in,
            "total_output_tokens": total_out,
            "total_reasoning_tokens": total_reasoning,
            "total_tokens": total_in + total_out,
        }

    def _result(self, state: AgentState, inputs: list[Message], copies: bool) -> dict[str, Any]:
        last_user = next((m for m in reversed(inputs) if m.role == "user"), None)
        messages = [last_user] if last_user is not None else []
        messages += map(copy_message, self.produced) if copies else self.produced
        usage = self.token_usage()
        granularity = self.granularity
        if granularity == ResponseGranularity.FULL:
            return {"state": state, "messages": messages, "token_usage": usage}
        result: dict[str, Any] = {"messages": messages, "token_usage": usage}
        if granularity == ResponseGranularity.PARTIAL:
            result["context"] = list(state.context)
            result["summary"] = state.context_summary
        meta = state.execution_meta
        if meta.is_interrupted():
            result["interrupted"] = {
                "node": meta.interrupted_node,
                "reason": meta.interrupt_reason,
                "status": meta.status.value,
            }
            if meta.interrupt_data:
                result["interrupt"] = meta.interrupt_data
        return result


def _all_stored(app: CompiledGraph, state: AgentState, messages: list[Message]) -> bool:
    """Whether every one of `messages` is already in the thread (by id): a resubmission."""
    return app._append_only and all_stored(state.context, messages)


def _answer_to(state: AgentState, message: Message) -> list[Message] | None:
    """The stored answer to a user turn: the messages after it, up to the next user message.
    None if its run has not finished (it is the last turn and the thread is not completed)."""
    context = state.context
    wanted = message.message_id
    at = next((i for i in range(len(context) - 1, -1, -1) if context[i].message_id == wanted), -1)
    if at < 0:
        return None
    after = context[at + 1 :]
    following = next((i for i, m in enumerate(after) if m.role == "user"), None)
    if following is not None:
        return list(after[:following])
    if state.execution_meta.status == ExecutionStatus.COMPLETED:
        return list(after)
    return None


def _mark_completed(meta: ExecutionState) -> None:
    set_fields(meta, status=ExecutionStatus.COMPLETED)
    for key in ("next", "deferred", "answers"):
        meta.internal_data.pop(key, None)


def _by_index(spec: NodeSpec) -> int:
    return spec.index


def _error_data(exc: Exception) -> dict[str, Any]:
    from tenxgraph.core.redaction import redact

    error = redact(str(exc))  # no key is streamed
    data: dict[str, Any] = {"status": "error", "error": error, "error_type": type(exc).__name__}
    if isinstance(exc, GraphError):
        data["error_code"] = exc.error_code
        data.update({k: v for k, v in exc.context.items() if k in ("node", "field")})
    return data


ContextMerge = Callable[[list[Message], list[Message]], list[Message]]

__all__ = ["WANTED", "Run", "RunSettings"]
