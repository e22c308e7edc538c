"""Models that need no network: `TestModel` for tests and demos, `FunctionModel` when a test
wants to decide every answer. Both stream like a real provider: text in pieces, tool-call
arguments in fragments, then the complete message."""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from tenxgraph.core.llm.request import ModelRequest
from tenxgraph.core.llm.wire_in import openai_tool_call
from tenxgraph.core.state import Message, TokenUsages
from tenxgraph.core.state.message import _text_message, generate_id
from tenxgraph.core.state.message_block import (
    ContentBlock,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What a `FunctionModel` function is told besides the messages."""

    model: str
    tools: list[dict[str, Any]]
    output_schema: type[BaseModel] | None
    settings: dict[str, Any]


Reply = Message | str | ToolCallBlock | Sequence[ToolCallBlock] | BaseModel | dict[str, Any]


def openai_tool_calls(calls: Sequence[ToolCallBlock]) -> list[dict[str, Any]]:
    """The OpenAI-format `tools_calls` of `calls`."""
    return [openai_tool_call(c.id, c.name, json.dumps(c.args)) for c in calls]


def assistant_message(
    text: str = "",
    calls: Sequence[ToolCallBlock] = (),
    *,
    model: str,
    prompt: Sequence[Message] = (),
    parsed: BaseModel | None = None,
) -> Message:
    """An assistant answer as a provider adapter would build it, with usage counted in words
    so tests can check that usage adds up."""
    content: list[ContentBlock] = []
    if text:
        content.append(TextBlock(text=text))
    content.extend(calls)
    tools_calls = openai_tool_calls(calls)
    prompt_tokens = sum(len(m.text().split()) + 1 for m in prompt)
    completion_tokens = len(text.split()) + sum(1 + len(c.args) for c in calls)
    return Message(
        role="assistant",
        content=content,
        tools_calls=tools_calls or None,
        usages=TokenUsages(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
        ),
        metadata={
            "provider": "offline",
            "model": model,
            "finish_reason": "tool_calls" if calls else "stop",
        },
        parsed_content=parsed,
    )


async def stream_pieces(message: Message, piece_words: int = 2) -> AsyncIterator[Message]:
    """`message` as a provider would stream it: text a few words at a time, each tool call's
    arguments in two fragments, then the complete message itself (same id)."""
    message_id = message.message_id
    for block in message.content:
        if isinstance(block, TextBlock):
            words = block.text.split(" ")
            for i in range(0, len(words), piece_words):
                piece = " ".join(words[i : i + piece_words])
                if i + piece_words < len(words):
                    piece += " "
                yield _text_message(piece, "assistant", message_id, True)
    for index, call in enumerate(message.tool_call_blocks()):
        arguments = json.dumps(call.args)
        half = len(arguments) // 2
        for position, fragment in enumerate((arguments[:half], arguments[half:])):
            first = position == 0
            yield Message(
                message_id=message_id,
                role="assistant",
                content=[],
                delta=True,
                tools_calls=[
                    {
                        "index": index,
                        "id": call.id if first else None,
                        "function": {"name": call.name if first else None, "arguments": fragment},
                    }
                ],
            )
    yield message


def _since_last_user(messages: Sequence[Message]) -> list[Message]:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            return list(messages[i + 1 :])
    return list(messages)


class TestModel:
    """An offline model: it calls every offered tool once (arguments made up from each tool's
    JSON schema), then answers with a text summary of the tool results. With an output schema
    it answers with a made-up object of that schema. Select it with `Agent("test")`."""

    __test__ = False  # not a pytest test class
    free = True  # its calls cost nothing (a run's cost counts them at 0, not as unknown)

    def __init__(self, *, text: str | None = None, call_tools: bool | Sequence[str] = True) -> None:
        self.text = text
        self.call_tools = call_tools
        self.model_name = "test"

    def _tools_to_call(self, request: ModelRequest, recent: list[Message]) -> list[dict[str, Any]]:
        if self.call_tools is False:
            return []
        called = {c.name for m in recent if m.role == "assistant" for c in m.tool_call_blocks()}
        offered = [t.get("function", t) for t in request.tools]
        if self.call_tools is not True:
            wanted = set(self.call_tools)
            offered = [f for f in offered if f.get("name") in wanted]
        return [f for f in offered if f.get("name") not in called]

    def answer(self, request: ModelRequest) -> Message:
        recent = _since_last_user(request.messages)
        pending = self._tools_to_call(request, recent)
        if pending:
            calls = [
                ToolCallBlock(
                    id=f"call_{generate_id()}",
                    name=f["name"],
                    args=example_for_schema(f.get("parameters") or {}),
                )
                for f in pending
            ]
            return assistant_message(calls=calls, model="test", prompt=request.messages)
        if request.output_schema is not None:
            data = example_for_schema(request.output_schema.model_json_schema())
            parsed = request.output_schema.model_validate(data)
            return assistant_message(
                parsed.model_dump_json(), model="test", prompt=request.messages, parsed=parsed
            )
        return assistant_message(
            self.text if self.text is not None else _summary(recent, request.messages),
            model="test",
            prompt=request.messages,
        )

    async def acomplete(self, request: ModelRequest) -> Message:
        return self.answer(request)

    async def astream(self, request: ModelRequest) -> AsyncIterator[Message]:
        async for piece in stream_pieces(self.answer(request)):
            yield piece


def tool_results_by_name(messages: Sequence[Message]) -> dict[str, Any]:
    """The outputs of the tool results in `messages`, by the name of the tool that was called
    (the call id when the call is not among them)."""
    names = {c.id: c.name for m in messages for c in m.tool_call_blocks()}
    return {
        names.get(b.call_id, b.call_id): b.output
        for m in messages
        if m.role == "tool"
        for b in m.content
        if isinstance(b, ToolResultBlock)
    }


def _summary(recent: list[Message], messages: Sequence[Message]) -> str:
    results = tool_results_by_name(recent)
    if results:
        return "Tool results: " + json.dumps(results, default=str, ensure_ascii=False)
    asked = next((m.text() for m in reversed(messages) if m.role == "user"), "")
    return f"test answer to: {asked}" if asked else "test answer"


ReplyFunc = Callable[[list[Message], ModelInfo], Reply | Awaitable[Reply]]
StreamFunc = Callable[
    [list[Message], ModelInfo], AsyncIterator[str | ToolCallBlock | ReasoningBlock]
]


@dataclass
class FunctionModel:
    """An offline model whose answers come from `function(messages, info)`.

    The function returns a `str` (text), a `ToolCallBlock` or a list of them (tool calls), a
    pydantic object or dict (structured output), or a complete `Message`; it may be async.
    `stream_function`, if given, is an async generator of text pieces and `ToolCallBlock`s
    used under `astream`; without it the function's answer is streamed in pieces. It may also
    yield `ReasoningBlock` pieces, streamed as reasoning deltas the way a reasoning model's
    are; the final message then starts with one `ReasoningBlock` of them all (and has
    `reasoning` set), its usage counting them as reasoning tokens.
    """

    free = True  # its calls cost nothing (a run's cost counts them at 0, not as unknown)

    function: ReplyFunc
    stream_function: StreamFunc | None = None
    model_name: str = field(default="function")

    async def _reply(self, request: ModelRequest) -> Message:
        info = _info(request)
        value = self.function(list(request.messages), info)
        if inspect.isawaitable(value):
            value = await value
        return reply_message(value, request, self.model_name)

    async def acomplete(self, request: ModelRequest) -> Message:
        return await self._reply(request)

    async def astream(self, request: ModelRequest) -> AsyncIterator[Message]:
        if self.stream_function is None:
            async for piece in stream_pieces(await self._reply(request)):
                yield piece
            return
        message_id = generate_id()
        texts: list[str] = []
        calls: list[ToolCallBlock] = []
        thoughts: list[ReasoningBlock] = []
        async for item in self.stream_function(list(request.messages), _info(request)):
            if isinstance(item, str):
                texts.append(item)
                yield _text_message(item, "assistant", message_id, True)
            elif isinstance(item, ToolCallBlock):
                calls.append(item)
            elif isinstance(item, ReasoningBlock):
                thoughts.append(item)
                yield Message(
                    message_id=message_id,
                    role="assistant",
                    content=[item.model_copy()],
                    delta=True,
                    reasoning=item.summary,
                )
            else:
                raise TypeError(
                    "a FunctionModel stream_function yields str pieces, ToolCallBlocks or "
                    f"ReasoningBlocks, not {type(item).__name__}"
                )
        final = assistant_message(
            "".join(texts), calls, model=self.model_name, prompt=request.messages
        )
        final.message_id = message_id
        if thoughts:
            _add_reasoning(final, thoughts)
        yield final


def _add_reasoning(message: Message, thoughts: Sequence[ReasoningBlock]) -> None:
    """Put streamed reasoning pieces into the final message as a provider adapter does: one
    `ReasoningBlock` first (with the last signature given), `reasoning`, reasoning tokens."""
    summary = "".join(t.summary for t in thoughts)
    signature = next((t.signature for t in reversed(thoughts) if t.signature), None)
    message.content.insert(0, ReasoningBlock(summary=summary, signature=signature))
    message.reasoning = summary
    usage = message.usages
    if usage is not None:
        spent = len(summary.split())
        usage.reasoning_tokens = spent
        usage.completion_tokens += spent
        usage.total_tokens += spent


def _info(request: ModelRequest) -> ModelInfo:
    return ModelInfo(request.model, request.tools, request.output_schema, request.settings)


def reply_message(value: Any, request: ModelRequest, model: str) -> Message:
    """The assistant `Message` for what a `FunctionModel` function returned."""
    prompt = request.messages
    if isinstance(value, Message):
        if value.role != "assistant":
            raise ValueError(f"a FunctionModel must answer as the assistant, not {value.role!r}")
        if value.tools_calls is None and value.tool_call_blocks():
            value.tools_calls = openai_tool_calls(value.tool_call_blocks())
        return value
    if isinstance(value, str):
        return assistant_message(value, model=model, prompt=prompt)
    if isinstance(value, ToolCallBlock):
        return assistant_message(calls=[value], model=model, prompt=prompt)
    if isinstance(value, list | tuple) and all(isinstance(v, ToolCallBlock) for v in value):
        return assistant_message(calls=list(value), model=model, prompt=prompt)
    if isinstance(value, BaseModel | dict):
        schema = request.output_schema
        parsed = schema.model_validate(value) if schema is not None else None
        text = parsed.model_dump_json() if parsed is not None else json.dumps(value, default=str)
        return assistant_message(text, model=model, prompt=prompt, parsed=parsed)
    raise TypeError(
        "a FunctionModel function returns a str, a ToolCallBlock (or a list of them), a "
        f"pydantic object or dict, or a Message; got {type(value).__name__}"
    )


# -- made-up arguments from a JSON schema --------------------------------------------------


def example_for_schema(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """A value that satisfies `schema` (the subset tools use): defaults, enums and consts
    first, then the simplest value of the type."""
    defs = defs if defs is not None else schema.get("$defs", schema.get("definitions", {}))
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return example_for_schema(defs.get(ref.rsplit("/", 1)[-1], {}), defs)
    if "default" in schema:
        return schema["default"]
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = [o for o in schema.get(key, ()) if o.get("type") != "null"]
        if options:
            return example_for_schema(options[0], defs)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object" or "properties" in schema:
        return {
            name: example_for_schema(sub, defs)
            for name, sub in (schema.get("properties") or {}).items()
        }
    if kind == "array":
        item = example_for_schema(schema.get("items") or {}, defs)
        return [item] * max(1, int(schema.get("minItems", 1)))
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return float(schema.get("minimum", 0))
    if kind == "boolean":
        return False
    if kind == "string":
        return "a" * max(1, int(schema.get("minLength", 1)))
    return None


__all__ = [
    "FunctionModel",
    "ModelInfo",
    "TestModel",
    "assistant_message",
    "example_for_schema",
    "stream_pieces",
]
