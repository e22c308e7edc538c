"""`ToolNode`: runs the tool calls of the model's last answer, concurrently and replay-safely.

Every call ends as one tool message the model can read: a result, or an error it can act on
(unknown tool, arguments that are not JSON or fail validation, an exception, a timeout). A run
never crashes on a bad call. Each finished call is recorded in the run's tool ledger as soon as
it returns; when the step runs again (resumed after an `interrupt()` in a tool, or after a
crash) recorded calls are replayed, not executed twice.
"""

from __future__ import annotations

import asyncio
import functools
import time
import typing
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from tenxgraph.core.graph.ledger import ToolLedger
from tenxgraph.core.graph.merge import RUNTIME_FIELDS
from tenxgraph.core.graph.node import NodeEvent
from tenxgraph.core.graph.tool_spec import ToolSpec, tool_spec
from tenxgraph.core.state import AgentState, Message, StreamEvent, ToolResult
from tenxgraph.core.state.message_block import ToolCallBlock, ToolResultBlock
from tenxgraph.utils.constants import DEFAULT_MAX_PARALLEL_TOOLS, DEFAULT_TOOL_TIMEOUT_SECONDS
from tenxgraph.utils.interrupt import GraphInterrupt, InterruptScope, current_scope


@dataclass(slots=True)
class ToolCall:
    """One call the model asked for. `error` is set when its arguments could not be read."""

    id: str
    name: str
    args: dict[str, Any]
    error: str | None = None


@dataclass(slots=True)
class _Outcome:
    message: Message
    updates: dict[str, Any] | None = None
    replayed: bool = False
    interrupt: GraphInterrupt | None = None


