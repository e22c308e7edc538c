"""`Observer`: what one run reports, and to whom.

Every run has one. It always adds up what the run's model calls cost (the result's
`token_usage` and the thread's running total); it tells hooks, OpenTelemetry and the
``tenxgraph`` loggers only what they listen for. With no hook, no tracer provider and INFO off,
a run pays a few attribute reads per step, a tally at each model call, and nothing per
streamed chunk.

The run's observer is reachable from the code it runs (`current_observer`), so a model call
or a tool call inside a node reports to it without being handed anything.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from tenxgraph.core.exceptions import LeaseLostError, NodeError, StaleStateError, ThreadBusyError
from tenxgraph.core.redaction import get_logger
from tenxgraph.core.state.agent_state import AgentState
from tenxgraph.core.state.execution_state import ExecutionState, ExecutionStatus
from tenxgraph.core.state.message import Message
from tenxgraph.core.state.spending import SPENT_KEY, Meter
from tenxgraph.core.state.usage import Usage
from tenxgraph.observability.hooks import Dispatch
from tenxgraph.observability.settings import tracing_module as _tracing
from tenxgraph.utils.interrupt import GraphInterrupt, current_scope

run_log = get_logger("tenxgraph.run")
model_log = get_logger("tenxgraph.model")
tool_log = get_logger("tenxgraph.tools")
thread_log = get_logger("tenxgraph.threads")

#: where a paused run's span is kept with the thread: `execution_meta.internal_data[TRACE_KEY]`
TRACE_KEY = "trace"


_events_module: list[Any] = []


def _events() -> Any:
    """The event records, imported by the first run that has hooks."""
    if not _events_module:
        from tenxgraph.observability import events

        _events_module.append(events)
    return _events_module[0]


class Observer:
    """One run's reports. `watching` is False when no hook and no tracer listen."""

    __slots__ = (
        "_base",
        "_run_cost",
        "_tallied",
        "content",
        "context",
        "counted",
        "graph",
        "hooks",
        "meter",
        "run_id",
        "span",
        "spent",
        "started",
        "thread_id",
        "tracer",
        "watching",
    )

    def __init__(
        self,
        run_id: str,
        thread_id: str,
        graph: str,
        hooks: Dispatch | None,
        tracer: Any,
        content: bool,
    ) -> None:
        self.run_id = run_id
        self.thread_id = thread_id
        self.graph = graph
        self.hooks = hooks
        self.tracer = tracer
        self.content = content and tracer is not None
        self.watching = hooks is not None or tracer is not None
        # what the run spent; from its first tally on, the thread's running total, which
        # that tally put in the state and which later counts add to in place
        self.spent = Usage()
        self.counted: set[str | int] = set()  # answers whose calls are in `spent`
        self.started = 0.0
        self.span: Any = None
        self.context: Any = None  # the OpenTelemetry context with the run's span
        self.meter: Meter | None = None  # the run's budget and spending, if it has a budget
        self._tallied = 0  # the model and tool calls `spent` held at the last tally
        self._base: Usage | None = None  # the thread's total before this run (first tally)
        self._run_cost = 0.0  # the run's priced cost, added up as counted (exact)

    # -- the run ---------------------------------------------------------------------------

    async def run_started(self) -> None:
        self.started = time.perf_counter()
        if self.tracer is not None:
            self.span, self.context = _tracing().start_run(
                self.tracer, self.graph, self.thread_id, self.run_id
            )
        if run_log.isEnabledFor(logging.INFO):
            run_log.info(
                "run started: graph=%s thread=%s run=%s", self.graph, self.thread_id, self.run_id
            )
        if self.hooks is not None:
            await self.hooks.emit(_events().RunStarted(self.run_id, self.thread_id, self.graph))

    def resumed(self, internal: dict[str, Any]) -> None:
        """This run continues one that paused (maybe in another process): link their spans,
        and go on from what it had spent."""
        paused = internal.get(TRACE_KEY)
        if self.span is not None and paused is not None:
            _tracing().link_to(self.span, paused)
        spent = internal.get(SPENT_KEY)
        if spent is not None:
            if self.meter is None:  # only an Agent of it has a budget
                self.meter = Meter(None)
            self.meter.spending.restore(spent)

    async def run_finished(
        self, error: BaseException | None, interrupt: tuple[str, str] | None
    ) -> None:
        taken = time.perf_counter() - self.started
        if error is None:
            status = "interrupted" if interrupt is not None else "completed"
        elif isinstance(error, Exception):
            status = "error"
        else:
            status = "cancelled"
        usage = self.usage
        if self.span is not None:
            _tracing().end_run(self.span, status, usage, error if status == "error" else None,
                               interrupt)  # fmt: skip
        if status == "error" and _conflict(error):  # another run has the thread: no traceback
            thread_log.warning(
                "run %s: graph=%s thread=%s run=%s after %.1f ms: %s",
                "rejected" if isinstance(error, ThreadBusyError) else "stopped", self.graph,
                self.thread_id, self.run_id, taken * 1e3, error,
            )  # fmt: skip
        elif status == "error":  # a node's error, logged here only (once, with its traceback)
            run_log.error(
                "run failed: graph=%s thread=%s run=%s after %.1f ms: %s: %s",
                self.graph, self.thread_id, self.run_id, taken * 1e3,
                type(error).__name__, error, exc_info=error,
            )  # fmt: skip
        elif run_log.isEnabledFor(logging.INFO):
            cost = usage.cost
            run_log.info(
                "run %s: graph=%s thread=%s run=%s in %.1f ms; %d model calls, %d input and "
                "%d output tokens, cost %s%s",
                status, self.graph, self.thread_id, self.run_id, taken * 1e3,
                usage.model_calls, usage.input_tokens, usage.output_tokens,
                "unknown" if cost is None else f"${cost:.6f}",
                "" if interrupt is None else f"; paused at {interrupt[0]} ({interrupt[1]})",
            )  # fmt: skip
        if self.hooks is not None:
            event = _events().RunFinished(
                self.run_id, self.thread_id, self.graph, status, taken, usage.copy(), error
            )
            await self.hooks.emit(event)

    async def interrupted(
        self, node: str, reason: str, data: dict[str, Any] | None, internal: dict[str, Any]
    ) -> None:
        """The run pauses: keep where its span is (for the run that resumes), tell hooks."""
        if self.span is not None:
            internal[TRACE_KEY] = _tracing().mark(self.span)
        else:  # an untraced run paused: a mark left by an earlier pause is not this one
            internal.pop(TRACE_KEY, None)
        if run_log.isEnabledFor(logging.INFO):
            run_log.info(
                "run paused: thread=%s run=%s at node %s (%s)", self.thread_id, self.run_id,
                node, reason,
            )  # fmt: skip
        if self.hooks is not None:
            await self.hooks.emit(
                _events().Interrupted(self.run_id, self.thread_id, node, reason, data)
            )

    @property
    def usage(self) -> Usage:
        """What this run spent (its own calls and tools, and its subgraphs')."""
        base = self._base
        return self.spent if base is None else self.spent.less(base, self._run_cost)

    def tally(self, meta: ExecutionState) -> None:
        """Put the thread's running total, with what was spent since the last tally, in
        `meta` (saved with the next checkpoint). The first tally that has something to add
        makes the total (the thread's before this run, plus the run's so far) and puts it in
        the state; the counts after it go into it in place, so a step pays no copy."""
        if self.meter is not None:
            self.meter.keep(meta.internal_data, meta.status == ExecutionStatus.COMPLETED)
        spent = self.spent
        counted = spent.model_calls + spent.tool_calls
        if counted == self._tallied:  # the usual step: no model call, no tool run
            return
        fields = meta.__dict__
        if fields["usage"] is not spent:
            if self._base is None:  # the thread's total before this run's first tally
                self._base = fields["usage"]
                total = self._base.copy()
                total.add(spent)
                spent = self.spent = total
                counted = spent.model_calls + spent.tool_calls
            fields["usage"] = spent  # a value of its own type: no check
            meta.__pydantic_fields_set__.add("usage")
        self._tallied = counted

    def absorb(self, other: Observer) -> None:
        """Count what a run nested in this one (a subgraph's) spent as this run's too."""
        theirs = other.spent
        if theirs.model_calls or theirs.tool_calls:
            self.spent.add(other.usage)
            self._run_cost += other._run_cost
            self.counted |= other.counted

    def count_tool(self) -> None:
        """Count one tool the run ran (for the thread's total: `Usage.tool_calls`)."""
        self.spent.tool_calls += 1

    def count_call(self, answer: Message, free: bool) -> float | None:
        """Count one model call's answer (once); its cost, 0 for a `free` (offline) model."""
        cost = answer.metadata.get("cost")
        if type(cost) is not float or cost - cost:  # (not 0.0: an infinite or NaN cost)
            cost = None if cost is None else _cost_of(cost)
            if cost is None and free:
                cost = 0.0
        key = answer.message_id
        counted = self.counted
        if key in counted:
            return cost
        counted.add(key)
        spent = self.spent  # (spelt out here rather than a method of `Usage`: every call)
        spent.model_calls += 1
        tokens = answer.usages
        if tokens is not None:
            spent.input_tokens += tokens.prompt_tokens
            spent.output_tokens += tokens.completion_tokens
            spent.reasoning_tokens += tokens.reasoning_tokens
            spent.cache_read_tokens += tokens.cache_read_input_tokens
            spent.cache_write_tokens += tokens.cache_creation_input_tokens
        if cost is None:
            spent.unpriced_calls += 1
        else:
            spent.priced_cost += cost
            self._run_cost += cost
        if self.meter is not None:
            spending = self.meter.spending
            if tokens is None:
                spending.add_usage(0, 0, cost)
            else:
                spending.add_usage(tokens.prompt_tokens, tokens.completion_tokens, cost)
        return cost

    def metered(self) -> Meter:
        """The run's meter, made for a node's own budget when the run has none."""
        if self.meter is None:
            self.meter = Meter(None)
        return self.meter

    def count_answers(self, messages: Sequence[Message]) -> None:
        """Count answers a node made without a model call we saw (its own client, say)."""
        counted = self.counted
        for message in messages:
            if message.usages is not None and message.message_id not in counted:
                self.count_call(message, False)

    # -- nodes -----------------------------------------------------------------------------

    def node(self, name: str, state: AgentState) -> NodeWatch:
        """A node execution to watch (only asked for when `watching`)."""
        return NodeWatch(self, name, state.execution_meta.step + 1)

    # -- model calls -----------------------------------------------------------------------

    def model_call(
        self,
        model: str,
        provider: str | None,
        streamed: bool,
        settings: Mapping[str, Any],
        messages: Sequence[Message],
        free: bool = False,
    ) -> ModelCall:
        span = None
        if self.tracer is not None:
            span = _tracing().start_model(
                self.tracer, model, provider, streamed, settings,
                messages if self.content else None,
            )  # fmt: skip
        return ModelCall(self, model, provider, streamed, span, free)

    # -- tool calls ------------------------------------------------------------------------

    def tool(self, node: str, tool: str, call_id: str, args: Any) -> ToolWatch | None:
        if not self.watching:
            return None
        span = None
        if self.tracer is not None:
            span = _tracing().start_tool(self.tracer, tool, call_id, args if self.content else None)
        return ToolWatch(self, node, tool, call_id, span)


