"""Helpers used by test modules in more than one place, each written once: conversation
pieces with ids of their own, tool calls and the results a run gave them, checks on lists of
messages, the two one-node graphs (an agent, a ToolNode), and a fake summary model.

User messages, run inputs, linear graphs and `texts` are in tests/core/graph/_support.py; fake
provider HTTP, `drain` and the scripted model (`Script`) are in tests/core/llm/_support.py.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tenxgraph.core.graph import Agent, CompiledGraph, StateGraph, ToolNode
from tenxgraph.core.llm import ModelInfo
from tenxgraph.core.state import Message, ToolCallBlock, ToolResultBlock
from tenxgraph.storage.checkpointer import BaseCheckpointer
from tenxgraph.utils.constants import END, START

_ids = itertools.count()


# -- conversation pieces --------------------------------------------------------------------


def msg(role: str, text: str | None = None) -> Message:
    """A text message from `role` (its text is the role's name unless given), with an id of
    its own."""
    text = role if text is None else text
    return Message.text_message(text, role, message_id=f"{role}-{next(_ids)}")  # type: ignore[arg-type]


def call(*call_ids: str) -> Message:
    """An assistant message calling `lookup(q=<id>)` once per id."""
    return Message(
        message_id=f"call-{next(_ids)}",
        role="assistant",
        content=[ToolCallBlock(id=c, name="lookup", args={"q": c}) for c in call_ids],
    )


def result(call_id: str) -> Message:
    """The tool message answering the call `call_id`."""
    return Message.tool_message(
        [ToolResultBlock(call_id=call_id, output=f"result of {call_id}")],
        message_id=f"result-{next(_ids)}",
    )


# -- tool calls and their results -----------------------------------------------------------


def tool_call(name: str, call_id: str | None = None, **args: Any) -> ToolCallBlock:
    """A call of tool `name` with `args` (its id `call_<name>` unless given)."""
    return ToolCallBlock(id=call_id or f"call_{name}", name=name, args=args)


def asking(*calls: ToolCallBlock, message_id: str | None = None, **fields: Any) -> Message:
    """An assistant message asking for `calls`."""
    message = Message(role="assistant", content=list(calls), **fields)
    if message_id is not None:
        message.message_id = message_id
    return message


def results(messages: Iterable[Message]) -> dict[str, ToolResultBlock]:
    """The tool results among `messages`, by call id."""
    return {
        b.call_id: b
        for m in messages
        if m.role == "tool"
        for b in m.content
        if isinstance(b, ToolResultBlock)
    }


def tool_pairs_intact(messages: list[Message]) -> bool:
    """Every tool call in `messages` has its results there, and every result its call."""
    calls = {c.id for m in messages for c in m.tool_call_blocks()}
    results = {b.call_id for m in messages for b in m.content if isinstance(b, ToolResultBlock)}
    return calls == results


# -- lists of messages ----------------------------------------------------------------------


def roles(messages: Iterable[Message]) -> list[str]:
    """The role of each message."""
    return [m.role for m in messages]


def same_objects(got: Sequence[Message], expected: Sequence[Message]) -> bool:
    """`got` holds exactly the message objects of `expected`, in order (not copies)."""
    return len(got) == len(expected) and all(g is e for g, e in zip(got, expected, strict=True))


def naive_add_messages(left: Sequence[Message], right: Sequence[Message]) -> list[Message]:
    """What `add_messages` documents, without any caching: `right` appended to `left`, less
    deltas and ids already there."""
    seen = {m.message_id for m in left}
    merged = list(left)
    for message in right:
        if message.delta or message.message_id in seen:
            continue
        seen.add(message.message_id)
        merged.append(message)
    return merged


# -- values ---------------------------------------------------------------------------------


def strict_json(value: Any) -> Any:
    """`value` through JSON without NaN or infinities: raises if it is not JSON-safe."""
    return json.loads(json.dumps(value, allow_nan=False))


# -- runs -----------------------------------------------------------------------------------


def thread() -> dict[str, Any]:
    """A run config on a thread of its own."""
    return {"thread_id": f"t-{uuid.uuid4().hex}"}


def single_agent(agent: Agent, checkpointer: BaseCheckpointer | None = None) -> CompiledGraph:
    """START -> agent -> END, kept by `checkpointer`."""
    graph = StateGraph()
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile(checkpointer=checkpointer)


def tools_only(tools: Iterable[Callable[..., Any]], **compile_options: Any) -> CompiledGraph:
    """START -> tools -> END: runs the calls of the assistant message in the input."""
    graph = StateGraph()
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    return graph.compile(**compile_options)


# -- a fake summary model -------------------------------------------------------------------


class Lookups:
    """A `lookup` tool that records the queries it ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def lookup(self, q: str) -> str:
        """Look something up."""
        self.ran.append(q)
        return f"found {q}"


def react(model: Callable[..., Any], tools: Lookups, **compile_options: Any) -> Any:
    """A ReactAgent on `model` (a FunctionModel's function) with the `lookup` tool."""
    from tenxgraph.core.llm import FunctionModel
    from tenxgraph.prebuilt import ReactAgent

    return ReactAgent(FunctionModel(model), [tools.lookup]).compile(**compile_options)


class Summarizer:
    """A FunctionModel function standing in for the summary model: answers "summary 1",
    "summary 2"... (or always `reply`), and keeps what it was asked."""

    def __init__(self, reply: str | None = None) -> None:
        self.reply = reply
        self.calls: list[tuple[list[Message], ModelInfo]] = []

    def __call__(self, messages: list[Message], info: ModelInfo) -> str:
        self.calls.append((messages, info))
        return self.reply if self.reply is not None else f"summary {len(self.calls)}"

    @property
    def asked(self) -> str:
        """The user message of the last summary request (summary so far + transcript)."""
        return self.calls[-1][0][-1].text()