class ToolNode:
    """A graph node that runs tools: ``graph.add_node("tools", ToolNode([search, refund]))``.

    `tools` are plain functions, sync or async (sync ones run in a worker thread). Each tool's
    schema comes from its signature, type hints and docstring, or from `@tool(...)`; parameters
    named `state`, `config` and `tool_call_id` are filled by the runtime. Config keys:
    `max_parallel_tools` (default 8) and `tool_timeout` in seconds (default 300; None or 0
    for none)."""

    def __init__(self, tools: Iterable[Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, ToolSpec] = {}
        for func in tools:
            self.add_tool(func)

    def add_tool(self, func: Callable[..., Any]) -> None:
        spec = tool_spec(func)
        if spec.name in self._tools and self._tools[spec.name].func is not func:
            raise ValueError(f"Two tools are named {spec.name!r}; rename one with @tool(name=...)")
        self._tools[spec.name] = spec

    @property
    def tools(self) -> dict[str, ToolSpec]:
        """The tools by the name the model calls them."""
        return dict(self._tools)

    def all_tools_sync(self, tags: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """The tools' OpenAI-format schemas (those with one of `tags`, if given)."""
        wanted = None if tags is None else frozenset([tags] if isinstance(tags, str) else tags)
        return [
            spec.schema for spec in self._tools.values() if wanted is None or spec.tags & wanted
        ]

    async def all_tools(self, tags: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """`all_tools_sync`, awaitable (the 10xgraph shape)."""
        return self.all_tools_sync(tags)

    def __repr__(self) -> str:
        return f"ToolNode({sorted(self._tools)})"

    # -- the node --------------------------------------------------------------------------

    async def __call__(self, state: AgentState, config: dict[str, Any]) -> AsyncIterator[Any]:
        found = pending_calls(state.context)
        if found is None:
            return
        asked, calls = found
        scope = current_scope.get()
        node = scope.node if scope is not None else "tools"
        ledger: ToolLedger | None = scope.ledger if scope is not None else None
        limit = config.get("max_parallel_tools", DEFAULT_MAX_PARALLEL_TOOLS)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"config['max_parallel_tools'] must be a positive int, got {limit!r}")
        time_limit = _time_limit(config)
        answers = state.execution_meta.internal_data.get("answers") or {}
        run = functools.partial(
            self._run_call,
            state=state,
            config=config,
            asked=asked.message_id,
            node=node,
            ledger=ledger,
            time_limit=time_limit,
            answers=answers,
        )
        outcomes: list[_Outcome | None] = [None] * len(calls)
        streaming = bool(config.get("is_stream"))
        events: asyncio.Queue[NodeEvent | None] = asyncio.Queue()
        gate = asyncio.Semaphore(limit)

        async def one(i: int, call: ToolCall) -> None:
            try:
                async with gate:
                    if streaming:
                        events.put_nowait(_started(call, node))
                    started = time.perf_counter()
                    outcome = outcomes[i] = await run(call)
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
        done = [o for o in outcomes if o is not None]
        for outcome in done:  # pause at the first tool that asked, once the others are recorded
            if outcome.interrupt is not None:
                raise outcome.interrupt
        yield [o.message for o in done]
        for outcome in done:
            if outcome.updates:
                yield outcome.updates

    async def invoke(
        self,
        name: str,
        args: dict[str, Any],
        tool_call_id: str,
        config: dict[str, Any] | None = None,
        state: AgentState | None = None,
    ) -> Message:
        """Run one tool call outside a graph (no ledger) and return its tool message."""
        outcome = await self._run_call(
            ToolCall(tool_call_id, name, args),
            state=state if state is not None else AgentState(),
            config=config or {},
            asked=None,
            node="tools",
            ledger=None,
            time_limit=_time_limit(config or {}),
            answers={},
        )
        if outcome.interrupt is not None:
            raise outcome.interrupt
        return outcome.message

    # -- one call --------------------------------------------------------------------------

    async def _run_call(
        self,
        call: ToolCall,
        *,
        state: AgentState,
        config: dict[str, Any],
        asked: str | int | None,
        node: str,
        ledger: ToolLedger | None,
        time_limit: float | None,
        answers: dict[str, Any],
    ) -> _Outcome:
        if call.error is not None:
            return _error(call, f"{call.error}. Call the tool again with a JSON object.")
        spec = self._tools.get(call.name)
        if spec is None:
            known = ", ".join(sorted(self._tools)) or "none"
            return _error(call, f"There is no tool named {call.name!r}. Available tools: {known}.")
        try:
            kwargs = spec.validate(call.args)
        except ValidationError as exc:
            return _error(
                call,
                f"Invalid arguments for tool {call.name!r}: {_brief(exc)}. Fix the arguments and "
                "call the tool again.",
            )
        if ledger is not None and asked is not None:
            found = await ledger.get(asked, call.id)
            if found is not None:
                return _replay(found, type(state))
        if "state" in spec.injected:
            kwargs["state"] = state
        if "config" in spec.injected:
            kwargs["config"] = config
        if "tool_call_id" in spec.injected:
            kwargs["tool_call_id"] = call.id
        scope = InterruptScope(
            "tool", call.id, node, list(answers.get(f"tool:{call.id}", ())), call.id, ledger
        )
        token = current_scope.set(scope)
        try:
            async with asyncio.timeout(time_limit):
                if spec.is_async:
                    value = await spec.func(**kwargs)
                else:
                    value = await asyncio.to_thread(spec.func, **kwargs)
        except GraphInterrupt as exc:
            return _Outcome(_tool_message(call, None, True), interrupt=exc)
        except TimeoutError:
            outcome = _error(
                call, f"Tool {call.name!r} did not finish within {time_limit:g} s and was stopped."
            )
        except Exception as exc:  # the model reads the error and may try something else
            outcome = _error(call, f"Tool {call.name!r} failed: {type(exc).__name__}: {exc}")
        else:
            outcome = _result(call, value)
            problem = _refused(type(state), outcome.updates) if outcome.updates else None
            if problem is not None:  # the tool ran: say so, and record that, not the update
                outcome = _error(call, f"Tool {call.name!r} ran, but {problem}")
        finally:
            current_scope.reset(token)
        if ledger is not None and asked is not None:
            record = {  # the ledger encodes it to JSON, the message model included
                "message": outcome.message,
                "state": to_jsonable_python(outcome.updates, fallback=str)
                if outcome.updates
                else None,
            }
            if not await ledger.put(asked, call.id, record):
                # another run recorded this call first: its result is the one that happened
                again = await ledger.get(asked, call.id)
                if again is not None:
                    return _replay(again, type(state))
        return outcome


def _time_limit(config: dict[str, Any]) -> float | None:
    """Seconds each tool call may take: config's `tool_timeout`; None or 0 for no limit."""
    value: float | None = config.get("tool_timeout", DEFAULT_TOOL_TIMEOUT_SECONDS)
    return value or None


# -- finding the calls -----------------------------------------------------------------------


def pending_calls(context: Sequence[Message]) -> tuple[Message, list[ToolCall]] | None:
    """The last assistant message and those of its tool calls no tool message answers yet;
    None when it asked for no tool (or every call is answered)."""
    for position in range(len(context) - 1, -1, -1):
        message = context[position]
        if message.role == "assistant":
            break
    else:
        return None
    answered = {
        block.call_id
        for later in context[position + 1 :]
        if later.role == "tool"
        for block in later.content
        if isinstance(block, ToolResultBlock)
    }
    calls = [c for c in tool_calls_of(message) if c.id not in answered]
    return (message, calls) if calls else None


def tool_calls_of(message: Message) -> list[ToolCall]:
    """The tool calls of an assistant message: its `ToolCallBlock`s, or, for a message built
    by hand with only OpenAI-format `tools_calls`, those."""
    errors: dict[str, str] = message.metadata.get("tool_call_errors") or {}
    calls = [
        ToolCall(b.id, b.name, b.args, errors.get(b.id))
        for b in message.content
        if isinstance(b, ToolCallBlock)
    ]
    if calls or not message.tools_calls:
        return calls
    from tenxgraph.core.llm.wire_in import parse_arguments

    for raw in message.tools_calls:
        function = raw.get("function") or {}
        arguments = function.get("arguments")
        if isinstance(arguments, dict):
            args, error = arguments, None
        else:
            args, error = parse_arguments(arguments)
        calls.append(ToolCall(str(raw.get("id")), str(function.get("name")), args, error))
    return calls


# -- results ---------------------------------------------------------------------------------


def _tool_message(call: ToolCall, output: Any, is_error: bool) -> Message:
    block = ToolResultBlock(
        call_id=call.id,
        output=output,
        is_error=is_error,
        status="failed" if is_error else "completed",
    )
    meta = {"function_name": call.name, "function_argument": call.args, "tool_call_id": call.id}
    return Message.tool_message([block], meta=meta)


def _error(call: ToolCall, text: str) -> _Outcome:
    return _Outcome(_tool_message(call, f"Error: {text}", True))


def _result(call: ToolCall, value: Any) -> _Outcome:
    """A tool's return value as its answer: str as is, models and containers as JSON-ready
    data; a `ToolResult` also carries state updates."""
    updates = None
    is_error = False
    if isinstance(value, ToolResult):
        updates = value.state
        is_error = value.is_error
        value = value.message
    if isinstance(value, Message):
        value = value.text()
    output = value if value is None or isinstance(value, str) else _jsonable(value)
    return _Outcome(_tool_message(call, output, is_error), updates)


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return to_jsonable_python(value, fallback=str)


def _replay(record: dict[str, Any], state_type: type[AgentState]) -> _Outcome:
    updates = record.get("state")
    return _Outcome(
        Message.model_validate(record["message"]),
        _revived(state_type, updates) if updates else None,
        replayed=True,
    )


def _brief(exc: ValidationError) -> str:
    """pydantic's errors in one line a model can act on."""
    parts = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


# -- state updates from ToolResult -------------------------------------------------------------

_adapters: dict[tuple[type[AgentState], str, bool], TypeAdapter[Any] | None] = {}


def _adapter(state_type: type[AgentState], name: str, item: bool) -> TypeAdapter[Any] | None:
    """A validator for field `name`, or with `item` for one element of a list field (what a
    reducer like `append_items` may be given)."""
    key = (state_type, name, item)
    if key not in _adapters:
        annotation: Any = state_type.model_fields[name].annotation
        if item:
            args = typing.get_args(annotation)
            annotation = args[0] if typing.get_origin(annotation) is list and args else None
        _adapters[key] = None if annotation is None else TypeAdapter(annotation)
    return _adapters[key]


def _refused(state_type: type[AgentState], updates: dict[str, Any]) -> str | None:
    """Why the state would refuse a tool's updates, or None. A field with a reducer takes
    what its reducer takes, so only its name is checked."""
    fields = state_type.model_fields
    reducers = state_type.field_reducers()
    for name, value in updates.items():
        if name not in fields or name in RUNTIME_FIELDS:
            known = sorted(set(fields) - RUNTIME_FIELDS)
            return f"its ToolResult updates {name!r}, which is not a field it can set ({known})."
        adapter = None if name in reducers else _adapter(state_type, name, False)
        if adapter is not None:
            try:
                adapter.validate_python(value)
            except ValidationError as exc:
                return f"its ToolResult gives {name!r} an invalid value: {_brief(exc)}."
    return None


def _revived(state_type: type[AgentState], updates: dict[str, Any]) -> dict[str, Any]:
    """Updates read back from the ledger as JSON, turned into the fields' types again (models,
    enums); a value that fits neither the field nor one of its list items stays as it is."""
    revived = {}
    for name, value in updates.items():
        revived[name] = value
        if name not in state_type.model_fields:
            continue
        for item in (False, True):
            adapter = _adapter(state_type, name, item)
            if adapter is None:
                continue
            try:
                revived[name] = adapter.validate_python(value)
                break
            except ValidationError:
                continue
    return revived


def _call_data(call: ToolCall, node: str) -> dict[str, Any]:
    return {"tool_name": call.name, "args": call.args, "tool_call_id": call.id, "node": node}


def _started(call: ToolCall, node: str) -> NodeEvent:
    return NodeEvent(StreamEvent.UPDATES, {"status": "invoking_tool", **_call_data(call, node)})


def _ended(call: ToolCall, node: str, outcome: _Outcome, seconds: float) -> NodeEvent:
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
