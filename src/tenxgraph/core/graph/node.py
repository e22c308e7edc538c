"""How the engine calls a node and what it makes of the value the node returns.

Everything about a node that can be known in advance (its parameters, whether it is async, a
generator or sync) is worked out once, when the graph is compiled.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pydantic import ValidationError

from tenxgraph.core.exceptions import GraphError, NodeError
from tenxgraph.core.state import AgentState, Message, StreamEvent, ToolResult
from tenxgraph.utils.command import Command, ParentCommand
from tenxgraph.utils.record import FrozenRecord, Record
from tenxgraph.utils.send import Send

NodeFunc = Callable[..., Any]

ASYNC, SYNC, ASYNC_GEN = "async", "sync", "async_gen"

#: `NodeSpec.arg` of a node run as the graph's edges lead to it (not by a `Send`)
NO_ARG: Any = object()


class NodeOutput(Record):
    """A node's result, normalised: messages to add, fields to update, where to go next."""

    __match_args__ = ("messages", "fields", "goto", "state")
    __slots__ = __match_args__

    def __init__(
        self,
        messages: list[Message] | None = None,
        fields: dict[str, Any] | None = None,
        goto: list[str | Send] | None = None,
        state: AgentState | None = None,  # the node returned a state object: diff it
    ) -> None:
        self.messages: list[Message] = [] if messages is None else messages
        self.fields: dict[str, Any] = {} if fields is None else fields
        self.goto = goto
        self.state = state


class NodeEvent(FrozenRecord):
    """Progress a node reports while it runs (a `ToolNode`: a tool call started or ended).
    It goes out on `astream` as a chunk of its own, at every granularity; `ainvoke` drops it."""

    __match_args__ = ("event", "data", "message")
    __slots__ = __match_args__
    event: StreamEvent
    data: dict[str, Any]
    message: Message | None

    def __init__(
        self, event: StreamEvent, data: dict[str, Any], message: Message | None = None
    ) -> None:
        object.__setattr__(self, "event", event)
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "message", message)


class FieldUpdates(list[Any]):
    """Several updates of one reducer field from one node (say, parallel tool calls each
    returning a `ToolResult`): merged through the reducer one by one, in order."""


class NodeSpec(Record):
    """A node as compiled: how to call it, and its place in the graph's order."""

    __match_args__ = (
        "name",
        "func",
        "kind",
        "call",
        "index",
        "dynamic_goto",
        "whole",
        "key",
        "arg",
    )
    __slots__ = __match_args__

    def __init__(
        self,
        name: str,
        func: NodeFunc,
        kind: str,
        call: Callable[[Any, dict[str, Any]], Any],
        index: int,
        dynamic_goto: bool,  # may return Command(goto=...) to any node
        # a generator node's whole output as one awaitable, for runs that stream nothing
        whole: Callable[[Any, dict[str, Any]], Awaitable[Any]] | None = None,
        # one run of the node in a step: its name, or "name[i]" for the i-th `Send` to it
        # (its interrupt answers are kept under this key), and the payload that Send gave
        key: str = "",
        arg: Any = NO_ARG,
    ) -> None:
        self.name = name
        self.func = func
        self.kind = kind
        self.call = call
        self.index = index
        self.dynamic_goto = dynamic_goto
        self.whole = whole
        self.key = key or name
        self.arg = arg

    def sent(self, arg: Any, number: int) -> NodeSpec:
        """This node as the `number`-th `Send` of a step runs it: called with `arg`."""
        call, whole = self.call, self.whole
        return NodeSpec(
            self.name,
            self.func,
            self.kind,
            lambda state, config: call(arg, config),
            self.index,
            self.dynamic_goto,
            None if whole is None else (lambda state, config: whole(arg, config)),
            f"{self.name}[{number}]",
            arg,
        )


def _target(func: NodeFunc) -> Callable[..., Any]:
    """The function whose signature and async-ness describe calling `func`."""
    if inspect.isfunction(func) or inspect.ismethod(func) or inspect.isbuiltin(func):
        return func
    call = getattr(func, "__call__", None)  # noqa: B004 - instances with __call__
    if call is not None and not inspect.isclass(func):
        return call  # type: ignore[no-any-return]
    return func


