"""Our messages -> the OpenAI chat format litellm takes for every provider. Pure functions."""

from __future__ import annotations

import json
from typing import Any

from tenxgraph.core.llm.wire_in import REDACTED_THINKING, openai_tool_call, parse_arguments
from tenxgraph.core.llm.wire_media import Where, media_parts, output_blocks
from tenxgraph.core.redaction import get_logger
from tenxgraph.core.state import Message
from tenxgraph.core.state.message_block import (
    AudioBlock,
    DataBlock,
    DocumentBlock,
    ImageBlock,
    ReasoningBlock,
    RemoteToolCallBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)

logger = get_logger(__name__)

# providers that want their thinking blocks (with signature) sent back on the next turn
_THINKING_PROVIDERS = frozenset({"anthropic", "bedrock", "vertex_ai"})


def to_wire(
    messages: list[Message], provider: str | None = None, model: str | None = None
) -> list[dict[str, Any]]:
    """The chat messages for `messages`, in the form litellm translates for `provider` (the
    litellm provider the model routes to; None: OpenAI's rules). Delta messages and remote
    tool calls are skipped; a tool message becomes one wire message per tool result.

    Media go out as `provider` takes them (see `wire_media`); one it cannot take raises
    `UnsupportedContentError` (nothing is sent). For OpenAI, whose tool messages hold only
    text, the media a tool returned follow the tool messages in a user message."""
    replay_thinking = provider in _THINKING_PROVIDERS
    where = Where(provider, model)
    in_tool = Where(provider, model, "tool result")
    wire: list[dict[str, Any]] = []
    tools = False  # any tool call or result: then check that they pair up
    for message in messages:
        # attributes, not `__dict__`: a sealed message makes its `__dict__` when it is read
        if message.delta:
            continue
        role = message.role
        blocks = message.content
        if (
            len(blocks) == 1
            and type(blocks[0]) is TextBlock
            and blocks[0].cache_control is None
            and role != "tool"
            and not (role == "assistant" and message.tools_calls)
        ):  # the common case, a plain text turn: what the general path below gives
            wire.append({"role": role, "content": blocks[0].text})
            continue
        if role == "tool":
            tools = True
            wire.extend(_tool_results(message, in_tool))
        elif role == "assistant":
            if any(isinstance(b, RemoteToolCallBlock) for b in message.content):
                continue
            out = _assistant(message, replay_thinking)
            tools = tools or "tool_calls" in out
            wire.append(out)
        else:
            wire.append({"role": role, "content": _content(message, where)})
    if not tools:
        return wire
    paired = _paired(wire)
    return _media_after_tools(paired) if any(_MEDIA in item for item in paired) else paired


# what the model is told about a call whose result never came (say, the process died while the
# tool ran): providers reject a history with an unanswered call
UNANSWERED_CALL = (
    "Error: this tool call has no result; the run stopped before the tool finished. "
    "Call the tool again if you still need it."
)


