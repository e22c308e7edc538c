"""Structured output: how a pydantic `output_schema` is asked for, read back, and repaired.

Three ways to ask (`output_mode`):

- ``"native"``: the provider's JSON-schema response format (litellm's ``response_format``);
- ``"tool"``: one extra tool named after the schema class, whose parameters are the schema,
  with ``tool_choice`` forcing it (or ``"required"`` when the Agent has tools of its own); its
  arguments are the answer;
- ``"text"``: instructions with the JSON schema in a system message; the JSON is read from
  the answer's text, code fences tolerated.

``"auto"`` picks per model from litellm's capability data (`LiteLLMClient.output_mode`).
Whatever the mode, an answer is read the same way: the output tool's arguments when the model
called it, else the JSON in its text. Pure functions; nothing here imports litellm.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from tenxgraph.core.state import Message
from tenxgraph.core.state.message_block import TextBlock, ToolCallBlock, ToolResultBlock

OutputMode = Literal["auto", "native", "tool", "text"]
OUTPUT_MODES: tuple[str, ...] = ("auto", "native", "tool", "text")

_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)


def output_tool_name(schema: type[BaseModel]) -> str:
    """The output tool's name: the schema class's name, as tool names may be written."""
    return _NAME_CHARS.sub("_", schema.__name__)[:64] or "final_result"


def output_tool(schema: type[BaseModel]) -> dict[str, Any]:
    """The OpenAI-format schema of the output tool for `schema`."""
    doc = (schema.__doc__ or "").strip()
    description = "Give the final answer by calling this tool with its fields."
    if doc and not doc.startswith(("A base class", "Usage docs")):
        description = f"{doc}\n\n{description}"
    return {
        "type": "function",
        "function": {
            "name": output_tool_name(schema),
            "description": description,
            "parameters": schema.model_json_schema(),
        },
    }


def forced_tool_choice(schema: type[BaseModel], has_other_tools: bool) -> Any:
    """The ``tool_choice`` of tool mode: the output tool itself, or any tool (``"required"``)
    when the model may first call the Agent's own tools."""
    if has_other_tools:
        return "required"
    return {"type": "function", "function": {"name": output_tool_name(schema)}}


def text_instructions(schema: type[BaseModel]) -> str:
    """The system message of text mode."""
    return (
        "Answer with one JSON object only (no other text) that matches this JSON schema:\n"
        + json.dumps(schema.model_json_schema(), ensure_ascii=False)
    )


def extract_json(text: str) -> str:
    """The JSON in an answer's text: inside a code fence when there is one, else from the
    first ``{`` to the last ``}`` when the text has more around it; as it is otherwise (so
    pydantic reports what is wrong with it)."""
    stripped = text.strip()
    fenced = _FENCE.search(stripped)
    if fenced is not None:
        return fenced.group(1).strip()
    if stripped.startswith(("{", "[")):
        return stripped
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        return stripped[start : end + 1]
    return stripped


def output_call(message: Message, schema: type[BaseModel]) -> ToolCallBlock | None:
    """The model's call of the output tool in `message`, if it made one."""
    name = output_tool_name(schema)
    for block in message.content:
        if isinstance(block, ToolCallBlock) and block.name == name:
            return block
    return None


def raw_answer(message: Message, schema: type[BaseModel]) -> str:
    """The answer's JSON text: the output tool's arguments as the model sent them, or the
    message text."""
    call = output_call(message, schema)
    if call is None:
        return message.text()
    for wire in message.tools_calls or ():
        if wire.get("id") == call.id:
            arguments = (wire.get("function") or {}).get("arguments")
            if isinstance(arguments, str):
                return arguments
    return json.dumps(call.args, ensure_ascii=False)


def parse(message: Message, schema: type[BaseModel]) -> BaseModel:
    """`message`'s answer validated by `schema`; raises pydantic's ValidationError."""
    text = raw_answer(message, schema)
    if output_call(message, schema) is None:
        text = extract_json(text)
    return schema.model_validate_json(text)


