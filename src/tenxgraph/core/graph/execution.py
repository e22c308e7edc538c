"""`NodeRunner`: how a run calls its nodes.

Async functions are awaited, sync ones run in a worker thread, generator nodes are iterated
(their `delta=True` messages stream out as chunks, their whole messages and updates make the
node's output). One node runs in the run's own task under the run's guard (timeout and stop);
several run in tasks of their own and fail fast. Every node sees the answers given so far to
its `interrupt()` calls.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncGenerator, Coroutine, Sequence
from typing import Any

from tenxgraph.core.exceptions import GraphError
from tenxgraph.core.graph.chunks import Chunks
from tenxgraph.core.graph.guard import Guard, Stopped, node_error, timeout_error
from tenxgraph.core.graph.ledger import ToolLedger
from tenxgraph.core.graph.node import (
    ASYNC,
    ASYNC_GEN,
    FieldUpdates,
    NodeEvent,
    NodeOutput,
    NodeSpec,
    normalize,
)
from tenxgraph.core.graph.program import Program
from tenxgraph.core.graph.run_config import RunSettings
from tenxgraph.core.state import AgentState, CustomEvent, Message, StreamChunk, StreamEvent
from tenxgraph.observability.observer import NodeWatch, Observer
from tenxgraph.utils.interrupt import InterruptScope, current_scope

_DONE = object()


class NodeRunner:
    """Runs one run's nodes, one step at a time."""

    def __init__(
        self,
        program: Program,
        settings: RunSettings,
        guard: Guard,
        chunks: Chunks,
        want: frozenset[StreamEvent],
        ledger: ToolLedger | None,
        observer: Observer,
    ) -> None:
        self.program = program
        self.observer = observer
        self.config = settings.node_config
        self.timeout = settings.node_timeout
        self.max_concurrency = settings.max_concurrency  # nodes of one step at once
        self.guard = guard
        self.chunks = chunks
        self.want = want
        self.ledger = ledger
        self.tasks: list[asyncio.Task[Any]] = []  # parallel nodes of the running step
        self.stopping = False

    def stop(self) -> None:
        """Cancel the nodes running in tasks of their own (the run's own task is the guard's)."""
        self.stopping = True
        for task in self.tasks:
            task.cancel()

    def scope(self, state: AgentState, spec: NodeSpec) -> InterruptScope:
        """What `interrupt()` inside this node sees: the answers given to it so far."""
        answers = state.execution_meta.internal_data.get("answers")
        given = list(answers.get(f"node:{spec.key}", ())) if answers else []
        return InterruptScope("node", spec.key, spec.name, given, ledger=self.ledger)

    # -- one node in the run's task --------------------------------------------------------

    async def stream(
        self, spec: NodeSpec, state: AgentState, output: NodeOutput
    ) -> AsyncGenerator[StreamChunk, None]:
        """Iterate a generator node, yielding its chunks; what it produced goes to `output`."""
        guard = self.guard
        timeout = self.timeout
        chunks = self.chunks
        want = self.want
        stream_deltas = StreamEvent.MESSAGE in want
        watch = self.observer.node(spec.name, state) if self.observer.watching else None
        if watch is not None:
            await watch.start()
        failure: BaseException | None = None
        scope_token = current_scope.set(self.scope(state, spec))
        agen = spec.call(state, self.config)
        guard.start(timeout)
        try:
            while True:
                if guard.timed_out or guard.stopping:
                    guard.check(spec, timeout, cancelled=False)
                guard.armed = True
                entered = None if watch is None else watch.enter()
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
                    if entered is not None:
                        watch.leave(entered)  # type: ignore[union-attr]
                if isinstance(item, Message):
                    if not item.delta:  # a whole message: into the output
                        output.messages.append(item)
                    elif stream_deltas:
                        yield chunks.message(item)
                elif isinstance(item, NodeEvent):
                    if want:
                        yield chunks.event(item)
                elif isinstance(item, CustomEvent):
                    if StreamEvent.CUSTOM in want:
                        yield chunks.custom(item)
                elif isinstance(item, StreamChunk):  # a subgraph's, as it is
                    if want:
                        yield item
                else:
                    self.collect(spec, item, output)
            guard.check(spec, timeout, cancelled=False)
        except BaseException as exc:
            failure = exc
            raise
        finally:
            guard.disarm()
            # closed with its context current, as it ran: a span it holds open ends in it
            entered = None if watch is None else watch.enter()
            try:
                await agen.aclose()
            finally:
                if entered is not None:
                    watch.leave(entered)  # type: ignore[union-attr]
            current_scope.reset(scope_token)
            if watch is not None:
                await watch.end(failure, isinstance(failure, Stopped))

    async def run(self, spec: NodeSpec, state: AgentState, watched: bool = False) -> NodeOutput:
        """Run a node that is not iterated (a function, or a generator answering at once)."""
        if self.observer.watching and not watched:
            watch = self.observer.node(spec.name, state)
            return await _watched(watch, self.run(spec, state, True))
        guard = self.guard
        timeout = self.timeout
        guard.start(timeout)
        guard.armed = True
        scope_token = current_scope.set(self.scope(state, spec))
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
        return normalize(value, spec.name, self.program.fields)

    async def _call(self, spec: NodeSpec, state: AgentState) -> Any:
        """Call a node that is not iterated: async ones directly, sync ones in a worker
        thread (awaiting what they return if it is awaitable)."""
        if spec.kind == ASYNC:
            return await spec.call(state, self.config)
        if spec.whole is not None:  # a generator node that can answer in one piece
            return await spec.whole(state, self.config)
        value = await asyncio.to_thread(spec.call, state, self.config)
        if inspect.isawaitable(value):
            value = await value
        return value

    # -- several nodes at once -------------------------------------------------------------

    async def parallel(
        self, specs: Sequence[NodeSpec], states: Sequence[AgentState], outputs: list[NodeOutput]
    ) -> AsyncGenerator[StreamChunk, None]:
        """Run several nodes at once; stream their deltas as they come; fail fast."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        results: list[NodeOutput | BaseException | None] = [None] * len(specs)

        limit = self.max_concurrency
        gate = asyncio.Semaphore(limit) if limit is not None and limit < len(specs) else None

        async def run(i: int, spec: NodeSpec) -> None:
            deadline = asyncio.timeout(self.timeout)
            waited = False
            try:
                if gate is not None:  # the node's time starts once it may run
                    await gate.acquire()
                    waited = True
                async with deadline:
                    results[i] = await self._in_task(spec, states[i], queue)
            except TimeoutError as exc:
                if deadline.expired():
                    error = timeout_error(spec, self.timeout)
                    error.__cause__ = exc
                    results[i] = error
                else:
                    results[i] = node_error(spec, exc)
            except BaseException as exc:
                results[i] = exc
            finally:
                if waited:
                    gate.release()  # type: ignore[union-attr]
                queue.put_nowait(_DONE)

        self.tasks = [asyncio.create_task(run(i, s)) for i, s in enumerate(specs)]
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
            if not self.stopping:
                raise
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
        finally:
            for task in self.tasks:
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
            self.tasks = []
        if self.stopping:
            raise Stopped
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                raise result
        outputs.extend(r for r in results if isinstance(r, NodeOutput))

    async def _in_task(
        self, spec: NodeSpec, state: AgentState, queue: asyncio.Queue[Any]
    ) -> NodeOutput:
        if self.observer.watching:
            watch = self.observer.node(spec.name, state)
            return await _watched(watch, self._run_in_task(spec, state, queue))
        return await self._run_in_task(spec, state, queue)

    async def _run_in_task(
        self, spec: NodeSpec, state: AgentState, queue: asyncio.Queue[Any]
    ) -> NodeOutput:
        current_scope.set(self.scope(state, spec))  # this task's own context
        chunks, want = self.chunks, self.want
        try:
            if spec.kind == ASYNC_GEN:
                output = NodeOutput()
                stream_deltas = StreamEvent.MESSAGE in want
                async for item in spec.call(state, self.config):
                    if isinstance(item, Message):
                        if not item.delta:
                            output.messages.append(item)
                        elif stream_deltas:
                            queue.put_nowait(chunks.message(item))
                    elif isinstance(item, NodeEvent):
                        if want:
                            queue.put_nowait(chunks.event(item))
                    elif isinstance(item, CustomEvent):
                        if StreamEvent.CUSTOM in want:
                            queue.put_nowait(chunks.custom(item))
                    elif isinstance(item, StreamChunk):
                        if want:
                            queue.put_nowait(item)
                    else:
                        self.collect(spec, item, output)
                return output
            value = await self._call(spec, state)
        except (GraphError, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise node_error(spec, exc) from exc
        return normalize(value, spec.name, self.program.fields)

    def collect(self, spec: NodeSpec, item: Any, output: NodeOutput) -> None:
        """Add what a generator node yielded (an update, a Command, a state) to its output."""
        part = normalize(item, spec.name, self.program.fields)
        output.messages.extend(part.messages)
        if part.fields:
            fields, reducers = output.fields, self.program.reducers
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


async def _watched(watch: NodeWatch, running: Coroutine[Any, Any, NodeOutput]) -> NodeOutput:
    """Run a node's coroutine with its span current and its start and end reported."""
    await watch.start()
    entered = watch.enter()
    try:
        output = await running
    except BaseException as exc:
        watch.leave(entered)
        await watch.end(exc, isinstance(exc, Stopped))
        raise
    watch.leave(entered)
    await watch.end(None)
    return output


__all__ = ["NodeRunner"]
