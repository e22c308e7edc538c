"""An MCP `CallToolResult` as what a tenxgraph tool returns (`ToolResult`).

- only text: the text (items joined by blank lines);
- `structured_content` with text that says the same (the JSON of it; servers are asked to send
  both): the structured content as JSON data; a ``{"result": value}`` the SDK's servers wrap a
  plain return in, with `value` as the text: `value`; text and structured content that differ:
  ``{"text": ..., "structured_content": ...}``;
- images, audio, embedded resources: a list of content blocks in tenxgraph's shape
  (``{"type": "image", "media": {"kind": "data", "mime_type": ..., "data_base64": ...}}``,
  see `tenxgraph.core.state.message_block`), plus ``{"structured_content": ...}`` around them
  when there is structured content too;
- `is_error`: an error result whose text starts with "Error: " (credentials redacted).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from mcp import types

from tenxgraph.core.redaction import redact
from tenxgraph.core.state import ToolResult
from tenxgraph.core.state.message_block import (
    AudioBlock,
    DataBlock,
    ImageBlock,
    MediaRef,
    TextBlock,
)

_NOTHING = object()


def _media(data: str, mime_type: str) -> MediaRef:
    try:
        size: int | None = len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        size = None
    return MediaRef(kind="data", data_base64=data, mime_type=mime_type, size_bytes=size)


def content_block(item: Any) -> dict[str, Any]:
    """One MCP content item as a tenxgraph content block (a JSON-safe dict)."""
    block: TextBlock | ImageBlock | AudioBlock | DataBlock
    if isinstance(item, types.TextContent):
        block = TextBlock(text=item.text)
    elif isinstance(item, types.ImageContent):
        block = ImageBlock(media=_media(item.data, item.mime_type))
    elif isinstance(item, types.AudioContent):
        block = AudioBlock(media=_media(item.data, item.mime_type))
    elif isinstance(item, types.EmbeddedResource):
        resource = item.resource
        if isinstance(resource, types.TextResourceContents):
            block = TextBlock(text=resource.text)
        else:
            block = DataBlock(
                mime_type=resource.mime_type or "application/octet-stream",
                data_base64=resource.blob,
            )
    elif isinstance(item, types.ResourceLink):
        block = TextBlock(text=f"{item.name}: {item.uri}")
    else:  # a kind of content this version does not know: its fields as the server sent them
        dump = getattr(item, "model_dump", None)
        return dict(dump(mode="json", exclude_none=True)) if callable(dump) else {"value": item}
    return block.model_dump(mode="json", exclude_none=True, exclude_defaults=True) | {
        "type": block.type
    }


def _text_or_data(text: str, structured: Any) -> Any:
    """The answer of a result with only text: the text, the structured content, or both when
    they say different things."""
    if structured is None:
        return text
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = _NOTHING
    if parsed == structured:
        return structured
    if isinstance(structured, dict) and structured.keys() == {"result"}:
        value = structured["result"]  # the SDK's servers wrap a str/list/... return this way
        if value in (text, parsed):
            return value
    if not text:
        return structured
    return {"text": text, "structured_content": structured}


def result_value(result: types.CallToolResult) -> ToolResult:
    """What the tool returns for `result` (see the module docstring)."""
    texts = [item.text for item in result.content if isinstance(item, types.TextContent)]
    text = "\n\n".join(texts)
    if result.is_error:
        said = redact(text) or "the MCP server reported an error"
        return ToolResult(f"Error: {said}", None, True)
    structured = result.structured_content
    if all(isinstance(item, types.TextContent) for item in result.content):
        return ToolResult(_text_or_data(text, structured))
    blocks = [content_block(item) for item in result.content]
    if structured is None:
        return ToolResult(blocks)
    return ToolResult({"structured_content": structured, "content": blocks})


__all__ = ["content_block", "result_value"]
