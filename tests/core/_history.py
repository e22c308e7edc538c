"""Conversation pieces for the context-window tests: text turns, tool calls and their
results, each with an id of its own."""

from __future__ import annotations

import itertools

from tenxgraph.core.state import Message, ToolCallBlock, ToolResultBlock

_ids = itertools.count()


def msg(role: str, text: str) -> Message:
    return Message.text_message(text, role, message_id=f"{role}-{next(_ids)}")  # type: ignore[arg-type]


def call(*call_ids: str) -> Message:
    """An assistant message calling `lookup(q=<id>)` once per id."""
    return Message(
        message_id=f"call-{next(_ids)}",
        role="assistant",
        content=[ToolCallBlock(id=c, name="lookup", args={"q": c}) for c in call_ids],
    )


def result(call_id: str) -> Message:
    return Message.tool_message(
        [ToolResultBlock(call_id=call_id, output=f"result of {call_id}")],
        message_id=f"result-{next(_ids)}",
    )