def _kind(func: NodeFunc) -> str:
    target = _target(func)
    unwrapped = inspect.unwrap(target)
    if inspect.isasyncgenfunction(unwrapped) or inspect.isasyncgenfunction(target):
        return ASYNC_GEN
    if inspect.iscoroutinefunction(unwrapped) or inspect.iscoroutinefunction(target):
        return ASYNC
    return SYNC


#: `make_caller(store=...)` for callers the graph offers no store to (conditions)
NOT_OFFERED: Any = object()


def make_caller(
    name: str, func: NodeFunc, what: str = "Node", store: Any = NOT_OFFERED
) -> Callable[..., Any]:
    """A `call(state, config)` for `func`, from its signature.

    One required parameter not named `state`/`config`/`store` receives the state. Otherwise
    parameters named `state` and `config` are filled; any other required parameter is an
    error. A parameter named `store` receives the graph's store (`compile(store=...)`; nodes
    only): a required one when the graph has none is an error here, at compile time; an
    optional one then gets None.
    """
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):  # builtins without a signature: pass the state
        return lambda state, config: func(state)
    params = [
        p
        for p in signature.parameters.values()
        if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    runtime = ("state", "config") if store is NOT_OFFERED else ("state", "config", "store")
    required = [p for p in params if p.default is inspect.Parameter.empty]
    names = {p.name for p in params}
    if "store" in runtime and "store" in names:
        _check_store(name, what, store, next(p for p in params if p.name == "store"))
        return _with_store(name, what, func, required, names, store)
    if len(required) == 1 and required[0].name not in runtime:
        if required[0].kind is inspect.Parameter.KEYWORD_ONLY:
            key = required[0].name
            return lambda state, config: func(**{key: state})
        return lambda state, config: func(state)
    _check_required(name, what, required, runtime)
    wants_state, wants_config = "state" in names, "config" in names
    if wants_state and wants_config:
        return lambda state, config: func(state=state, config=config)
    if wants_state:
        return lambda state, config: func(state=state)
    if wants_config:
        return lambda state, config: func(config=config)
    return lambda state, config: func()


def _check_required(
    name: str, what: str, required: list[inspect.Parameter], runtime: tuple[str, ...]
) -> None:
    unknown = [p.name for p in required if p.name not in runtime]
    if unknown:
        raise GraphError(
            f"{what} {name!r} has required parameter(s) {unknown} that the graph cannot fill: "
            "a node takes `state`, `config`, `store`, or a single parameter that receives the "
            "state",
            "GRAPH_007",
            {"node": name, "parameters": unknown},
        )


def _check_store(name: str, what: str, store: Any, param: inspect.Parameter) -> None:
    if store is None and param.default is inspect.Parameter.empty:
        raise GraphError(
            f"{what} {name!r} takes a `store`, but the graph was compiled without one: pass "
            "compile(store=InMemoryStore()) (or SqliteStore/PostgresStore from "
            "tenxgraph.storage.store), or give the parameter a default (`store=None`)",
            "GRAPH_007",
            {"node": name, "parameters": ["store"]},
        )


def _with_store(
    name: str,
    what: str,
    func: NodeFunc,
    required: list[inspect.Parameter],
    names: set[str],
    store: Any,
) -> Callable[..., Any]:
    """The caller of a node taking `store`: the store bound now, at compile time (each
    compiled graph its own), the state and config as the run gives them."""
    others = [p for p in required if p.name not in ("state", "config", "store")]
    if len(others) == 1 and not names & {"state", "config"}:
        if others[0].kind is inspect.Parameter.KEYWORD_ONLY:
            key = others[0].name
            return lambda state, config: func(**{key: state}, store=store)
        return lambda state, config: func(state, store=store)
    if others:
        _check_required(name, what, others, ("state", "config", "store"))  # raises
    wanted = [n for n in ("state", "config") if n in names]

    def call(state: Any, config: dict[str, Any]) -> Any:
        given = {"state": state, "config": config}
        return func(**{n: given[n] for n in wanted}, store=store)

    return call


def _mentions_command(func: NodeFunc) -> bool:
    annotation = getattr(_target(func), "__annotations__", {}).get("return")
    return annotation is not None and "Command" in str(annotation)


def compile_node(name: str, func: NodeFunc, index: int, store: Any = None) -> NodeSpec:
    """A node as the engine runs it; `store` is the graph's (`compile(store=...)`), given to
    the node when it takes a `store` parameter."""
    return NodeSpec(
        name=name,
        func=func,
        kind=_kind(func),
        call=make_caller(name, func, store=store),
        index=index,
        dynamic_goto=_mentions_command(func),
        whole=_whole_of(func),
    )


def _whole_of(func: NodeFunc) -> Callable[[Any, dict[str, Any]], Awaitable[Any]] | None:
    """A node object's `_whole_output(state, config)`, when its class has one (the Agent):
    its output in one piece, the same its generator gives when nothing is streamed."""
    if getattr(type(func), "_whole_output", None) is None:  # on the class: never a mock's
        return None
    return func._whole_output  # type: ignore[attr-defined, no-any-return]


# -- results -------------------------------------------------------------------------------

_ACCEPTED = (
    "a Message, a list of Messages, a str, a dict of field updates, the state, a Command, "
    "a ToolResult or None"
)


def as_message(item: Any, node: str) -> Message:
    """A message from a node's output: a Message, a str (assistant text) or a message dict."""
    if isinstance(item, Message):
        return item
    if isinstance(item, str):
        return Message.text_message(item, "assistant")
    if isinstance(item, dict):
        try:
            return Message.model_validate(item)
        except ValidationError as exc:
            raise NodeError(
                f"Node {node!r} returned a message dict that is not a valid Message: {exc}",
                "NODE_002",
                {"node": node},
            ) from exc
    raise NodeError(
        f"Node {node!r} returned a {type(item).__name__} among its messages; "
        "messages must be Message objects or strings",
        "NODE_002",
        {"node": node},
    )


def normalize(value: Any, node: str, fields: frozenset[str]) -> NodeOutput:
    """Turn whatever a node returned into a `NodeOutput`."""
    if type(value) is Message:  # the usual answer: nothing to look into
        return NodeOutput([value])
    if type(value) is NodeOutput:  # made by the runtime's own nodes (a subgraph)
        return value
    out = NodeOutput()
    _collect(value, node, fields, out)
    return out


def _collect(value: Any, node: str, fields: frozenset[str], out: NodeOutput) -> None:
    if value is None:
        return
    if isinstance(value, Message):
        out.messages.append(value)
    elif isinstance(value, str):
        out.messages.append(Message.text_message(value, "assistant"))
    elif isinstance(value, dict):
        _collect_fields(value, node, fields, out)
    elif isinstance(value, AgentState):
        out.state = value
    elif isinstance(value, Command):
        if value.graph is not None:  # for the graph running this one, as it is
            raise ParentCommand(value)
        _collect(value.update, node, fields, out)
        if value.goto is not None:
            goto = value.goto
            out.goto = [goto] if isinstance(goto, str | Send) else list(goto)
    elif isinstance(value, ToolResult):
        if value.message is not None:
            out.messages.append(as_message(value.message, node))
        if value.state:
            _collect_fields(value.state, node, fields, out)
    elif isinstance(value, list | tuple):
        out.messages.extend(as_message(item, node) for item in value)
    else:
        raise NodeError(
            f"Node {node!r} returned {type(value).__name__}; a node may return {_ACCEPTED}",
            "NODE_002",
            {"node": node, "returned": type(value).__name__},
        )


def _collect_fields(
    update: dict[str, Any], node: str, fields: frozenset[str], out: NodeOutput
) -> None:
    for key, val in update.items():
        if key == "context":
            items: Sequence[Any] = val if isinstance(val, list | tuple) else [val]
            out.messages.extend(as_message(item, node) for item in items)
        elif key == "execution_meta":
            raise NodeError(
                f"Node {node!r} tried to set `execution_meta`, which belongs to the runtime; "
                "use Command(goto=...) to steer the run or a field of your own for your data",
                "NODE_002",
                {"node": node, "field": key},
            )
        elif key in fields:
            out.fields[key] = val
        else:
            hint = " (the conversation field is `context`)" if key == "messages" else ""
            raise NodeError(
                f"Node {node!r} returned an update for unknown field {key!r}{hint}; "
                f"the state's fields are {sorted(fields)}",
                "NODE_002",
                {"node": node, "field": key},
            )


__all__ = [
    "ASYNC",
    "ASYNC_GEN",
    "NOT_OFFERED",
    "NO_ARG",
    "SYNC",
    "FieldUpdates",
    "NodeEvent",
    "NodeOutput",
    "NodeSpec",
    "as_message",
    "compile_node",
    "make_caller",
    "normalize",
]
