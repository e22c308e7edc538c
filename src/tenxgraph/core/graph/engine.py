"""The run loop: one async generator behind `ainvoke`, `astream`, `invoke` and `stream`.

A run is a sequence of super-steps. In each step the active nodes run (concurrently when there
are several), their outputs merge into the state through the field reducers in a fixed order,
the step is checkpointed, and the edges give the next set of nodes. Events are only built when
the consumer asked for them, so `ainvoke` pays for none.

The parts a run is made of live beside it: `Opening` (the thread, the input and the first
save), `NodeRunner` (calling nodes), `merge.apply_step` (their outputs into the state),
`Scheduler` (the next step), `Keeper` (saves and the thread's lease), `Chunks` (events).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from tenxgraph.core.exceptions import GraphError, GraphRecursionError
from tenxgraph.core.graph.chunks import Chunks
from tenxgraph.core.graph.execution import NodeRunner
from tenxgraph.core.graph.guard import Guard, Stopped
from tenxgraph.core.graph.keeper import Keeper
from tenxgraph.core.graph.ledger import ToolLedger
from tenxgraph.core.graph.merge import (
    apply_step,
    copy_message,
    handed_out,
    restore,
    set_fields,
    snapshot,
    tail,
    view_of,
)
from tenxgraph.core.graph.nesting import Nesting, current_run
from tenxgraph.core.graph.node import ASYNC_GEN, NodeOutput, NodeSpec
from tenxgraph.core.graph.opening import Opening
from tenxgraph.core.graph.program import Program
from tenxgraph.core.graph.run_config import RunSettings
from tenxgraph.core.graph.scheduler import Scheduler, recorded
from tenxgraph.core.graph.threads import Threads
from tenxgraph.core.state import AgentState, Message, StreamChunk, StreamEvent
from tenxgraph.core.state.execution_state import ExecutionState, ExecutionStatus, StopRequestStatus
from tenxgraph.core.state.lazy_history import LazyHistory
from tenxgraph.core.state.reducers import seal_history
from tenxgraph.core.state.sealed import seal
from tenxgraph.core.state.spending import BudgetSpent, Meter
from tenxgraph.observability.hooks import Dispatch, hooks_from
from tenxgraph.observability.observer import TRACE_KEY, Observer, current_observer
from tenxgraph.observability.settings import tracer_for
from tenxgraph.storage.checkpointer._express import Express, current_express
from tenxgraph.storage.checkpointer.paging import alook_up_ids
from tenxgraph.utils.command import ParentCommand
from tenxgraph.utils.constants import START, ResponseGranularity
from tenxgraph.utils.interrupt import GraphInterrupt

if TYPE_CHECKING:
    from tenxgraph.core.graph.nesting import Parent
    from tenxgraph.core.graph.results import RunResult

_STOP_POLL_SECONDS = 0.05


class Run:
    """One execution of a compiled graph on one thread."""

    def __init__(
        self,
        program: Program,
        threads: Threads,
        input_data: dict[str, Any] | None,
        settings: RunSettings,
        want: frozenset[StreamEvent],
        granularity: ResponseGranularity,
        nesting: Nesting | None = None,
    ) -> None:
        self.program = program
        self.nesting = nesting
        self.state: AgentState | None = None  # the thread's state, once opened
        # the threads of subgraph runs this step finished: deleted once the step is saved
        self.finished_children: list[str] = []
        self.threads = threads
        self.input_data = input_data
        self.settings = settings
        self.want = want
        self.granularity = granularity
        self.result: RunResult[Any] = {}  # type: ignore[typeddict-item]  # set at the end
        self.produced: list[Message] = []
        self.guard = guard = Guard()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stop_asked = False
        self.stop_stored = False  # the stop was asked through the checkpointer (to clear)
        # once stopping, the run's storage calls go ahead of other runs' queued ones
        self.express = Express()
        self.version: int | None = None
        self.current: Sequence[NodeSpec] = ()
        self.chunks = (
            Chunks(settings.thread_id, settings.run_id)
            if nesting is None
            else Chunks(nesting.thread_id, nesting.run_id, nesting.namespace)
        )
        checkpointer = program.checkpointer
        self.keeper = Keeper(
            checkpointer,
            settings.thread_id,
            settings.run_id,
            guard,
            self.request_stop,
            program.media,
        )
        self.lease = self.keeper.lease
        # where this run's tool calls record their results; none without a checkpointer
        ledger = None if checkpointer is None else ToolLedger(checkpointer, settings.thread_id)
        self.observer = observer = observer_of(program, settings)
        if program.budget is not None:
            observer.meter = Meter(program.budget.tightest(settings.budget))
        elif settings.budget is not None:
            observer.meter = Meter(settings.budget)
        self.nodes = NodeRunner(program, settings, guard, self.chunks, want, ledger, observer)
        self.scheduler = Scheduler(program, settings.node_config)
        # the running step: the state's bindings before it, its length of `context`, each
        # node's view of the state (with its `context` as it was); then the messages it added
        self._pre: dict[str, Any] = {}
        self._pre_len = 0
        self._views: list[tuple[AgentState, list[Message]]] = []
        self._added: list[Message] = []
        self._last_poll = time.monotonic()  # when the store was last asked for a stop
        self._outer_observer: Observer | None = None
        self._outer_run: Parent | None = None

    def request_stop(self) -> None:
        """Ask the run to stop: now if a node is running, else at the next step boundary."""
        self.stop_asked = True
        self.express.set()
        self.guard.stop()
        self.nodes.stop()

    # -- the run ---------------------------------------------------------------------------

    async def events(self) -> AsyncGenerator[StreamChunk, None]:
        """Run to the end, yielding the chunks the consumer wants. The super-steps run right
        here, not in a generator of their own: one relay less per streamed token."""
        want, chunks = self.want, self.chunks
        started = time.perf_counter()
        deadline, turn, outer_express = await self._begin()
        state: AgentState | None = None
        failure: BaseException | None = None
        opening = Opening(self.program, self.threads, self.keeper, self.settings, self.input_data)
        try:
            self.state = state = await opening.open(deadline)
            self.version = opening.version
            opening.opened(state, self.observer)  # what a paused run or the thread had spent
            async for chunk in self._started(opening):
                yield chunk
            if opening.replay is not None:  # an answered turn sent again: its answer again
                self.produced = opening.replay
            else:
                frontier = await self._first_step(state, opening)
                skip_breakpoint, steps = opening.skip_breakpoint, 0
                while frontier:  # a super-step
                    limit = self.settings.recursion_limit
                    if steps >= limit:
                        raise GraphRecursionError.limit_reached(limit, [s.name for s in frontier])
                    paused = (
                        await self._paused_before(state, frontier, skip_breakpoint)
                        if self._may_pause(skip_breakpoint)
                        else None
                    )
                    if paused is not None:
                        async for chunk in paused:
                            yield chunk
                        break
                    skip_breakpoint, steps = False, steps + 1
                    if StreamEvent.UPDATES in want:
                        for spec in frontier:
                            yield chunks.update("invoking_node", node=spec.name, step=steps)
                    outputs: list[NodeOutput] = []
                    ran = self._start(state, frontier, outputs)
                    try:  # closed here if the consumer stops early, in this task
                        if ran is None:  # one node that streams nothing: no stream to relay
                            outputs.append(await self.nodes.run(frontier[0], state))
                        else:
                            async with contextlib.aclosing(ran):
                                async for chunk in ran:
                                    yield chunk
                    except BaseException as exc:
                        restore(state, self._pre, self._pre_len)  # nothing of it stays
                        async for chunk in self._halted(state, frontier, exc):
                            yield chunk
                        break
                    frontier, pause_after = await self._commit(state, frontier, outputs)
                    if want:
                        async for chunk in self._step_ended(state, steps, pause_after):
                            yield chunk
                    if pause_after:
                        break
                else:  # no node left: the run completed
                    await self._completed(state)
            if StreamEvent.UPDATES in want:
                taken = time.perf_counter() - started
                yield chunks.update(
                    "graph_invoked", time_taken=taken, token_usage=self.token_usage()
                )
            self._finish(state, opening.given)
        except ParentCommand:  # a subgraph's run ended by routing in its parent's graph
            raise
        except BaseException as exc:
            failure = exc
            if state is not None and opening.replay is None:
                self.observer.tally(state.execution_meta)
                self.version = await self.keeper.record_failure(
                    state, self.version, exc, recorded(self.current), self.scheduler.deferred
                )
            if isinstance(exc, Exception) and StreamEvent.ERROR in want:
                yield chunks.error(exc)
            raise
        finally:
            await self._end(turn, outer_express, state, failure)

    async def _begin(self) -> tuple[float | None, tuple[int, str] | None, Express | None]:
        """Take the thread among this app's runs (a thread kept in a checkpointer has one run
        at a time; without one, runs share nothing) and make this run's storage calls its
        own: the enqueue deadline, the turn, and the express lane to restore at the end."""
        settings, threads = self.settings, self.threads
        wait = settings.enqueue_timeout
        deadline = None if wait is None else time.monotonic() + wait
        thread_id = settings.thread_id
        await self.observer.run_started()
        try:
            turn = (
                None
                if self.program.checkpointer is None
                else await threads.take_turn(thread_id, settings.multitask_strategy, deadline, wait)
            )
        except BaseException as exc:  # the thread is busy: the run ends before it began
            await self.observer.run_finished(exc, None)
            raise
        threads.active[thread_id] = self
        outer_express = current_express.get()
        current_express.set(self.express)
        self._outer_observer = current_observer.get()  # a run inside a node of another
        current_observer.set(self.observer)
        self._outer_run = current_run.get()
        current_run.set(self)
        self.loop = asyncio.get_running_loop()
        self.guard.task = asyncio.current_task()
        return deadline, turn, outer_express

    async def _end(
        self,
        turn: tuple[int, str] | None,
        outer_express: Express | None,
        state: AgentState | None,
        failure: BaseException | None,
    ) -> None:
        """Let go of the thread (the timer, the lease, the turn, the express lane) and report
        how the run ended."""
        self.guard.close()
        await self.keeper.let_go()
        threads, thread_id = self.threads, self.settings.thread_id
        if threads.active.get(thread_id) is self:
            del threads.active[thread_id]
        if turn is not None:
            threads.end_turn(turn)
        current_express.set(outer_express)
        current_observer.set(self._outer_observer)
        current_run.set(self._outer_run)
        meta = state.execution_meta if state is not None and failure is None else None
        paused = None
        if meta is not None and meta.is_interrupted():
            paused = (meta.interrupted_node or "", meta.interrupt_reason or "")
        await self.observer.run_finished(failure, paused)

    def _finish(self, state: AgentState, given: list[Message]) -> None:
        """The run's result, and the state kept for the thread's next run (with a
        checkpointer). What the result hands out of the kept state is sealed first (the
        messages) or copied (the other fields), so nothing the caller does to it changes the
        thread; handing out the conversation costs a list copy."""
        keep = self.program.checkpointer is not None and self.version is not None
        self.result = self._result(state, given, sealed=keep)
        meter = self.observer.meter
        report = None if meter is None else meter.report()
        if report is not None:  # a budget ended the run
            self.result["budget"] = report
        if keep:
            self.threads.remember(self.settings.thread_id, self.version, state)

    async def _started(self, opening: Opening) -> AsyncIterator[StreamChunk]:
        """The chunks of a run's start: its input, the answer of a turn sent again, the
        thread's budget spent before it."""
        want, chunks, replay = self.want, self.chunks, opening.replay
        if StreamEvent.MESSAGE in want and self.nesting is None:  # a subgraph's: its parent's
            for message in opening.given:
                yield chunks.chunk(
                    StreamEvent.MESSAGE,
                    message=message,
                    metadata={"status": "invoking_graph", "reason": "input message"},
                )
        if StreamEvent.UPDATES in want:
            yield chunks.update("invoking_graph")
        if replay is not None and StreamEvent.MESSAGE in want:
            for message in replay:
                yield chunks.chunk(StreamEvent.MESSAGE, message=copy_message(message))
        if opening.spent is not None and want:
            yield chunks.update("budget_spent", limit=opening.spent)

    async def _first_step(self, state: AgentState, opening: Opening) -> list[NodeSpec]:
        """Where the run starts: after START, or where an unfinished run stopped; nowhere
        when the thread's budget was spent before it (the run completes at once)."""
        if opening.spent is not None:
            return []
        if opening.next_names is None:
            return await self.scheduler.next(state, (START,), (None,))
        return self.scheduler.resume(opening.next_names, opening.deferred)

    async def _completed(self, state: AgentState) -> None:
        """No node is left. The last step's save recorded the completion; a run whose entry
        led straight to END records it here."""
        meta = state.execution_meta
        if meta.status != ExecutionStatus.COMPLETED:
            _mark_completed(meta)
            self.observer.tally(meta)
            self.version = await self.keeper.save(state, self.version, [], final=True)

    def _may_pause(self, skip_breakpoint: bool) -> bool:
        """Whether the next step may not start: a stop asked here, the store's stop requests
        due for a look, or a breakpoint to check. Most steps need none of it."""
        return (
            self.stop_asked
            or (bool(self.program.interrupt_before) and not skip_breakpoint)
            or (
                self.program.checkpointer is not None
                and time.monotonic() - self._last_poll > _STOP_POLL_SECONDS
            )
        )

    async def _paused_before(
        self, state: AgentState, frontier: list[NodeSpec], skip_breakpoint: bool
    ) -> AsyncIterator[StreamChunk] | None:
        """Before a step: the pause of a run asked to stop (here or through the store) or at
        an `interrupt_before` breakpoint; None to go on."""
        program = self.program
        checkpointer = program.checkpointer
        if (
            not self.stop_asked  # asked in this process: no need to ask the store
            and checkpointer is not None
            and time.monotonic() - self._last_poll > _STOP_POLL_SECONDS
        ):
            self._last_poll = time.monotonic()
            if await checkpointer.ais_stop_requested(self.settings.thread_id):
                self.stop_stored = True
                self.request_stop()
        if self.stop_asked:
            return self._stop(state, frontier)
        if skip_breakpoint or not program.interrupt_before:
            return None
        before = [s.name for s in frontier if s.name in program.interrupt_before]
        if not before:
            return None
        status = ExecutionStatus.INTERRUPTED_BEFORE
        return self._pause(state, status, before[0], "interrupt_before", None, frontier)

    def _start(
        self, state: AgentState, frontier: list[NodeSpec], outputs: list[NodeOutput]
    ) -> AsyncGenerator[StreamChunk, None] | None:
        """Start a super-step: the stream of its nodes' chunks, their outputs going to
        `outputs` as they finish; None for one node that streams nothing (await its `run`)."""
        self.current = frontier
        set_fields(state.execution_meta, current_node=frontier[-1].name)
        self._pre = pre = dict(state.__dict__)
        self._pre_len = len(state.context)
        if len(frontier) > 1:  # each node gets a view of its own
            self._views = views = [view_of(state) for _ in frontier]
            return self.nodes.parallel(frontier, [v[0] for v in views], outputs)
        self._views = [(state, pre["context"])]
        spec = frontier[0]
        if spec.kind == ASYNC_GEN and (self.want or spec.whole is None):
            output = NodeOutput()
            outputs.append(output)
            return self.nodes.stream(spec, state, output)
        return None

    async def _halted(
        self, state: AgentState, frontier: list[NodeSpec], exc: BaseException
    ) -> AsyncIterator[StreamChunk]:
        """A step that did not finish: paused by an `interrupt()` in a node, or stopped;
        anything else is the run's error."""
        if isinstance(exc, GraphInterrupt):
            asked = exc.interrupt
            status = ExecutionStatus.INTERRUPTED_BEFORE
            node = asked.node or frontier[-1].name
            data = asked.model_dump(mode="json")
            async for chunk in self._pause(state, status, node, asked.reason, data, frontier):
                yield chunk
        elif isinstance(exc, Stopped):
            async for chunk in self._stop(state, frontier):
                yield chunk
        elif isinstance(exc, ParentCommand):
            await self._to_parent(state, frontier, exc)
        elif isinstance(exc, BudgetSpent):  # nothing left to spend: the run ends here
            await self._completed(state)
            if self.want:
                yield self.chunks.update("budget_spent", limit=exc.args[0])
        else:
            raise exc

    async def _to_parent(
        self, state: AgentState, frontier: Sequence[NodeSpec], exc: ParentCommand
    ) -> None:
        """A node returned `Command(graph=Command.PARENT)`: this subgraph's run ends (saved
        as completed, the step that routed out left undone) and the command goes up to the
        node running it, with this run's state."""
        if self.nesting is None:
            raise GraphError(
                f"Node {frontier[-1].name!r} returned Command(graph=Command.PARENT), but graph "
                f"{self.program.name!r} is not running as a subgraph: there is no parent to route "
                "in. Return Command(goto=...) to route in this graph",
                "GRAPH_004",
                {"node": frontier[-1].name},
            )
        _mark_completed(state.execution_meta)
        self.observer.tally(state.execution_meta)
        self.version = await self.keeper.save(state, self.version, [], final=True)
        exc.state = state
        raise exc

    async def _commit(
        self, state: AgentState, ran: list[NodeSpec], outputs: list[NodeOutput]
    ) -> tuple[list[NodeSpec], list[str] | None]:
        """Merge the step's outputs, find the next step and save; the next step and the nodes
        an `interrupt_after` pauses at. Undone (the state as before the step) if it fails."""
        program, pre, pre_len = self.program, self._pre, self._pre_len
        before = pre["context"]
        meta = state.execution_meta
        pre_step = meta.step
        try:
            if type(state.context) is LazyHistory:  # which new ids the store holds, unblocked
                await alook_up_ids(state.context, [m for o in outputs for m in o.messages])
            parts = zip(ran, outputs, self._views, strict=True)
            apply_step(program, state, [(s.name, o, v, c) for s, o, (v, c) in parts], pre, pre_len)
            added = tail(before, state.context, program.append_only)
            set_fields(meta, step=pre_step + 1)
            answers = meta.internal_data.get("answers")
            if answers:  # this step's interrupts are answered and done with
                for spec in ran:
                    answers.pop(f"node:{spec.key}", None)
                for key in [k for k in answers if k.startswith("tool:")]:
                    del answers[key]
            frontier = await self.scheduler.next(state, [s.name for s in ran], outputs)
            if program.checkpointer is not None:  # where to continue an unfinished run
                meta.internal_data["next"] = recorded(frontier)
                meta.internal_data["deferred"] = sorted(self.scheduler.deferred)
            after = program.interrupt_after
            pause_after = [s.name for s in ran if s.name in after] if after else None
            if pause_after:
                meta.set_interrupt(
                    pause_after[0], "interrupt_after", ExecutionStatus.INTERRUPTED_AFTER
                )
            elif not frontier:  # the last step: this save also records the completion
                _mark_completed(meta)
            final = bool(pause_after) or not frontier
            observer = self.observer
            if added:
                observer.count_answers(added)
            observer.tally(meta)
            self.version = await self.keeper.save(
                state, self.version, added, final=final, step=True
            )
        except BaseException:
            restore(state, pre, pre_len)
            set_fields(meta, step=pre_step)
            raise
        self._added = state.context if added is None else added
        self.produced.extend(self._added)
        if self.finished_children:  # the parent has all of them now
            children, self.finished_children = self.finished_children, []
            await self.keeper.delete_children(children)
        return frontier, pause_after

    async def _step_ended(
        self, state: AgentState, step: int, pause_after: list[str] | None
    ) -> AsyncIterator[StreamChunk]:
        """The chunks of a saved step: its new messages (those not streamed already), the
        nodes that ran, the state."""
        want, chunks = self.want, self.chunks
        if StreamEvent.MESSAGE in want:
            streamed = chunks.streamed
            for message in self._added:
                if not streamed or message.message_id not in streamed:  # not sent already
                    yield chunks.chunk(StreamEvent.MESSAGE, message=copy_message(message))
        if StreamEvent.UPDATES in want:
            for spec in self.current:
                yield chunks.update("node_invoked", node=spec.name, step=step)
        if StreamEvent.STATE in want:
            yield chunks.chunk(StreamEvent.STATE, state=snapshot(state))
        if pause_after and want:
            yield chunks.update("interrupted", node=pause_after[0], reason="interrupt_after")

    # -- pausing and stopping --------------------------------------------------------------

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
        internal = meta.internal_data
        internal["next"] = recorded(frontier)
        internal["deferred"] = sorted(self.scheduler.deferred)
        await self.observer.interrupted(node, reason, data, internal)
        self.observer.tally(meta)
        self.version = await self.keeper.save(state, self.version, [], final=True)
        if self.want:  # every granularity is told: a paused run needs its caller
            yield self.chunks.update("interrupted", node=node, reason=reason, interrupt=data)

    async def _stop(
        self, state: AgentState, frontier: Sequence[NodeSpec]
    ) -> AsyncIterator[StreamChunk]:
        lost = self.keeper.lost_error()
        if lost is not None:  # stopped because another run took the thread over
            raise lost
        # a stop asked in this process left nothing in the store (one asked through the store
        # meanwhile is cleared by the thread's next run, which ignores older requests)
        checkpointer = self.program.checkpointer
        if self.stop_stored and checkpointer is not None:
            await checkpointer.aclear_stop_request(self.settings.thread_id)
        state.execution_meta.stop_current_execution = StopRequestStatus.STOPPED
        node = frontier[-1].name if frontier else state.execution_meta.current_node
        async for chunk in self._pause(
            state, ExecutionStatus.INTERRUPTED_AFTER, node, "stop_requested", None, frontier
        ):
            yield chunk

    # -- result ----------------------------------------------------------------------------

    def token_usage(self) -> dict[str, Any]:
        """What this run's model calls cost (tokens, calls, and the cost in US dollars, None
        when a model's price is unknown); a turn answered again from the thread cost none."""
        return self.observer.usage.as_token_usage()

    def _result(self, state: AgentState, inputs: list[Message], sealed: bool) -> RunResult[Any]:
        last_user = next((m for m in reversed(inputs) if m.role == "user"), None)
        messages = [last_user] if last_user is not None else []
        messages += self.produced
        usage = self.token_usage()
        granularity = self.granularity
        if granularity == ResponseGranularity.LOW:
            if sealed:
                for message in self.produced:
                    seal(message)
            result: RunResult[Any] = {"messages": messages, "token_usage": usage}
        elif granularity == ResponseGranularity.FULL:
            return {"state": handed_out(state) if sealed else state, "messages": messages,
                    "token_usage": usage}  # fmt: skip
        else:
            if sealed:
                seal_history(state.context)
            context = state.context.copy()
            result = {"messages": messages, "token_usage": usage, "context": context,
                      "summary": state.context_summary}  # fmt: skip
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


def observer_of(program: Program, settings: RunSettings) -> Observer:
    """The run's observer: the graph's hooks and those of the call's config, the tracer."""
    dispatch = program.dispatch
    extra = settings.node_config.get("hooks")
    if extra is not None:
        dispatch = Dispatch([*program.hooks, *hooks_from(extra, "config['hooks']")])
    tracer = tracer_for(program.tracing)
    content = tracer is not None and program.tracing.content()
    return Observer(settings.run_id, settings.thread_id, program.name, dispatch, tracer, content)


def _mark_completed(meta: ExecutionState) -> None:
    set_fields(meta, status=ExecutionStatus.COMPLETED)
    for key in ("next", "deferred", "answers", TRACE_KEY):
        meta.internal_data.pop(key, None)


__all__ = ["Run"]