def _conflict(error: BaseException | None) -> bool:
    """Whether the run failed because another run holds or took its thread."""
    return isinstance(error, ThreadBusyError | LeaseLostError | StaleStateError)


def _cost_of(cost: object) -> float | None:
    """An answer's ``metadata["cost"]`` as a float; None when it is not a finite number
    (a total that cannot be stored is no total)."""
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        try:
            cost = float(cost)
        except OverflowError:
            return None
        return cost if math.isfinite(cost) else None
    return None


class NodeWatch:
    """One node execution: its span (current while the node's code runs) and its hooks."""

    __slots__ = ("context", "left", "name", "observer", "started", "step")

    def __init__(self, observer: Observer, name: str, step: int) -> None:
        self.observer = observer
        self.name = name
        self.step = step
        self.started = 0.0
        self.context: Any = None
        self.left: Any = None  # the context the node's code left current at its last `leave`

    async def start(self) -> None:
        observer = self.observer
        self.started = time.perf_counter()
        if observer.tracer is not None:
            self.context = _tracing().start_node(
                observer.tracer, observer.context, self.name, self.step
            )
        if observer.hooks is not None:
            await observer.hooks.emit(
                _events().NodeStarted(observer.run_id, observer.thread_id, self.name, self.step)
            )

    def enter(self) -> object | None:
        """Make the node's span current (for what the node calls); the token to `leave`.
        A generator node is entered once per item: what it left current when it yielded (a
        span of its own open across the yield) is current again."""
        if self.context is None:
            return None
        token: object = _tracing().attach(self.context if self.left is None else self.left)
        return token

    def leave(self, token: object | None) -> None:
        if token is not None:
            tracing = _tracing()
            self.left = tracing.current()
            tracing.detach(token)

    async def end(self, error: BaseException | None, stopped: bool = False) -> None:
        """The node ended: done, failed with `error`, paused by an `interrupt()` in it,
        `stopped` (the run was asked to stop) or cancelled; only a failure is an error."""
        observer = self.observer
        failed = error if isinstance(error, Exception) and not stopped else None
        if self.context is not None:
            tracing = _tracing()
            span = tracing.span_of(self.context)
            if isinstance(error, GraphInterrupt):
                span.set_attribute("tenxgraph.paused", True)
            elif stopped:
                span.set_attribute("tenxgraph.stopped", True)
            elif error is not None and failed is None:
                span.set_attribute("tenxgraph.cancelled", True)
            cause = failed.__cause__ if isinstance(failed, NodeError) else None
            # the node's own exception (the run's caller gets it wrapped in a NodeError)
            tracing.finish(span, cause if isinstance(cause, Exception) else failed)
        if observer.hooks is not None:
            taken = time.perf_counter() - self.started
            await observer.hooks.emit(
                _events().NodeFinished(
                    observer.run_id, observer.thread_id, self.name, self.step, taken, failed
                )
            )