def _paired(wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history with every assistant tool call answered right after it (a stand-in error
    result for a missing one) and no tool result that answers no call: the shape every
    provider requires. The stored history is not changed."""
    out: list[dict[str, Any]] = []
    pending: list[str] = []  # calls of the last assistant message not answered yet
    for item in wire:
        if item["role"] == "tool":
            call_id = item.get("tool_call_id")
            if call_id in pending:
                pending.remove(call_id)
                out.append(item)
            else:
                logger.warning(
                    "dropped a tool result for call %r, which no call asked for", call_id
                )
            continue
        out.extend(_unanswered(pending))
        pending = [c["id"] for c in item.get("tool_calls") or ()]
        out.append(item)
    out.extend(_unanswered(pending))
    return out


def _unanswered(call_ids: list[str]) -> list[dict[str, Any]]:
    return [{"role": "tool", "tool_call_id": c, "content": UNANSWERED_CALL} for c in call_ids]


def _content(message: Message, where: Where) -> str | list[dict[str, Any]]:
    """A plain string for text-only content, else a list of OpenAI content parts."""
    blocks = message.content
    texts = [b.text for b in blocks if isinstance(b, TextBlock) and b.cache_control is None]
    if len(texts) == len(blocks):
        return "".join(texts)
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            parts.append(_text_part(block))
        elif isinstance(block, _MEDIA_BLOCKS):
            parts.extend(media_parts(block, where))
        elif isinstance(block, ToolResultBlock):
            parts.append({"type": "text", "text": _output_text(block.output)})
    return parts


_MEDIA_BLOCKS = (ImageBlock, AudioBlock, VideoBlock, DocumentBlock, DataBlock)


def _text_part(block: TextBlock) -> dict[str, Any]:
    """One text content part; with its prompt-cache breakpoint when it has one."""
    if block.cache_control is None:
        return {"type": "text", "text": block.text}
    return {"type": "text", "text": block.text, "cache_control": dict(block.cache_control)}


#: media an assistant turn holds (an image a model made, say): providers take text only there
_ASSISTANT_MEDIA = frozenset({"image", "audio", "video", "document", "data"})


def _assistant(message: Message, replay_thinking: bool) -> dict[str, Any]:
    texts = [b for b in message.content if isinstance(b, TextBlock)]
    text = "".join(b.text for b in texts)
    media = [b for b in message.content if getattr(b, "type", None) in _ASSISTANT_MEDIA]
    if media:  # said, not dropped: the model learns it gave something it cannot see again
        kinds = ", ".join(sorted({str(getattr(b, "type", "")) for b in media}))
        note = f"[{len(media)} {kinds} part(s) of this earlier answer are not shown again]"
        text = f"{text}\n{note}" if text else note
    out: dict[str, Any] = {"role": "assistant", "content": text or None}
    if any(b.cache_control is not None for b in texts):  # parts, to keep the breakpoint
        out["content"] = [_text_part(b) for b in texts]
    calls = [b for b in message.content if isinstance(b, ToolCallBlock)]
    if calls:
        raw_args = _raw_arguments(message)
        out["tool_calls"] = [
            openai_tool_call(call.id, call.name, raw_args.get(call.id) or json.dumps(call.args))
            for call in calls
        ]
    elif message.tools_calls:
        out["tool_calls"] = [_openai_call(call) for call in message.tools_calls]
    if out["content"] is None and "tool_calls" not in out:
        out["content"] = ""
    if replay_thinking:
        thinking = [
            {"type": "redacted_thinking", "data": b.signature}
            if b.details == [REDACTED_THINKING]
            else {"type": "thinking", "thinking": b.summary, "signature": b.signature}
            for b in message.content
            if isinstance(b, ReasoningBlock) and b.signature
        ]
        if thinking:
            out["thinking_blocks"] = thinking
    return out


def _raw_arguments(message: Message) -> dict[str, str]:
    """Arguments exactly as the model sent them, by call id: echoing them back unchanged keeps
    the provider's prompt cache warm. Arguments known to be invalid (cut short by max_tokens,
    say: their parse error is in `metadata["tool_call_errors"]`) are left out, so the call
    goes back with its parsed arguments (`{}`): servers such as llama.cpp refuse a history
    holding invalid JSON, and the tool result already tells the model what was wrong."""
    invalid = message.metadata.get("tool_call_errors") or ()
    found: dict[str, str] = {}
    for call in message.tools_calls or ():
        function = call.get("function") or {}
        arguments = function.get("arguments")
        call_id = call.get("id")
        if isinstance(arguments, str) and call_id and call_id not in invalid:
            found[call_id] = arguments
    return found


def _openai_call(call: dict[str, Any]) -> dict[str, Any]:
    """A hand-built OpenAI-format call, with arguments that are valid JSON: a string that does
    not parse goes out as `{}` (the tool layer answers it with the parse error)."""
    function = call.get("function") or {}
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments or {})
    elif parse_arguments(arguments)[1] is not None:
        arguments = "{}"
    return openai_tool_call(call.get("id"), function.get("name"), arguments)


def _tool_results(message: Message, where: Where) -> list[dict[str, Any]]:
    results = [b for b in message.content if isinstance(b, ToolResultBlock)]
    # media blocks beside the results (or in a tool message without any) belong to its last
    attached = [b for b in message.content if isinstance(b, _MEDIA_BLOCKS)]
    if not results:  # a tool message without result blocks: its text answers the first call
        call_id = message.metadata.get("tool_call_id")
        if not attached:
            return [{"role": "tool", "tool_call_id": call_id, "content": message.text()}]
        results = [ToolResultBlock(call_id=call_id or "", output=message.text())]
    *first, last = results
    return [*(_tool_result(b, where) for b in first), _tool_result(last, where, attached)]


# key of a wire tool message whose media go in the user message after the tool messages
_MEDIA = "_tenxgraph_media"


def _tool_result(block: ToolResultBlock, where: Where, attached: Any = ()) -> dict[str, Any]:
    """One tool message. Media the tool returned stay media: inside the tool message for
    Anthropic (``tool_result`` content) and Gemini (function response parts); for OpenAI,
    whose tool messages hold only text, they are kept aside for the next user message."""
    out: dict[str, Any] = {"role": "tool", "tool_call_id": block.call_id}
    blocks = output_blocks(block.output)
    if blocks is None:
        if not attached:
            out["content"] = _output_text(block.output)
            return out
        text = _output_text(block.output)
        blocks = [TextBlock(text=text)] if text else []
    blocks = [*blocks, *attached]
    text = "".join(b.text for b in blocks if isinstance(b, TextBlock))
    parts = [p for b in blocks if isinstance(b, _MEDIA_BLOCKS) for p in media_parts(b, where)]
    if where.family != "openai":
        out["content"] = ([{"type": "text", "text": text}] if text else []) + parts
        return out
    note = f"[{len(parts)} attachment(s) of this result follow in the next user message]"
    out["content"] = f"{text}\n{note}" if text else note
    out[_MEDIA] = parts
    return out


def _media_after_tools(wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`wire` with the media kept aside from a run of tool messages in one user message right
    after the run: OpenAI tool messages take only text, and a user message takes images."""
    out: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for item in wire:
        if item["role"] != "tool" and pending:
            out.append({"role": "user", "content": pending})
            pending = []
        media = item.pop(_MEDIA, None)
        if media:
            lead = f"Attachments of the result of tool call {item['tool_call_id']}:"
            pending += [{"type": "text", "text": lead}, *media]
        out.append(item)
    if pending:
        out.append({"role": "user", "content": pending})
    return out


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if output is None:
        return ""
    return json.dumps(output, default=str, ensure_ascii=False)


__all__ = ["UNANSWERED_CALL", "to_wire"]
