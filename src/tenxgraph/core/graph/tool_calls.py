"""Finding the tool calls a `ToolNode` has to answer: those of the last assistant message that
no tool message answers yet."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tenxgraph.core.state import Message
from tenxgraph.core.state.message_block import ToolCallBlock, ToolResultBlock


@dataclass(slots=True)
class ToolCall:
    """One call the model asked for. `error` is set when its arguments could not be read."""

    id: str
    name: str
    args: dict[str, Any]
    error: str | None = None


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


__all__ = ["ToolCall", "pending_calls", "tool_calls_of"]