class ModelCall:
    """One call to one model, from the request to its answer (or failure)."""

    __slots__ = ("first", "free", "model", "observer", "provider", "span", "started", "streamed")

    def __init__(
        self,
        observer: Observer,
        model: str,
        provider: str | None,
        streamed: bool,
        span: Any,
        free: bool = False,
    ) -> None:
        self.free = free  # an offline model: its calls cost 0
        self.observer = observer
        self.model = model
        self.provider = provider
        self.streamed = streamed
        self.span = span
        self.started = time.perf_counter()
        self.first: float | None = None  # seconds to the first streamed piece

    def first_piece(self) -> None:
        if self.first is None:
            self.first = time.perf_counter() - self.started

    async def finished(self, answer: Message) -> None:
        observer = self.observer
        cost = observer.count_call(answer, self.free)
        if self.span is not None:
            _tracing().end_model(self.span, answer, cost, self.first, None, observer.content)
        if observer.hooks is not None:
            await self._emit(answer, cost, None)

    async def ended(self, answer: Message | None) -> None:
        """A stream ended: with its complete answer, or without one (an error)."""
        if answer is not None:
            await self.finished(answer)
        else:
            await self.failed(RuntimeError(f"the stream of {self.model} ended without an answer"))

    async def failed(self, error: BaseException) -> None:
        observer = self.observer
        if self.span is not None:
            _tracing().end_model(self.span, None, None, self.first, error, False)
            self.span = None
        if isinstance(error, Exception) and model_log.isEnabledFor(logging.INFO):
            model_log.info("model call to %s failed: %s", self.model, type(error).__name__)
        if observer.hooks is not None and isinstance(error, Exception):
            await self._emit(None, None, error)

    async def _emit(
        self, answer: Message | None, cost: float | None, error: BaseException | None
    ) -> None:
        observer = self.observer
        assert observer.hooks is not None
        reason = answer.metadata.get("finish_reason") if answer is not None else None
        await observer.hooks.emit(
            _events().ModelCallFinished(
                observer.run_id,
                observer.thread_id,
                _node_now(),
                self.model,
                self.provider,
                self.streamed,
                time.perf_counter() - self.started,
                answer.usages if answer is not None else None,
                cost,
                reason if isinstance(reason, str) else None,
                self.first,
                error,
            )
        )


