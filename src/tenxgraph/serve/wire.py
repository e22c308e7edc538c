"""tenxgraph messages and state in the JSON shapes LangGraph's server and clients use, and back.

LangGraph clients (the `langgraph-sdk` Python client, React `useStream`, Agent Chat UI) speak
LangChain message dicts; tenxgraph speaks `Message` with typed blocks. Serving a tenxgraph graph
behind the LangGraph API needs a translation both ways, kept here as pure functions (no I/O) so
the HTTP layer stays thin and every shape can be tested on its own.

What goes out (`message_to_wire`): ``{"type": "human"|"ai"|"system"|"tool", "content", "id",
"name", "additional_kwargs", "response_metadata"}``; ai messages add ``tool_calls``,
``invalid_tool_calls`` and ``usage_metadata``; tool messages add ``tool_call_id`` and
``status``. ``content`` is a string when the message is only text, else a list of parts:

- `TextBlock` -> ``{"type": "text", "text"}``
- `ImageBlock` -> ``{"type": "image_url", "image_url": {"url"}}`` (an http(s) URL or a
  ``data:<mime>;base64,`` URL); an image held by provider file id -> ``{"type": "image",
  "file_id", "mime_type"}``
- `AudioBlock`, `VideoBlock`, `DocumentBlock`, `DataBlock` -> LangChain v1 standard blocks
  ``{"type": "audio"|"video"|"file", "url"|"base64"|"file_id", "mime_type", "extras"}``;
  ``extras`` keeps what the standard block has no key for (filename, transcript, ...)
- `ReasoningBlock` -> ``{"type": "reasoning", "reasoning", "extras"}``, its text also in
  ``additional_kwargs["reasoning_content"]``
- `ToolCallBlock`, `RemoteToolCallBlock` (ai) -> ``tool_calls`` entries
- `ToolResultBlock` (tool) -> its output as text; ``tool_call_id``; ``status``
- anything else -> ``{"type": "non_standard", "value": <our block dump>}``

What comes in is read by `tenxgraph.serve.wire_in`: that, plus OpenAI-style ``role`` dicts,
LangChain v0 data blocks (``source_type``), a bare string (a user message) and our own
`Message` dump.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from tenxgraph.core.state.agent_state import AgentState
from tenxgraph.core.state.message import Message, TokenUsages
from tenxgraph.core.state.message_block import (
    AudioBlock,
    DataBlock,
    DocumentBlock,
    ImageBlock,
    MediaRef,
    ReasoningBlock,
    RemoteToolCallBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)


class WireError(ValueError):
    """A wire value tenxgraph cannot read: says what was wrong, where, and what is accepted."""


def _error(where: str, problem: str, accepted: str) -> WireError:
    return WireError(f"{where}: {problem}; accepted: {accepted}")


_TYPE_OF_ROLE = {"user": "human", "assistant": "ai", "system": "system", "tool": "tool"}
_MediaBlock = ImageBlock | AudioBlock | VideoBlock | DocumentBlock
_MEDIA_OF_WIRE: dict[str, type[_MediaBlock]] = {
    "image": ImageBlock,
    "audio": AudioBlock,
    "video": VideoBlock,
    "file": DocumentBlock,
}
_WIRE_MEDIA = {block: kind for kind, block in _MEDIA_OF_WIRE.items()}
_SOURCE_KEYS = {"url": "url", "file_id": "file_id", "data": "data_base64"}
# MediaRef fields the standard block has top-level keys for; the others travel in "extras"
_MEDIA_SOURCE = {"kind", "url", "file_id", "data_base64", "mime_type"}


# -- out --------------------------------------------------------------------------------------


def message_to_wire(message: Message) -> dict[str, Any]:
    """`message` as a LangChain message dict (see the module docstring for the shapes)."""
    kind = _TYPE_OF_ROLE[message.role]
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for block in message.content:
        if kind == "ai" and isinstance(block, ToolCallBlock | RemoteToolCallBlock):
            calls.append(block.model_dump(mode="json", include={"name", "args", "id"}))
            calls[-1]["type"] = "tool_call"
        elif kind == "tool" and isinstance(block, ToolResultBlock):
            parts.append({"type": "text", "text": _output_text(block.output)})
        else:
            parts.append(_part_to_wire(block))
    name = message.metadata.get("name")
    wire: dict[str, Any] = {
        "type": kind,
        "content": _collapse(parts),
        "id": str(message.message_id),
        "name": name if isinstance(name, str) else None,
        "additional_kwargs": _additional_kwargs(message),
        "response_metadata": _response_metadata(message),
    }
    if kind == "ai":
        invalid: list[dict[str, Any]] = []
        if not calls and message.tools_calls:
            calls, invalid = _openai_calls(message.tools_calls)
        wire["tool_calls"] = calls
        wire["invalid_tool_calls"] = invalid
        wire["usage_metadata"] = _usage_to_wire(message.usages)
    elif kind == "tool":
        results = [b for b in message.content if isinstance(b, ToolResultBlock)]
        failed = any(b.is_error or b.status == "failed" for b in results)
        wire["tool_call_id"] = results[0].call_id if results else ""
        wire["status"] = "error" if failed else "success"
    return wire


def chunk_to_wire(delta: Message) -> dict[str, Any]:
    """A streamed `delta=True` assistant message as an ``AIMessageChunk`` dict: its text as
    content, its partial tool calls as ``tool_call_chunks``, the final message's id."""
    text = "".join(b.text for b in delta.content if isinstance(b, TextBlock))
    chunks: list[dict[str, Any]] = []
    for position, fragment in enumerate(delta.tools_calls or ()):
        function, index = fragment.get("function") or {}, fragment.get("index")
        index = index if isinstance(index, int) else position
        args = function.get("arguments")
        chunks.append(_call_chunk(function.get("name"), args, fragment.get("id"), index))
    if not chunks:  # a provider that streams whole calls puts them in the content
        for position, call in enumerate(delta.tool_call_blocks()):
            args = json.dumps(call.model_dump(mode="json")["args"])
            chunks.append(_call_chunk(call.name, args, call.id, position))
    return {
        "type": "AIMessageChunk",
        "content": text,
        "id": str(delta.message_id),
        "name": None,
        "additional_kwargs": _additional_kwargs(delta),
        "response_metadata": {},
        "tool_calls": [],
        "invalid_tool_calls": [],
        "usage_metadata": _usage_to_wire(delta.usages),
        "tool_call_chunks": chunks,
    }


