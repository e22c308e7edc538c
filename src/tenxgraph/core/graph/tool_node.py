"""`ToolNode`: runs the tool calls of the model's last answer, concurrently and replay-safely.

Every call ends as one tool message the model can read: a result (any return value, made
JSON-safe by `tool_output`), or an error it can act on (unknown tool, arguments that are not
JSON or fail validation, an exception, a timeout). A run never crashes on a bad call. Each
finished call is recorded in the run's tool ledger as soon as it returns; when the step runs
again (resumed after an `interrupt()`, or after a crash) recorded calls are replayed, not
executed twice. Calls of tools that require approval wait for a person's decision first
(`tool_approval`).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from tenxgraph.core.graph.ledger import ToolLedger, idempotency_key
from tenxgraph.core.graph.node import NodeEvent
from tenxgraph.core.graph.tool_approval import (
    APPROVAL_REASON,
    Decision,
    ask,
    read_decisions,
    rejected_text,
)
from tenxgraph.core.graph.tool_calls import ToolCall, pending_calls, tool_calls_of
from tenxgraph.core.graph.tool_output import describe_exception
from tenxgraph.core.graph.tool_results import (
    Outcome,
    error_outcome,
    record,
    replayed,
    result_outcome,
    tool_message,
)
from tenxgraph.core.graph.tool_spec import ToolSpec, tool_spec
from tenxgraph.core.graph.tool_updates import brief, refused
from tenxgraph.core.redaction import get_logger
from tenxgraph.core.state import AgentState, Message, StreamEvent
from tenxgraph.core.state.message_block import ToolResultBlock
from tenxgraph.core.state.spending import Meter
from tenxgraph.observability.observer import current_observer
from tenxgraph.utils.command import Command
from tenxgraph.utils.constants import DEFAULT_MAX_PARALLEL_TOOLS, DEFAULT_TOOL_TIMEOUT_SECONDS
from tenxgraph.utils.interrupt import GraphInterrupt, InterruptScope, current_scope

if TYPE_CHECKING:
    from tenxgraph.storage.store.base import BaseStore

log = get_logger("tenxgraph.tools")

_APPROVAL_WORDS = {"approve": "approved", "edit": "edited", "reject": "rejected"}


@dataclass(slots=True)
class _Step:
    """What the calls of one ToolNode step share."""

    state: AgentState
    config: dict[str, Any]
    asked: str | int | None  # the assistant message's id: with a call's id, its ledger key
    node: str
    ledger: ToolLedger | None
    time_limit: float | None
    answers: Mapping[str, Any]  # the answers to interrupts so far, by scope
    decisions: Mapping[str, Decision]  # approval decisions, by call id
    store: BaseStore | None = None  # the graph's long-term store, for tools taking `store`
    meter: Meter | None = None  # the run's tool-call budget, when it has one
    refused: frozenset[str] = frozenset()  # calls the budget had no room for

    @property
    def thread_id(self) -> str:
        if self.ledger is not None:
            return self.ledger.thread_id
        return str(self.config.get("thread_id") or "")


def _over_budget(step: _Step) -> str:
    limit = step.meter.tool_limit() if step.meter is not None else "the tool-call budget"
    return f"Not run: {limit} is used up. Answer with what you have."


def _to_parent(done: list[Outcome]) -> Command:
    """The calls' messages and updates, for the graph running this one, and the nodes there
    the tools that returned `Command(graph=Command.PARENT)` hand the run to."""
    update: dict[str, Any] = {"context": [o.message for o in done]}
    for outcome in done:
        update.update(outcome.updates or {})
    goto = [name for o in done if o.parent for name in (o.goto or ())]
    return Command(update=update, goto=list(dict.fromkeys(goto)) or None, graph=Command.PARENT)


class ToolNode:
    """A graph node that runs tools: ``graph.add_node("tools", ToolNode([search, refund]))``.

    `tools` are plain functions, sync or async (sync ones run in a worker thread), or
    `ToolSpec`s (`ToolSpec.from_schema`: a tool described by a JSON schema, such as an MCP
    server's). Each function's
    schema comes from its signature, type hints and docstring, or from `@tool(...)`; parameters
    named `state`, `config`, `store`, `tool_call_id` and `idempotency_key` are filled by the
    runtime, never shown to the model (`store`: the graph's, from `compile(store=...)`).
    Config keys: `max_parallel_tools` (default 8) and `tool_timeout` in seconds (default 300;
    None or 0 for none).

    `requires_approval` (True for every tool, or tool names) adds to the tools marked
    `@tool(requires_approval=True)`: before such a call runs, the node pauses the run for a
    person to approve, edit or reject it (see `tenxgraph.core.graph.tool_approval`)."""

    def __init__(
        self,
        tools: Iterable[Callable[..., Any]] = (),
        *,
        requires_approval: bool | Iterable[str] = False,
    ) -> None:
        self._tools: dict[str, ToolSpec] = {}
        self._approve_all = requires_approval is True
        self._approve: frozenset[str] = frozenset()
        self._gated = self._approve_all  # does any call need approval? (skips the check if not)
        for func in tools:
            self.add_tool(func)
        if not isinstance(requires_approval, bool):
            self._approve = _approval_names(requires_approval, self._tools)
            self._gated = self._gated or bool(self._approve)

    def add_tool(self, func: Callable[..., Any]) -> None:
        spec = tool_spec(func)
        if spec.name in self._tools and self._tools[spec.name].func is not spec.func:
            raise ValueError(f"Two tools are named {spec.name!r}; rename one with @tool(name=...)")
        self._tools[spec.name] = spec
        self._gated = self._gated or spec.requires_approval

    @property
    def tools(self) -> dict[str, ToolSpec]:
        """The tools by the name the model calls them."""
        return dict(self._tools)

    def requires_approval(self, name: str) -> bool:
        """Whether a call of tool `name` waits for a person's decision before it runs."""
        spec = self._tools.get(name)
        return spec is not None and (
            self._approve_all or spec.requires_approval or name in self._approve
        )

    def all_tools_sync(self, tags: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """The tools' OpenAI-format schemas (those with one of `tags`, if given)."""
        wanted = None if tags is None else frozenset([tags] if isinstance(tags, str) else tags)
        return [
            spec.schema for spec in self._tools.values() if wanted is None or spec.tags & wanted
        ]

    async def all_tools(self, tags: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """`all_tools_sync`, awaitable (the 10xgraph shape)."""
        return self.all_tools_sync(tags)

    def check_resume(self, asked: Mapping[str, Any], answer: Any) -> None:
        """Raise ValueError if `answer` cannot resume this node's pause `asked` (the stored
        interrupt): the engine calls it before the run writes anything, so a wrong answer to
        an approval leaves the thread paused as it was."""
        value = asked.get("value")
        if (
            asked.get("reason") != APPROVAL_REASON
            or not str(asked.get("key", "")).startswith("node:")  # not a tool's own interrupt()
            or not isinstance(value, dict)
        ):
            return
        listed = value.get("tool_calls") or []
        calls = [ToolCall(str(c["id"]), str(c["name"]), dict(c.get("args") or {})) for c in listed]
        if calls:
            read_decisions(answer, calls, self._tools)

    def __repr__(self) -> str:
        return f"ToolNode({sorted(self._tools)})"

    # -- the node --------------------------------------------------------------------------

    def _store_required_by(self) -> list[str]:
        """The tools taking a `store` without a default: the graph compiling this node must
        have a store (checked by `compile`)."""
        return sorted(
            name
            for name, spec in self._tools.items()
            if "store" in spec.injected and _store_required(spec.func)
        )

    async def __call__(
        self, state: AgentState, config: dict[str, Any], store: BaseStore | None = None
    ) -> AsyncIterator[Any]:
        found = pending_calls(state.context)
        if found is None:
            return
        asked, calls = found
        scope = current_scope.get()
        limit = config.get("max_parallel_tools", DEFAULT_MAX_PARALLEL_TOOLS)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"config['max_parallel_tools'] must be a positive int, got {limit!r}")
        step = _Step(
            state=state,
            config=config,
            asked=asked.message_id,
            node=scope.node if scope is not None else "tools",
            ledger=scope.ledger if scope is not None else None,
            time_limit=_time_limit(config),
            answers=state.execution_meta.internal_data.get("answers") or {},
            decisions={},
            store=store,
        )
        waiting: GraphInterrupt | None = None
        if self._gated:
            step.decisions, held, waiting = await self._decide(calls, step)
            calls = [c for c in calls if c.id not in held]
        observer = current_observer.get()
        meter = None if observer is None else observer.meter
        if (
            meter is not None
            and meter.budget is not None
            and meter.budget.max_tool_calls is not None
        ):
            step.meter = meter
            step.refused = frozenset(meter.allot_tools(await self._to_run(calls, step)))
        outcomes: list[Outcome | None] = [None] * len(calls)
        async for event in self._run_all(calls, step, limit, outcomes):
            yield event
        done = [o for o in outcomes if o is not None]
        if waiting is not None:  # the calls that needed no decision are recorded: now ask
            raise waiting
        for outcome in done:  # pause at the first tool that asked, once the others are recorded
            if outcome.interrupt is not None:
                raise outcome.interrupt
        if any(o.parent for o in done):  # handed to the parent graph: all of it goes there
            yield _to_parent(done)
            return
        yield [o.message for o in done]
        for outcome in done:
            if outcome.updates:
                yield outcome.updates
        goto = [name for o in done for name in (o.goto or ())]
        if goto:  # a tool handed the run on: there, not along this node's edges
            yield Command(goto=list(dict.fromkeys(goto)))

    async def _run_all(
        self, calls: list[ToolCall], step: _Step, limit: int, outcomes: list[Outcome | None]
    ) -> AsyncIterator[NodeEvent]:
        """Run `calls` concurrently (at most `limit` at once) into `outcomes`; when streaming,
        yield each call's start and end as they happen."""
        streaming = bool(step.config.get("is_stream"))
        events: asyncio.Queue[NodeEvent | None] = asyncio.Queue()
        gate = asyncio.Semaphore(limit)
        node = step.node

        async def one(i: int, call: ToolCall) -> None:
            try:
                async with gate:
                    if streaming:
                        events.put_nowait(_started(call, node))
                    started = time.perf_counter()
                    outcome = outcomes[i] = await self._run_call(call, step)
                    if streaming and outcome.interrupt is None:
                        spent = time.perf_counter() - started
                        events.put_nowait(_ended(call, node, outcome, spent))
            finally:
                events.put_nowait(None)

        tasks = [asyncio.create_task(one(i, c)) for i, c in enumerate(calls)]
        try:
            remaining = len(tasks)
            while remaining:
                event = await events.get()
                if event is None:
                    remaining -= 1
                else:
                    yield event
            for task in tasks:  # an unexpected failure of our own is not hidden
                task.result()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _decide(
        self, calls: list[ToolCall], step: _Step
    ) -> tuple[dict[str, Decision], set[str], GraphInterrupt | None]:
        """The decisions on the calls that need approval, or (when a person has not answered
        yet) the ids of those calls and the pause that asks for them."""
        gated = []
        for call in calls:
            if call.error is not None or not self.requires_approval(call.name):
                continue
            try:
                self._tools[call.name].validate(call.args)
            except ValidationError:  # the model gets the error: nothing to ask a person
                continue
            ledger, asked = step.ledger, step.asked
            if ledger is not None and asked is not None and await ledger.get(asked, call.id):
                continue  # decided and run before: replayed
            gated.append(call)
        if not gated:
            return {}, set(), None
        try:
            return ask(gated, self._tools), set(), None
        except GraphInterrupt as pause:
            return {}, {c.id for c in gated}, pause

    async def invoke(
        self,
        name: str,
        args: dict[str, Any],
        tool_call_id: str,
        config: dict[str, Any] | None = None,
        state: AgentState | None = None,
        store: BaseStore | None = None,
    ) -> Message:
        """Run one tool call outside a graph (no ledger, no approval: the caller decides)
        and return its tool message."""
        step = _Step(
            state=state if state is not None else AgentState(),
            config=config or {},
            asked=None,
            node="tools",
            ledger=None,
            time_limit=_time_limit(config or {}),
            answers={},
            decisions={},
            store=store,
        )
        outcome = await self._run_call(ToolCall(tool_call_id, name, args), step)
        if outcome.interrupt is not None:
            raise outcome.interrupt
        return outcome.message

    # -- one call --------------------------------------------------------------------------

    async def _run_call(self, call: ToolCall, step: _Step) -> Outcome:
        """One call's outcome, reported to the run's hooks and traces when any listen."""
        observer = current_observer.get()
        watch = (
            None if observer is None else observer.tool(step.node, call.name, call.id, call.args)
        )
        if watch is None:
            return await self._call_outcome(call, step)
        entered = watch.enter()
        try:
            outcome = await self._call_outcome(call, step)
        except BaseException as exc:
            watch.leave(entered)
            await watch.end(None, True, False, exc)
            raise
        watch.leave(entered)
        paused = outcome.interrupt is not None  # the tool asked a person: not a failure
        block = outcome.message.content[0] if outcome.message.content else None
        failed = not paused and isinstance(block, ToolResultBlock) and block.is_error
        await watch.end(outcome.message, failed, outcome.replayed, None, paused)
        return outcome

    async def _call_outcome(self, call: ToolCall, step: _Step) -> Outcome:
        decision = step.decisions.get(call.id) if step.decisions else None
        if decision is not None:
            if decision.kind == "reject":
                message = tool_message(call, rejected_text(call, decision.reason), True)
                message.metadata["approval"] = _APPROVAL_WORDS["reject"]
                return Outcome(message)
            if decision.kind == "edit" and decision.args is not None:
                call = ToolCall(call.id, call.name, decision.args)
        if call.error is not None:
            return error_outcome(call, f"{call.error}. Call the tool again with a JSON object.")
        spec = self._tools.get(call.name)
        if spec is None:
            known = ", ".join(sorted(self._tools)) or "none"
            return error_outcome(
                call, f"There is no tool named {call.name!r}. Available tools: {known}."
            )
        try:
            kwargs = spec.validate(call.args)
        except ValidationError as exc:
            return error_outcome(
                call,
                f"Invalid arguments for tool {call.name!r}: {brief(exc)}. Fix the arguments and "
                "call the tool again.",
            )
        ledger, asked = step.ledger, step.asked
        if ledger is not None and asked is not None:
            found = await ledger.get(asked, call.id)
            if found is not None:
                log.info(
                    "tool call %s (%s) of thread %s: its recorded result is replayed, the tool "
                    "is not run again", call.id, call.name, step.thread_id,
                )  # fmt: skip
                return replayed(found, type(step.state))
        if call.id in step.refused:
            return error_outcome(call, _over_budget(step))
        outcome = await self._execute(spec, call, kwargs, step)
        if outcome.interrupt is not None:
            if step.meter is not None:
                step.meter.tool_paused()  # it runs again on resume, counted then
        else:
            observer = current_observer.get()
            if observer is not None:  # the thread's total (what a thread budget counts)
                observer.count_tool()
        if decision is not None:
            outcome.message.metadata["approval"] = _APPROVAL_WORDS[decision.kind]
        if outcome.interrupt is None and ledger is not None and asked is not None:
            return await record(outcome, call, ledger, asked, type(step.state))
        return outcome

    async def _to_run(self, calls: list[ToolCall], step: _Step) -> list[str]:
        """The ids of the calls that would run a tool (not failing before it, not rejected,
        not replayed from the ledger), in the model's order: what a tool budget counts."""
        ids = []
        ledger, asked = step.ledger, step.asked
        for call in calls:
            decision = step.decisions.get(call.id) if step.decisions else None
            spec = self._tools.get(call.name)
            if call.error is not None or spec is None:
                continue
            if decision is not None and decision.kind == "reject":
                continue
            try:
                spec.validate(call.args)
            except ValidationError:
                continue
            if ledger is not None and asked is not None and await ledger.get(asked, call.id):
                continue
            ids.append(call.id)
        return ids

    @staticmethod
    def _failed(call: ToolCall, exc: Exception, step: _Step) -> Outcome:
        log.error(
            "tool %s (call %s) of thread %s raised; the model is told", call.name, call.id,
            step.thread_id, exc_info=exc,
        )  # fmt: skip
        return error_outcome(call, f"Tool {call.name!r} failed: {describe_exception(exc)}")

    async def _execute(
        self, spec: ToolSpec, call: ToolCall, kwargs: dict[str, Any], step: _Step
    ) -> Outcome:
        """Call the tool; whatever it returns or raises becomes the outcome."""
        injected = spec.injected
        if injected:
            _inject(injected, kwargs, call, step)
        answers = step.answers.get(f"tool:{call.id}", ()) if step.answers else ()
        scope = InterruptScope("tool", call.id, step.node, list(answers), call.id, step.ledger)
        token = current_scope.set(scope)
        time_limit = step.time_limit
        limit = asyncio.timeout(time_limit)
        try:
            async with limit:
                if spec.is_async:
                    value = await spec.func(**kwargs)
                else:
                    value = await asyncio.to_thread(spec.func, **kwargs)
        except GraphInterrupt as exc:
            return Outcome(tool_message(call, None, True), interrupt=exc)
        except TimeoutError as exc:
            if not limit.expired():  # the tool's own TimeoutError (its client gave up): its error
                return self._failed(call, exc, step)
            return error_outcome(
                call, f"Tool {call.name!r} did not finish within {time_limit:g} s and was stopped."
            )
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():  # the run is being stopped: so is the tool
                raise
            return error_outcome(
                call,
                f"Tool {call.name!r} failed: it raised CancelledError although nothing "
                "cancelled it (a task it awaited was cancelled?).",
            )
        except Exception as exc:  # the model reads the error and may try something else
            return self._failed(call, exc, step)
        finally:
            current_scope.reset(token)
        outcome = result_outcome(call, value)
        # an update for the parent graph (`Command.PARENT`) is that graph's to check
        problem = (
            refused(type(step.state), outcome.updates)
            if outcome.updates and not outcome.parent
            else None
        )
        if problem is not None:  # the tool ran: say so, and record that, not the update
            return error_outcome(call, f"Tool {call.name!r} ran, but {problem}")
        return outcome


def _approval_names(names: Iterable[str], tools: Mapping[str, ToolSpec]) -> frozenset[str]:
    if isinstance(names, str):
        raise TypeError(
            f"ToolNode(requires_approval=...) takes True or a list of tool names such as "
            f"[{names!r}], not a str"
        )
    chosen = frozenset(names)
    unknown = sorted(chosen - tools.keys())
    if unknown:
        raise ValueError(
            f"ToolNode(requires_approval=...) names {unknown}, which are not among its tools "
            f"{sorted(tools)}; use the names the model calls the tools by"
        )
    return chosen


def _inject(injected: frozenset[str], kwargs: dict[str, Any], call: ToolCall, step: _Step) -> None:
    """Fill the parameters the runtime provides."""
    if "state" in injected:
        kwargs["state"] = step.state
    if "config" in injected:
        kwargs["config"] = step.config
    if "store" in injected:
        kwargs["store"] = step.store
    if "tool_call_id" in injected:
        kwargs["tool_call_id"] = call.id
    if "idempotency_key" in injected:
        kwargs["idempotency_key"] = idempotency_key(step.thread_id, step.asked, call.id)


def _store_required(func: Callable[..., Any]) -> bool:
    """Whether `func`'s `store` parameter has no default."""
    try:
        param = inspect.signature(func).parameters.get("store")
    except (TypeError, ValueError):
        return False
    return param is not None and param.default is inspect.Parameter.empty


def _time_limit(config: dict[str, Any]) -> float | None:
    """Seconds each tool call may take: config's `tool_timeout`; None or 0 for no limit."""
    value: float | None = config.get("tool_timeout", DEFAULT_TOOL_TIMEOUT_SECONDS)
    return value or None


def _call_data(call: ToolCall, node: str) -> dict[str, Any]:
    return {"tool_name": call.name, "args": call.args, "tool_call_id": call.id, "node": node}


def _started(call: ToolCall, node: str) -> NodeEvent:
    return NodeEvent(StreamEvent.UPDATES, {"status": "invoking_tool", **_call_data(call, node)})


def _ended(call: ToolCall, node: str, outcome: Outcome, seconds: float) -> NodeEvent:
    block = outcome.message.content[0]
    data = {
        "status": "tool_result",
        **_call_data(call, node),
        "is_error": isinstance(block, ToolResultBlock) and block.is_error,
        "replayed": outcome.replayed,
        "duration_ms": round(seconds * 1e3, 3),
    }
    return NodeEvent(StreamEvent.MESSAGE, data, outcome.message)


__all__ = ["ToolCall", "ToolNode", "pending_calls", "tool_calls_of"]