class ToolWatch:
    """One tool call: its span and its hooks."""

    __slots__ = ("call_id", "node", "observer", "span", "started", "tool")

    def __init__(self, observer: Observer, node: str, tool: str, call_id: str, span: Any) -> None:
        self.observer = observer
        self.node = node
        self.tool = tool
        self.call_id = call_id
        self.span = span
        self.started = time.perf_counter()

    def enter(self) -> object | None:
        """Make the call's span current while the tool runs (for what the tool calls); the
        token to `leave`."""
        if self.span is None:
            return None
        tracing = _tracing()
        token: object = tracing.attach(tracing.with_span(self.span))
        return token

    def leave(self, token: object | None) -> None:
        if token is not None:
            _tracing().detach(token)

    async def end(
        self,
        result: Message | None,
        is_error: bool,
        replayed: bool,
        error: BaseException | None,
        paused: bool = False,
    ) -> None:
        """The call ended: with `result`, or raising `error`, or `paused` (the tool called
        `interrupt()`; no result yet, not an error)."""
        observer = self.observer
        if self.span is not None:
            shown = result if observer.content and not paused else None
            _tracing().end_tool(self.span, replayed, is_error, shown, error, paused)
        # a call that paused (or was cancelled) did not finish: when it does, it is told
        finished = not paused and (error is None or isinstance(error, Exception))
        if observer.hooks is not None and finished:
            taken = time.perf_counter() - self.started
            await observer.hooks.emit(
                _events().ToolFinished(
                    observer.run_id,
                    observer.thread_id,
                    self.node,
                    self.tool,
                    self.call_id,
                    taken,
                    is_error,
                    replayed,
                    error if isinstance(error, Exception) else None,
                )
            )


#: the observer of the run whose code is running (None outside a run)
current_observer: ContextVar[Observer | None] = ContextVar("tenxgraph_observer", default=None)


def _node_now() -> str | None:
    """The node whose code is running (its interrupt scope knows)."""
    scope = current_scope.get()
    return None if scope is None else scope.node


__all__ = [
    "TRACE_KEY",
    "ModelCall",
    "NodeWatch",
    "Observer",
    "ToolWatch",
    "current_observer",
]