def error_text(error: ValidationError) -> str:
    """pydantic's message for `error`, without its documentation links."""
    return "\n".join(
        line for line in str(error).splitlines() if "errors.pydantic.dev" not in line
    ).strip()


def error_list(error: ValidationError) -> list[dict[str, Any]]:
    """pydantic's errors as plain data (no URLs, no exception objects)."""
    return json.loads(error.json(include_url=False))  # type: ignore[no-any-return]


def feedback(message: Message, schema: type[BaseModel], problem: str) -> list[Message]:
    """What the model is shown after its answer `message` failed validation: that answer and
    the errors (as the output tool's result in tool mode, else as a user message)."""
    call = output_call(message, schema)
    if call is not None:
        others = [b for b in message.content if isinstance(b, ToolCallBlock) and b is not call]
        results = [
            ToolResultBlock(call_id=call.id, output=_retry_prompt(schema, problem), is_error=True)
        ]
        # every other call of that message is answered too: providers want them paired
        results += [
            ToolResultBlock(call_id=b.id, output="Not run: the final answer was invalid.")
            for b in others
        ]
        return [message, Message(role="tool", content=results)]
    return [message, Message.text_message(_retry_prompt(schema, problem), "user")]


def _retry_prompt(schema: type[BaseModel], problem: str) -> str:
    return (
        f"Your answer did not match the {schema.__name__} schema. Validation errors:\n"
        f"{problem}\nAnswer again, correcting these errors."
    )


def final_answer(message: Message, schema: type[BaseModel], parsed: BaseModel) -> Message:
    """The answer the node returns: in tool mode, the output tool call becomes the answer's
    text (its JSON), so the stored conversation holds no call that no tool answers."""
    call = output_call(message, schema)
    if call is not None:
        text = raw_answer(message, schema)
        content = [b for b in message.content if b is not call]
        content.append(TextBlock(text=text))
        message = message.model_copy(
            update={
                "content": content,
                "tools_calls": None,
                "metadata": {**message.metadata, "output_tool": call.name},
            }
        )
    message.parsed_content = parsed
    return message


def without_output_call(message: Message, schema: type[BaseModel]) -> Message:
    """`message` without its output tool call, when it also calls the Agent's own tools: the
    tool loop goes on and the model answers later."""
    call = output_call(message, schema)
    if call is None:
        return message
    return message.model_copy(
        update={
            "content": [b for b in message.content if b is not call],
            "tools_calls": [c for c in message.tools_calls or () if c.get("id") != call.id] or None,
        }
    )


class OutputStream:
    """Under `astream` in tool mode: the output tool's argument pieces as text deltas (the
    final answer's text), the other tools' pieces as they are."""

    __slots__ = ("index", "name")

    def __init__(self, schema: type[BaseModel]) -> None:
        self.name = output_tool_name(schema)
        self.index: int | None = None

    def translate(self, delta: Message) -> Message | None:
        fragments = delta.tools_calls
        if not fragments:
            return delta
        text: list[str] = []
        kept: list[dict[str, Any]] = []
        for fragment in fragments:
            function: Mapping[str, Any] = fragment.get("function") or {}
            if function.get("name") == self.name:
                self.index = fragment.get("index")
            if self.index is not None and fragment.get("index") == self.index:
                arguments = function.get("arguments")
                if arguments:
                    text.append(arguments)
            else:
                kept.append(fragment)
        if len(kept) == len(fragments):
            return delta
        content = [b for b in delta.content if not isinstance(b, ToolCallBlock)]
        if text:
            content.append(TextBlock(text="".join(text)))
        if not content and not kept:
            return None
        return delta.model_copy(update={"content": content, "tools_calls": kept or None})


__all__ = [
    "OUTPUT_MODES",
    "OutputMode",
    "OutputStream",
    "error_list",
    "error_text",
    "extract_json",
    "feedback",
    "final_answer",
    "forced_tool_choice",
    "output_call",
    "output_tool",
    "output_tool_name",
    "parse",
    "raw_answer",
    "text_instructions",
    "without_output_call",
]
