"""The tool message a call ends as: built from what the tool returned (made JSON-safe by
`tool_output`) or from an error, written to the tool ledger, or replayed from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from tenxgraph.core.graph.ledger import ToolLedger
from tenxgraph.core.graph.tool_calls import ToolCall
from tenxgraph.core.graph.tool_output import safe_text, tool_output
from tenxgraph.core.graph.tool_updates import encoded, revived
from tenxgraph.core.redaction import redact
from tenxgraph.core.state import AgentState, Message, ToolResult
from tenxgraph.core.state.message_block import (
    MEDIA_BLOCK_TYPES,
    DataBlock,
    TextBlock,
    ToolResultBlock,
)
from tenxgraph.utils.command import Command
from tenxgraph.utils.interrupt import GraphInterrupt
from tenxgraph.utils.send import Send


@dataclass(slots=True)
class Outcome:
    """How one call ended: its tool message, its state updates, where the run goes next (a
    tool that returned `Command(goto=...)`), whether it came from the ledger, or the pause a
    tool asked for."""

    message: Message
    updates: dict[str, Any] | None = None
    replayed: bool = False
    interrupt: GraphInterrupt | None = None
    goto: list[str] | None = None
    parent: bool = False  # `goto` names nodes of the graph running this one (a subgraph's)


def tool_message(call: ToolCall, output: Any, is_error: bool) -> Message:
    block = ToolResultBlock(
        call_id=call.id,
        output=output,
        is_error=is_error,
        status="failed" if is_error else "completed",
    )
    meta = {"function_name": call.name, "function_argument": call.args, "tool_call_id": call.id}
    return Message.tool_message([block], meta=meta)


def error_outcome(call: ToolCall, text: str) -> Outcome:
    """An error result. Its text goes to the model provider and into the thread, so the
    credentials the process holds are redacted from it (a tool's exception may echo one)."""
    return Outcome(tool_message(call, f"Error: {redact(safe_text(text))}", True))


def result_outcome(call: ToolCall, value: Any) -> Outcome:
    """A tool's return value as its answer (see `tool_output`); a `ToolResult` also carries
    state updates, a `Command` updates and where the run goes next."""
    if isinstance(value, Command):
        return command_outcome(call, value)
    updates = None
    is_error = False
    if isinstance(value, ToolResult):
        updates = value.state
        is_error = bool(value.is_error)
        value = value.message
    if isinstance(value, Message):
        value = message_output(value)
    return Outcome(tool_message(call, tool_output(value), is_error), updates)


_OUTPUT_BLOCKS = (TextBlock, *MEDIA_BLOCK_TYPES, DataBlock)


def message_output(message: Message) -> Any:
    """What a tool that returned `message` answers: its text, or, when it holds media (an
    image, audio, video, a document, data), its text and media blocks as block dicts, which
    reach the model as media (see `tenxgraph.core.llm.wire_media.output_blocks`)."""
    blocks = [b for b in message.content if isinstance(b, _OUTPUT_BLOCKS)]
    if all(isinstance(b, TextBlock) for b in blocks):
        return message.text()
    return [
        b.model_dump(mode="json", exclude_none=True, exclude_defaults=True) | {"type": b.type}
        for b in blocks
    ]


def command_outcome(call: ToolCall, command: Command) -> Outcome:
    """A tool's `Command`: its `update` (field updates, or the answer as any tool may give
    it) and its `goto`, the nodes the run goes to after this step instead of the tool node's
    edges: how an agent hands the conversation to another (with `graph=Command.PARENT`,
    nodes of the graph running this one as a subgraph)."""
    given = command.goto
    names = [given] if isinstance(given, str | Send) else list(given or ())
    if not all(isinstance(name, str) for name in names):
        raise ValueError(
            f"Tool {call.name!r} returned Command(goto={given!r}): a tool hands the run to "
            "nodes by name; Send(...) is for a node's condition"
        )
    goto = cast(list[str], names)
    update = command.update
    if update is None or isinstance(update, dict):
        said = f"Handed over to {', '.join(goto)}." if goto else "Done."
        outcome = Outcome(tool_message(call, said, False), dict(update) if update else None)
    else:  # the answer as a tool gives it: text, a Message, a ToolResult...
        outcome = result_outcome(call, update)
    outcome.goto = goto or None
    outcome.parent = command.graph is not None
    return outcome


async def record(
    outcome: Outcome,
    call: ToolCall,
    ledger: ToolLedger,
    asked: str | int,
    state_type: type[AgentState],
) -> Outcome:
    """Write a finished call to the ledger; if another run recorded it first, that result is
    the one that happened."""
    state = encoded(outcome.updates) if outcome.updates else None
    if isinstance(state, str):  # the tool ran, but its updates cannot be kept: say so
        outcome, state = error_outcome(call, f"Tool {call.name!r} ran, but {state}"), None
    entry: dict[str, Any] = {"message": outcome.message, "state": state}  # JSON in the ledger
    if outcome.goto:
        entry["goto"] = outcome.goto
    if outcome.parent:
        entry["parent"] = True
    if not await ledger.put(asked, call.id, entry):
        again = await ledger.get(asked, call.id)
        if again is not None:
            return replayed(again, state_type)
    return outcome


def replayed(entry: dict[str, Any], state_type: type[AgentState]) -> Outcome:
    """A call's outcome as the ledger recorded it."""
    updates = entry.get("state")
    goto = entry.get("goto")
    return Outcome(
        Message.model_validate(entry["message"]),
        revived(state_type, updates) if updates else None,
        replayed=True,
        goto=[str(name) for name in goto] if isinstance(goto, list) and goto else None,
        parent=entry.get("parent") is True,
    )


__all__ = [
    "Outcome",
    "command_outcome",
    "error_outcome",
    "message_output",
    "record",
    "replayed",
    "result_outcome",
    "tool_message",
]