def values_to_wire(state: AgentState) -> dict[str, Any]:
    """`state` as LangGraph thread values: the conversation under ``messages``, then every other
    public field, JSON-ready."""
    # `context` goes out as `messages`. `execution_meta` is the runtime's bookkeeping (step,
    # status, interrupt, thread id): LangGraph reports that as run status and `interrupts`,
    # never in values, and a client could not send it back. `context_summary` stays: it is
    # conversation content (what a context manager condensed), readable by a UI.
    values = state.model_dump(mode="json", exclude={"context", "execution_meta"})
    if "messages" in values:
        raise _error(
            f"{type(state).__name__}.messages",
            "this field would hide the conversation, which goes out under 'messages'",
            "any other field name",
        )
    return {"messages": [message_to_wire(m) for m in state.context], **values}


def _call_chunk(name: Any, args: Any, call_id: Any, index: int) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "index": index, "type": "tool_call_chunk"}


def _collapse(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def _output_text(output: Any) -> str:
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    if isinstance(output, BaseModel):
        return output.model_dump_json()
    return json.dumps(output, ensure_ascii=False, default=str)


def _part_to_wire(block: BaseModel) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ReasoningBlock):
        extras = block.model_dump(mode="json", exclude={"type", "summary"}, exclude_none=True)
        return {"type": "reasoning", "reasoning": block.summary, "extras": extras}
    if isinstance(block, ImageBlock) and block.media.kind != "file_id":
        return {"type": "image_url", "image_url": {"url": _url_of(block.media)}}
    if isinstance(block, ImageBlock | AudioBlock | VideoBlock | DocumentBlock):
        part = _media_to_wire(_WIRE_MEDIA[type(block)], block.media)
        extras = block.model_dump(mode="json", exclude={"type", "media"}, exclude_none=True)
        part["extras"] = {**part["extras"], **extras}
        return part
    if isinstance(block, DataBlock) and block.data_base64 is not None:
        return {"type": "file", "base64": block.data_base64, "mime_type": block.mime_type}
    if isinstance(block, DataBlock) and block.media is not None:
        return _media_to_wire("file", block.media)
    return {"type": "non_standard", "value": block.model_dump(mode="json")}


def _media_to_wire(kind: str, media: MediaRef) -> dict[str, Any]:
    key = {"url": "url", "file_id": "file_id", "data": "base64"}[media.kind]
    part: dict[str, Any] = {"type": kind, key: getattr(media, _SOURCE_KEYS[media.kind])}
    if media.mime_type is not None:
        part["mime_type"] = media.mime_type
    part["extras"] = media.model_dump(mode="json", exclude=_MEDIA_SOURCE, exclude_none=True)
    return part


def _url_of(media: MediaRef) -> str:
    if media.kind == "data":
        return f"data:{media.mime_type or 'image/png'};base64,{media.data_base64}"
    return str(media.url)


def _additional_kwargs(message: Message) -> dict[str, Any]:
    reasoning = message.reasoning or "".join(
        b.summary for b in message.content if isinstance(b, ReasoningBlock)
    )
    return {"reasoning_content": reasoning} if reasoning else {}


def _response_metadata(message: Message) -> dict[str, Any]:
    names = {"model": "model_name", "provider": "model_provider", "finish_reason": "finish_reason"}
    found = {wire: message.metadata.get(ours) for ours, wire in names.items()}
    return {key: value for key, value in found.items() if isinstance(value, str)}


def _openai_calls(raw: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Hand-built OpenAI-format `tools_calls` as LangChain tool calls, and the invalid ones."""
    valid: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    for call in raw:
        function = call.get("function") or {}
        wire = {
            "name": function.get("name"),
            "args": function.get("arguments"),
            "id": call.get("id"),
        }
        try:
            args = (
                wire["args"]
                if isinstance(wire["args"], dict)
                else json.loads(str(wire["args"] or "{}"))
            )
        except (TypeError, ValueError):
            args = None
        if isinstance(args, dict):
            valid.append(wire | {"args": args, "type": "tool_call"})
        else:
            invalid.append(wire | {"error": "arguments are not a JSON object"})
            invalid[-1]["type"] = "invalid_tool_call"
    return valid, invalid


def _usage_to_wire(usages: TokenUsages | None) -> dict[str, Any] | None:
    if usages is None:
        return None
    usage: dict[str, Any] = dict(
        input_tokens=usages.prompt_tokens, total_tokens=usages.total_tokens
    )
    usage["output_tokens"] = usages.completion_tokens
    cache = dict(cache_read=usages.cache_read_input_tokens)
    cache["cache_creation"] = usages.cache_creation_input_tokens
    if any(cache.values()):
        usage["input_token_details"] = cache
    if usages.reasoning_tokens:
        usage["output_token_details"] = {"reasoning": usages.reasoning_tokens}
    return usage


__all__ = [
    "WireError",
    "chunk_to_wire",
    "message_to_wire",
    "values_to_wire",
]
